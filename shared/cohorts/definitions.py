"""Cohort definitions (semantics-2.md §13.1–13.3): the validator and the canonical form.

    parse_cohort(body, existing=..., cohort_id=None) -> CohortDefinition     create body / whole cohort
    apply_patch(current, patch, existing=..., cohort_id=...) -> CohortDefinition   PATCH, one bulk-update item
    parse_raw_definition(definition, existing=...) -> CohortDefinition        /engage filter_by_cohort raw_cohort
    check_delete(cohort_ids, cohorts)                                         DELETE, bulk-delete
    CohortDefinition.canonical() / CohortDefinition.from_canonical(obj)       the stored JSON object

`existing` maps the ids of the project's stored cohorts to their definitions (a cohort of
another project is unknown here: the caller reads one project's cohorts only). Every failure
is a `CohortDefinitionError` (a `ParamError`, HTTP 400) whose message starts with the member at
fault as a path (`name`, `behaviors.bhvr_0.window.value`, `behaviors[1].event_selectors[0].event`,
`selector.children[2].operator`); for an expression the expression language's own message
follows, which names the position (`selector: syntax error at position 12: expected ')'`).
`.member` and `.position` hold the parts.

The rules, and the order in which they are checked (the first failure is reported): the body is
a JSON object; `name` (required, a string of 1–255 characters, not trimmed); `description`
(absent/null = "", a string of at most 1,000 characters); `is_visible` (true/false/0/1, absent/null
= 1, stored 0/1); `data_group_id` (absent or null); `add_distinct_ids`/`remove_distinct_ids`
(PATCH members, refused in a create body); the definition; then the reference graph (cycles, depth).
Unknown members are ignored, and so are the read-only ones a client echoes back (`id`,
`project_id`, `created`, `count`, `is_static`): `count` is never read.

* Definition: static (`distinct_ids` present and not null) or dynamic (`selector` and/or
  `behaviors` present and not null); both, or neither, is refused. A dynamic cohort needs a
  `selector`, checked after `behaviors` (which it reads); `behaviors` may be absent, null or {}
  (a profile-only cohort).
* Static: `distinct_ids` is an array of strings or integers (not booleans; integers are read as
  their text), each at most 255 characters; empty strings are dropped, duplicates collapse, the
  list is stored sorted by code point. `[]` is a valid (empty) static cohort.
* `behaviors`: an object key -> entry, or the /engage list form. At most 50. Keys (and the list
  form's names) are 1–64 characters `[A-Za-z0-9_]`; duplicate list names are refused. A behaviour
  that no selector reads is kept. Entry: `count` (an object) and one time constraint:
  `count.aggregationOperator` / `count.property` not null -> "not supported"; `count.type`
  "absolute" (absent/null) or "days"; exactly one of `count.event_selector` {"event", "selector"}
  and `count.event_selectors` [..] (non-empty, OR-ed); `event` a non-empty string; `selector`
  absent/null/"" = no filter, an EVENT expression, or a tree of and/or combinators whose leaves
  are `{"property": "event", ...}` property leaves; time: exactly one of `window`
  {"unit": day|week|month, "value": integer >= 1} and `from_date` + `to_date` (real `YYYY-MM-DD`
  dates, from_date <= to_date).
  List form `[{"name", "window": "<N>d", "event_selectors": [{"event", "selector"?}, ..]}]`
  becomes {name: {"count": {"event_selector": .., "type": "absolute"}, "window": {"unit": "day",
  "value": N}}} (several selectors: `event_selectors`); N is written without leading zeros.
* Selector tree: a node with a `children` member (even null), or with `operator` "and"/"or", is
  a combinator (`operator` and/or, `children` a non-empty array). Other nodes are leaves by
  `property`: "behaviors" (`value` a defined key, `operator` == != > >= < <=, `operand` an integer
  >= 0, not a boolean); "user" (`value` a non-empty string, `operator` also in, not in, defined,
  not defined, `type` string|number|boolean|datetime|list, default string; `operand` required unless
  defined/not defined, where it is dropped; it must suit the type: number -> a finite JSON number
  or a string number() accepts, datetime -> a string or number datetime() accepts (in [1900, 2300)),
  boolean -> a JSON boolean, string/list -> any JSON value; stored as given); "cohort" (`value` an
  integer, `operator` in / not in, then the reference resolved: `value` names a cohort in
  `existing`, not the cohort itself). Anything else is an unknown node kind.
* Selector string: a PROFILE expression (`user["x"]`, `properties["x"]`, `behaviors["k"]` with k
  defined); "" is refused. Kept verbatim.
* Limits: 50 behaviours; 200 selector nodes per cohort, counting every node (combinators and
  leaves) of the selector tree and of every behaviour's event-selector tree as sent (string
  selectors count 0; they have the expression language's own limits), each tree counted when it
  is reached, before its nodes are checked, and the tree that goes over the limit refused;
  reference depth (edges of the longest reference chain starting at a cohort) at most 10, for the
  saved cohort and for every cohort that reaches it.

Canonical (stored and returned) form, `CohortDefinition.canonical()`; parse_cohort(canonical)
gives it back:

    {"name", "description", "is_visible": 0|1, "is_static": true, "distinct_ids": [sorted ids]}
    {"name", "description", "is_visible": 0|1, "is_static": false,
     "selector": <tree | expression text>, "behaviors": {key: entry}}

Tree nodes keep exactly their documented members: combinator {"operator", "children"};
behaviour {"property", "value", "operator", "operand"}; user/event leaves {"property", "value",
"operator", "operand"?, "type"} with `type` filled in and no `operand` for defined/not defined;
cohort {"property", "value", "operator"}. Entry: {"count": {"event_selector": {"event",
"selector"}, "type"}, "window": {"unit", "value"}}, or with "from_date"/"to_date" in place of
"window"; `selector` is null, the expression text, or the canonical event tree; several
selectors: "event_selectors": [..]. It is the form of tests/oracle/cohorts.py's
`Cohort.body()` plus `is_static`.

PATCH (`apply_patch`): absent or null members leave the field unchanged; read-only members are
ignored. `name`/`description`/`is_visible`/`data_group_id` replace. `distinct_ids` replaces the
list (a dynamic cohort becomes static). `selector`/`behaviors` each replace their part (a static
cohort becomes dynamic, with `behaviors` = the patch's or {}); both kinds at once are refused. Then
`add_distinct_ids` are added and `remove_distinct_ids` removed (an id in both ends up absent;
removing a non-member is a no-op); either is refused on a cohort that is not static after the
patch, then validated like `distinct_ids`. Each of these edits is checked as it applies, in this
order; then the result is validated as a whole (from `name` on), with the cohort's own id, so
cycles through it are caught.
"""

from __future__ import annotations

import contextlib
import math
import re
import reprlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, NoReturn

from footfall.shared.errors import ParamError
from footfall.shared.expr import ExprError, check_expr, parse_expr
from footfall.shared.expr.check import DATETIME_MAX, DATETIME_MIN, epoch_seconds, parse_iso

__all__ = [
    "COMPARISONS",
    "COUNT_TYPES",
    "MAX_BEHAVIORS",
    "MAX_DEPTH",
    "MAX_DESCRIPTION",
    "MAX_DISTINCT_ID",
    "MAX_NAME",
    "MAX_NODES",
    "PROPERTY_OPERATORS",
    "READ_ONLY",
    "TYPES",
    "UNITS",
    "Behavior",
    "CohortDefinition",
    "CohortDefinitionError",
    "EventSelector",
    "apply_patch",
    "check_delete",
    "parse_cohort",
    "parse_raw_definition",
    "referrers_of",
]

MAX_NAME = 255
MAX_DESCRIPTION = 1000
MAX_BEHAVIORS = 50
MAX_NODES = 200
MAX_DEPTH = 10
MAX_DISTINCT_ID = 255
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
PROPERTY_OPERATORS = (*COMPARISONS, "in", "not in", "defined", "not defined")
PRESENCE = ("defined", "not defined")
TYPES = ("string", "number", "boolean", "datetime", "list")
UNITS = ("day", "week", "month")
COUNT_TYPES = ("absolute", "days")
READ_ONLY = ("id", "project_id", "created", "count", "is_static")


class CohortDefinitionError(ParamError):
    """An invalid cohort definition (400): "<member>: <problem>". `member` is the path of the member
    at fault ("" for the cohort as a whole), `position` the 0-based offset in an expression."""

    def __init__(self, member: str, problem: str, position: int | None = None) -> None:
        super().__init__(f"{member}: {problem}" if member else problem)
        self.member = member
        self.problem = problem
        self.position = position

    def within(self, prefix: str) -> CohortDefinitionError:
        """The same error for a definition nested at `prefix` (`cohorts[2]` of a bulk update)."""
        return CohortDefinitionError(f"{prefix}.{self.member}" if self.member else prefix, self.problem, self.position)


# ------------------------------------------------------------------------------------------- model
@dataclass(frozen=True)
class EventSelector:
    event: str
    selector: str | dict[str, Any] | None = None  # expression text, canonical event tree, or None

    def canonical(self) -> dict[str, Any]:
        return {"event": self.event, "selector": self.selector}


@dataclass(frozen=True)
class Behavior:
    selectors: tuple[EventSelector, ...]  # OR-ed: an event is counted once when it matches any
    type: str = "absolute"  # "absolute" | "days"
    window: tuple[str, int] | None = None  # (unit, value)
    dates: tuple[str, str] | None = None  # (from_date, to_date)

    def canonical(self) -> dict[str, Any]:
        count: dict[str, Any]
        if len(self.selectors) == 1:
            count = {"event_selector": self.selectors[0].canonical(), "type": self.type}
        else:
            count = {"event_selectors": [s.canonical() for s in self.selectors], "type": self.type}
        if self.window is not None:
            return {"count": count, "window": {"unit": self.window[0], "value": self.window[1]}}
        if self.dates is None:
            raise AssertionError("invariant: a behaviour has a window or dates")
        return {"count": count, "from_date": self.dates[0], "to_date": self.dates[1]}

    @classmethod
    def from_canonical(cls, entry: Mapping[str, Any]) -> Behavior:
        count = entry["count"]
        raw = [count["event_selector"]] if "event_selector" in count else list(count["event_selectors"])
        selectors = tuple(EventSelector(s["event"], s.get("selector")) for s in raw)
        if "window" in entry:
            window = entry["window"]
            return cls(selectors, count.get("type", "absolute"), (window["unit"], int(window["value"])), None)
        return cls(selectors, count.get("type", "absolute"), None, (entry["from_date"], entry["to_date"]))


@dataclass(frozen=True)
class CohortDefinition:
    """A validated cohort: metadata and a dynamic (`selector` + `behaviors`) or static
    (`distinct_ids`) definition."""

    name: str
    description: str = ""
    is_visible: int = 1
    selector: dict[str, Any] | str | None = None  # canonical tree or expression text; None when static
    behaviors: Mapping[str, Behavior] = field(default_factory=dict)
    distinct_ids: tuple[str, ...] | None = None  # sorted (static); None when dynamic

    @property
    def is_static(self) -> bool:
        return self.distinct_ids is not None

    def definition(self) -> dict[str, Any]:
        """`{"distinct_ids": [...]}` or `{"selector": ..., "behaviors": {...}}`."""
        if self.distinct_ids is not None:
            return {"distinct_ids": list(self.distinct_ids)}
        return {"selector": self.selector, "behaviors": {k: b.canonical() for k, b in self.behaviors.items()}}

    def canonical(self) -> dict[str, Any]:
        """The stored JSON object (see the module docstring)."""
        return {
            "name": self.name,
            "description": self.description,
            "is_visible": self.is_visible,
            "is_static": self.is_static,
            **self.definition(),
        }

    @classmethod
    def from_canonical(cls, obj: Mapping[str, Any]) -> CohortDefinition:
        """The definition of a stored canonical object, as stored (not validated again)."""
        common = (str(obj["name"]), str(obj.get("description") or ""), int(obj.get("is_visible", 1)))
        if obj.get("distinct_ids") is not None:
            return cls(*common, distinct_ids=tuple(obj["distinct_ids"]))
        behaviors = {k: Behavior.from_canonical(v) for k, v in (obj.get("behaviors") or {}).items()}
        return cls(*common, selector=obj["selector"], behaviors=behaviors)

    def references(self) -> frozenset[int]:
        """The ids of the cohorts its selector tree names."""
        out: set[int] = set()
        stack: list[Any] = [self.selector] if isinstance(self.selector, dict) else []
        while stack:
            node = stack.pop()
            if "children" in node:
                stack.extend(node["children"])
            elif node.get("property") == "cohort":
                out.add(int(node["value"]))
        return frozenset(out)


# ---------------------------------------------------------------------------- members and their paths
# Every JSON object of a definition is described by a tuple of `_Member`s that `_read` takes in
# order: the order of a tuple is the order of the checks, and `_read` gives each check the path of
# the member it reads, so that a refusal names it.


@dataclass
class _Scope:
    """One validation in progress: what a selector may name (the project's cohorts, the cohort's
    own id, its behaviour keys once read) and how many selector nodes the cohort may still have."""

    cohorts: Mapping[int, CohortDefinition]
    own_id: int | None = None
    behaviors: frozenset[str] = frozenset()
    nodes_left: int = MAX_NODES


Check = Callable[[Any, str, _Scope], Any]  # (value, its path, the validation) -> the value to store

_REQUIRED = object()  # a `_Member` default: absent or null is refused


@dataclass(frozen=True)
class _Member:
    name: str
    check: Check
    default: object = _REQUIRED  # taken when the member is absent or null


def _at(path: str, name: str) -> str:
    """The path of member `name` of the object at `path` ("" is the body itself)."""
    return f"{path}.{name}" if path else name


def _item(path: str, index: int) -> str:
    return f"{path}[{index}]"


def _refuse(path: str, problem: str, position: int | None = None) -> NoReturn:
    raise CohortDefinitionError(path, problem, position)


def _read(obj: Mapping[str, Any], path: str, members: Iterable[_Member], scope: _Scope) -> dict[str, Any]:
    """name -> checked value of each member of `obj` at `path`; the first refusal wins."""
    values: dict[str, Any] = {}
    for member in members:
        raw = obj.get(member.name)
        if raw is not None:
            values[member.name] = member.check(raw, _at(path, member.name), scope)
        elif member.default is _REQUIRED:
            _refuse(_at(path, member.name), "required")
        else:
            values[member.name] = member.default
    return values


def _quote(value: Any) -> str:
    """A client value in a message, shortened."""
    try:
        return reprlib.repr(value)
    except ValueError:  # an integer of thousands of digits has no text
        return "a value too large to show"


# ------------------------------------------------------------------------------------- value checks
def _must(test: Callable[[Any], object], problem: str) -> Check:
    """The check that keeps a value passing `test` and refuses any other with `problem`, where
    "{}" shows the value."""

    def check(value: Any, path: str, scope: _Scope) -> Any:
        if not test(value):
            _refuse(path, problem.format(_quote(value)))
        return value

    return check


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _refuse(path, f"must be a JSON object, got {_quote(value)}")
    return value


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no number


def _text(shortest: int, longest: int) -> Check:
    def test(value: Any) -> bool:
        return isinstance(value, str) and shortest <= len(value) <= longest

    return _must(test, f"must be a string of {shortest} to {longest} characters, got {{}}")


def _choice(options: tuple[str, ...]) -> Check:
    return _must(lambda value: isinstance(value, str) and value in options, f"must be one of {options}, got {{}}")


def _whole(least: int) -> Check:
    return _must(lambda value: _integer(value) and value >= least, f"must be an integer >= {least}, got {{}}")


def _refused(problem: str) -> Check:
    """A member that may only be absent or null."""
    return _must(lambda value: False, problem)


def _is_date(value: Any) -> bool:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


_NAMED = _must(lambda value: isinstance(value, str) and value != "", "must be a non-empty string, got {}")
_FLAG = _must(lambda value: isinstance(value, int) and value in (0, 1), "must be true, false, 0 or 1, got {}")
_DATE = _must(_is_date, "must be a real YYYY-MM-DD date, got {}")
_KEY = _must(
    lambda value: isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_]{1,64}", value),
    "a behaviour key is 1 to 64 characters of A-Z, a-z, 0-9 and _, got {}",
)


def _member_ids(value: Any, path: str) -> tuple[str, ...]:
    """A member list: strings and integers (as their text), "" dropped, sorted, each id once."""
    if not isinstance(value, list):
        _refuse(path, f"must be a JSON array of distinct ids, got {_quote(value)}")
    ids = {_member_id(one, _item(path, i)) for i, one in enumerate(value)}
    ids.discard("")
    return tuple(sorted(ids))


def _member_id(value: Any, path: str) -> str:
    text = value if isinstance(value, str) else None
    if _integer(value) and abs(value) < 10**MAX_DISTINCT_ID:  # bounded: str() refuses thousands of digits
        text = str(value)
    if text is None or len(text) > MAX_DISTINCT_ID:
        _refuse(path, f"a distinct id is a string or an integer of at most {MAX_DISTINCT_ID} characters")
    return text


# Operands of user and event leaves, by `type`: what number() and datetime() of the expression
# language accept (ASCII digits only), a JSON boolean, or anything for string and list.
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _finite(value: Any) -> float | None:
    """The value as a finite float when it is a JSON number or a text number() reads."""
    if isinstance(value, str):
        if not _NUMBER_TEXT.fullmatch(value):
            return None
    elif not _integer(value) and not isinstance(value, float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


def _epoch(value: Any) -> float | None:
    """Epoch seconds of what datetime() reads: an ISO text, or epoch seconds / milliseconds."""
    if isinstance(value, str):
        return parse_iso(value)
    number = _finite(value)
    if number is None:
        return None
    seconds = epoch_seconds(number)
    return seconds if DATETIME_MIN <= seconds < DATETIME_MAX else None


_OPERANDS: dict[str, Check] = {
    "string": _must(lambda value: True, ""),
    "list": _must(lambda value: True, ""),
    "boolean": _must(lambda value: isinstance(value, bool), "a boolean leaf compares with true or false, got {}"),
    "number": _must(lambda value: _finite(value) is not None, "not a finite number, nor a text number() reads: {}"),
    "datetime": _must(lambda value: _epoch(value) is not None, "not a time datetime() reads (1900-2300): {}"),
}


# ----------------------------------------------------------------------------------- selector trees
def _defined_behaviour(value: Any, path: str, scope: _Scope) -> str:
    if not isinstance(value, str) or value not in scope.behaviors:
        _refuse(path, f"behaviour {_quote(value)} is not defined")
    return value


def _resolve(cohort_id: int, path: str, scope: _Scope) -> None:
    if cohort_id == scope.own_id:
        _refuse(path, f"reference cycle: cohort {cohort_id} references itself")
    if cohort_id not in scope.cohorts:
        _refuse(path, f"unknown cohort {_quote(cohort_id)}")


_BEHAVIOUR_LEAF = (
    _Member("value", _defined_behaviour),
    _Member("operator", _choice(COMPARISONS)),
    _Member("operand", _whole(0)),
)
_COHORT_LEAF = (
    _Member("value", _must(_integer, "a cohort reference is a cohort id (integer), got {}")),
    _Member("operator", _choice(("in", "not in"))),
)
_PROPERTY_LEAF = (  # and then `operand`, which depends on `operator` and `type`
    _Member("value", _NAMED),
    _Member("operator", _choice(PROPERTY_OPERATORS)),
    _Member("type", _choice(TYPES), "string"),
)


# The leaf kinds, by `property`: each reads its members in order and returns the canonical leaf.
Leaf = Callable[[dict[str, Any], str, _Scope], dict[str, Any]]


def _behaviour_leaf(node: dict[str, Any], path: str, scope: _Scope) -> dict[str, Any]:
    return {"property": "behaviors", **_read(node, path, _BEHAVIOUR_LEAF, scope)}


def _cohort_leaf(node: dict[str, Any], path: str, scope: _Scope) -> dict[str, Any]:
    leaf = {"property": "cohort", **_read(node, path, _COHORT_LEAF, scope)}
    _resolve(leaf["value"], _at(path, "value"), scope)  # once the leaf is well formed
    return leaf


def _property_leaf(node: dict[str, Any], path: str, scope: _Scope) -> dict[str, Any]:
    """A user or event property leaf; `operand` is dropped for defined / not defined."""
    head = _read(node, path, _PROPERTY_LEAF, scope)
    leaf = {"property": node["property"], "value": head["value"], "operator": head["operator"]}
    if head["operator"] not in PRESENCE:
        where = _at(path, "operand")
        if "operand" not in node:  # present but null is a value: a string leaf may compare with null
            _refuse(where, "required unless the operator is defined or not defined")
        leaf["operand"] = _OPERANDS[head["type"]](node["operand"], where, scope)
    leaf["type"] = head["type"]
    return leaf


_PROFILE_LEAVES: dict[str, Leaf] = {"behaviors": _behaviour_leaf, "user": _property_leaf, "cohort": _cohort_leaf}
_EVENT_LEAVES: dict[str, Leaf] = {"event": _property_leaf}

_NODES = _must(lambda value: isinstance(value, list) and value, "must be a non-empty array of nodes, got {}")
_COMBINATOR = (_Member("operator", _choice(("and", "or"))), _Member("children", _NODES))


def _tree(root: dict[str, Any], path: str, leaves: Mapping[str, Leaf], scope: _Scope) -> dict[str, Any]:
    """The canonical form of a selector tree, counted against the cohort's node limit first.
    Nodes are checked in document order (a node, then its children's subtrees in turn) with an
    explicit stack: a client's tree may be deep. A node with a `children` member or an and/or
    `operator` combines; any other is a leaf of `leaves`."""
    _spend_nodes(root, path, scope)
    top: list[dict[str, Any]] = []
    pending: list[tuple[Any, str, list[dict[str, Any]]]] = [(root, path, top)]  # node, path, out list
    while pending:
        raw, where, out = pending.pop()
        node = _object(raw, where)
        if "children" in node or node.get("operator") in ("and", "or"):  # a null `children` too
            members = _read(node, where, _COMBINATOR, scope)
            children: list[dict[str, Any]] = []
            out.append({"operator": members["operator"], "children": children})
            below = [(child, _item(_at(where, "children"), i), children) for i, child in enumerate(members["children"])]
            pending.extend(reversed(below))
            continue
        out.append(_leaf_kind(node, where, leaves)(node, where, scope))
    return top[0]


def _leaf_kind(node: dict[str, Any], path: str, leaves: Mapping[str, Leaf]) -> Leaf:
    kind = node.get("property")
    if isinstance(kind, str) and kind in leaves:
        return leaves[kind]
    known = ", ".join(map(repr, leaves))
    _refuse(_at(path, "property"), f"unknown node kind {_quote(kind)} (the leaves here: {known})")


def _spend_nodes(tree: dict[str, Any], path: str, scope: _Scope) -> None:
    """Each tree (event selectors' in turn, then the selector) is counted as sent, before it is
    walked, against the nodes the cohort has left: the tree that goes over the limit is refused."""
    pending: list[Any] = [tree]
    while pending and scope.nodes_left >= 0:
        node = pending.pop()
        scope.nodes_left -= 1
        children = node.get("children") if isinstance(node, dict) else None
        if isinstance(children, list):
            pending.extend(children)
    if scope.nodes_left < 0:
        _refuse(path, f"more than {MAX_NODES} selector nodes in the cohort (selector and event selectors together)")


def _expression(text: str, path: str, *, behaviors: Collection[str] | None = None) -> None:
    """An event expression, or with `behaviors` a profile expression that may read them."""
    try:
        tree = parse_expr(text)
        if behaviors is None:
            check_expr(tree, context="events")
        else:
            check_expr(tree, context="profiles", behaviors=behaviors)
    except ExprError as exc:
        _refuse(path, exc.message, exc.position)


def _profile_selector(value: Any, scope: _Scope) -> dict[str, Any] | str:
    if isinstance(value, str):
        if not value:
            _refuse("selector", "an empty expression: send a profile expression or a selector tree")
        _expression(value, "selector", behaviors=scope.behaviors)
        return value  # kept verbatim
    if isinstance(value, dict):
        return _tree(value, "selector", _PROFILE_LEAVES, scope)
    _refuse("selector", f"must be a selector tree (object) or a profile expression (string), got {_quote(value)}")


def _event_filter(value: Any, path: str, scope: _Scope) -> dict[str, Any] | str | None:
    """An event selector's `selector`: "" is no filter, like null."""
    if isinstance(value, str):
        if value:
            _expression(value, path)
        return value or None
    if isinstance(value, dict):
        return _tree(value, path, _EVENT_LEAVES, scope)
    _refuse(path, f"must be an event expression (string) or an event selector tree, got {_quote(value)}")


# --------------------------------------------------------------------------------------- behaviours
_EVENT_SELECTOR = (_Member("event", _NAMED), _Member("selector", _event_filter, None))


def _event_selector(value: Any, path: str, scope: _Scope) -> EventSelector:
    members = _read(_object(value, path), path, _EVENT_SELECTOR, scope)
    return EventSelector(members["event"], members["selector"])


def _event_selector_list(value: Any, path: str, scope: _Scope) -> tuple[EventSelector, ...]:
    if not isinstance(value, list) or not value:
        _refuse(path, f"must be a non-empty JSON array of event selectors, got {_quote(value)}")
    return tuple(_event_selector(one, _item(path, i), scope) for i, one in enumerate(value))


_COUNT = (
    _Member("aggregationOperator", _refused("not supported"), None),
    _Member("property", _refused("not supported"), None),
    _Member("type", _choice(COUNT_TYPES), "absolute"),
)


def _count(value: Any, path: str, scope: _Scope) -> tuple[str, tuple[EventSelector, ...]]:
    """`count` -> (type, its OR-ed event selectors)."""
    count = _object(value, path)
    kind = _read(count, path, _COUNT, scope)["type"]
    single, several = count.get("event_selector"), count.get("event_selectors")
    if (single is None) == (several is None):
        _refuse(_at(path, "event_selector"), "exactly one of event_selector and event_selectors is required")
    if single is not None:
        return kind, (_event_selector(single, _at(path, "event_selector"), scope),)
    return kind, _event_selector_list(several, _at(path, "event_selectors"), scope)


def _window(value: Any, path: str, scope: _Scope) -> tuple[str, int]:
    members = _read(_object(value, path), path, (_Member("unit", _choice(UNITS)), _Member("value", _whole(1))), scope)
    return members["unit"], members["value"]


_COUNTED = (_Member("count", _count),)
_WINDOW = (_Member("window", _window),)
_DATES = (_Member("from_date", _DATE), _Member("to_date", _DATE))


def _entry(value: Any, path: str, scope: _Scope) -> Behavior:
    """A behaviour of the object form: `count`, then one time constraint."""
    entry = _object(value, path)
    kind, selectors = _read(entry, path, _COUNTED, scope)["count"]
    if entry.get("from_date") is None and entry.get("to_date") is None:  # a window, then
        return Behavior(selectors, kind, window=_read(entry, path, _WINDOW, scope)["window"])
    if entry.get("window") is not None:
        _refuse(path, "one time constraint: a window, or from_date and to_date, not both")
    dates = _read(entry, path, _DATES, scope)
    if dates["from_date"] > dates["to_date"]:  # the same fixed-width form: text order is date order
        _refuse(_at(path, "from_date"), f"{dates['from_date']} is after to_date {dates['to_date']}")
    return Behavior(selectors, kind, dates=(dates["from_date"], dates["to_date"]))


_DAYS = re.compile(r"([1-9][0-9]*)d")  # N as a plain positive integer: "30d", not "030d" nor "0d"


def _days(value: Any, path: str, scope: _Scope) -> int:
    """The list form's window, "<N>d" with N >= 1."""
    found = _DAYS.fullmatch(value) if isinstance(value, str) else None
    if found is not None:
        with contextlib.suppress(ValueError):  # int() refuses thousands of digits
            return int(found[1])
    _refuse(path, f'must be "<N>d" with N >= 1, got {_quote(value)}')


def _listed_behaviours(items: list[Any], path: str, scope: _Scope) -> dict[str, Behavior]:
    """The /engage list form, [{"name", "window": "<N>d", "event_selectors"}, ...]."""
    names: set[str] = set()

    def new_name(value: Any, where: str, scope: _Scope) -> str:
        name: str = _KEY(value, where, scope)
        if name in names:
            _refuse(where, f"behaviour {name!r} is listed twice")
        names.add(name)
        return name

    members = (
        _Member("name", new_name),
        _Member("window", _days),
        _Member("event_selectors", _event_selector_list),
    )
    behaviours = {}
    for i, item in enumerate(items):
        where = _item(path, i)
        got = _read(_object(item, where), where, members, scope)
        behaviours[got["name"]] = Behavior(got["event_selectors"], "absolute", window=("day", got["window"]))
    return behaviours


def _behaviours(value: Any, path: str, scope: _Scope) -> dict[str, Behavior]:
    if not isinstance(value, (dict, list)):
        _refuse(path, f"must be an object of behaviours (or the /engage list form), got {_quote(value)}")
    if len(value) > MAX_BEHAVIORS:
        _refuse(path, f"at most {MAX_BEHAVIORS} behaviours, got {len(value)}")
    if isinstance(value, list):
        return _listed_behaviours(value, path, scope)
    behaviours = {}
    for key, entry in value.items():
        where = _at(path, str(key))
        key = _KEY(key, where, scope)  # before its entry (the right side of an assignment runs first)
        behaviours[key] = _entry(entry, where, scope)
    return behaviours


# ------------------------------------------------------------------------------------------ cohort
_NO_GROUP = _Member("data_group_id", _refused("group cohorts are not supported: must be null"), None)
_METADATA = (
    _Member("name", _text(1, MAX_NAME)),
    _Member("description", _text(0, MAX_DESCRIPTION), ""),
    _Member("is_visible", _FLAG, 1),
    _NO_GROUP,
)
_NO_ID_EDITS = tuple(
    _Member(name, _refused("a PATCH member: a new cohort lists its ids in distinct_ids"), None)
    for name in ("add_distinct_ids", "remove_distinct_ids")
)
_BOTH_KINDS = "a cohort is static (distinct_ids) or dynamic (selector, behaviors), not both"


def _definition(body: Mapping[str, Any], scope: _Scope) -> dict[str, Any]:
    """The definition members of `body` as `CohortDefinition` fields, static or dynamic."""
    ids, selector, behaviors = body.get("distinct_ids"), body.get("selector"), body.get("behaviors")
    if ids is not None:
        if selector is not None or behaviors is not None:
            _refuse("distinct_ids", _BOTH_KINDS)
        return {"distinct_ids": _member_ids(ids, "distinct_ids")}
    entries = {} if behaviors is None else _behaviours(behaviors, "behaviors", scope)  # first: the selector reads them
    if selector is None:
        _refuse("selector", "required: a dynamic cohort has a selector (a static one, distinct_ids)")
    scope.behaviors = frozenset(entries)
    return {"selector": _profile_selector(selector, scope), "behaviors": entries}


def _cohort(metadata: Mapping[str, Any], body: Mapping[str, Any], scope: _Scope) -> CohortDefinition:
    """The definition of `body` under `metadata`, checked, then its place in the reference graph."""
    definition = _definition(body, scope)
    cohort = CohortDefinition(metadata["name"], metadata["description"], int(metadata["is_visible"]), **definition)
    _check_references(cohort, scope)
    return cohort


# -------------------------------------------------------------------------------------- references
def _check_references(cohort: CohortDefinition, scope: _Scope) -> None:
    """No reference cycle through the cohort, and no chain longer than MAX_DEPTH from it or from
    any cohort that reaches it. An unsaved cohort is the node None (nothing references it)."""
    own = scope.own_id
    graph: dict[int | None, frozenset[int]] = {cid: d.references() for cid, d in scope.cohorts.items()}
    graph[own] = cohort.references()
    depth, reaching = _chains(graph, own)
    if depth[own] > MAX_DEPTH:
        _refuse("selector", f"its references nest {depth[own]} deep (at most {MAX_DEPTH})")
    for cid in sorted(c for c in reaching if c is not None and c != own):
        if depth[cid] > MAX_DEPTH:
            _refuse("selector", f"cohort {cid}'s references nest {depth[cid]} deep through it (at most {MAX_DEPTH})")


def _chains(
    graph: Mapping[int | None, frozenset[int]], target: int | None
) -> tuple[dict[int | None, int], set[int | None]]:
    """The edges of each cohort's longest reference chain, and the cohorts whose chains reach
    `target` (itself included). Depth first, keeping the trail: a step back onto it is a cycle."""
    depth: dict[int | None, int] = {}
    reaching: set[int | None] = set()
    for start in graph:
        trail, ahead = [start], [iter(sorted(graph[start]))]
        while trail and start not in depth:
            step = next(ahead[-1], None)
            if step is None:  # the trail's end has every reference done
                done = trail.pop()
                ahead.pop()
                refs = graph.get(done, frozenset())
                depth[done] = max((depth[ref] + 1 for ref in refs), default=0)
                if done == target or not reaching.isdisjoint(refs):
                    reaching.add(done)
            elif step in trail:
                cycle = " -> ".join(map(str, [*trail[trail.index(step) :], step]))
                _refuse("selector", f"reference cycle: cohort {cycle}")
            elif step not in depth:
                trail.append(step)
                ahead.append(iter(sorted(graph.get(step, frozenset()))))
    return depth, reaching


# ---------------------------------------------------------------------------------------- the API
def parse_cohort(
    body: object, *, existing: Mapping[int, CohortDefinition] | None, cohort_id: int | None = None
) -> CohortDefinition:
    """A create body (or a whole updated cohort) -> the validated definition; raises
    `CohortDefinitionError`. `existing`: the project's stored cohorts (id -> definition);
    `cohort_id`: the id the cohort has (update) or None (create)."""
    scope = _Scope(existing or {}, cohort_id)
    members = _object(body, "body")
    return _cohort(_read(members, "", (*_METADATA, *_NO_ID_EDITS), scope), members, scope)


def parse_raw_definition(definition: object, *, existing: Mapping[int, CohortDefinition] | None) -> CohortDefinition:
    """The `raw_cohort` of /engage `filter_by_cohort`: a definition only (`name`, `description`,
    `is_visible` ignored; `data_group_id` must be null; references resolve in `existing`)."""
    scope = _Scope(existing or {})
    members = _object(definition, "body")
    _read(members, "", (_NO_GROUP, *_NO_ID_EDITS), scope)
    return _cohort({"name": "", "description": "", "is_visible": 1}, members, scope)


def apply_patch(
    current: CohortDefinition, patch: object, *, existing: Mapping[int, CohortDefinition] | None, cohort_id: int | None
) -> CohortDefinition:
    """PATCH /cohorts/{id} (and one bulk-update item) on the cohort `cohort_id` whose definition
    is `current`: the updated definition, validated as a whole; raises `CohortDefinitionError`."""
    changes = {k: v for k, v in _object(patch, "body").items() if v is not None and k not in READ_ONLY}
    whole = _patched(current, changes)
    scope = _Scope(existing or {}, cohort_id)
    return _cohort(_read(whole, "", _METADATA, scope), whole, scope)


# The id edits of a PATCH, in the order they apply: an id both added and removed ends up absent.
_ID_EDITS: tuple[tuple[str, Callable[[set[str], Iterable[str]], set[str]]], ...] = (
    ("add_distinct_ids", set.union),
    ("remove_distinct_ids", set.difference),
)


def _patched(current: CohortDefinition, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The whole cohort as a body once the edits of a patch (its non-null members) apply, each
    checked as it applies: a new definition part replaces its kind's (not both kinds at once),
    then ids are added and removed (a static cohort's only)."""
    whole = {"name": current.name, "description": current.description, "is_visible": current.is_visible}
    whole |= {m.name: changes[m.name] for m in _METADATA if m.name in changes}
    ids = set(current.distinct_ids) if current.distinct_ids is not None else None
    dynamic = {k: changes[k] for k in ("selector", "behaviors") if k in changes}
    if "distinct_ids" in changes:
        if dynamic:
            _refuse("distinct_ids", _BOTH_KINDS)
        ids = set(_member_ids(changes["distinct_ids"], "distinct_ids"))
    elif dynamic:
        ids = None
        whole |= ({"behaviors": {}} if current.is_static else current.definition()) | dynamic
    elif ids is None:
        whole |= current.definition()
    for name, edit in _ID_EDITS:
        if name in changes:
            if ids is None:
                _refuse(name, "only a static cohort (distinct_ids) has ids to add or remove")
            ids = edit(ids, _member_ids(changes[name], name))
    return whole if ids is None else whole | {"distinct_ids": sorted(ids)}


def check_delete(cohort_ids: Collection[int], cohorts: Mapping[int, CohortDefinition]) -> None:
    """Deleting `cohort_ids` from a project whose cohorts are `cohorts`: refused (400, naming the
    referencing cohorts) while a cohort outside the set references one inside it."""
    leaving = set(cohort_ids)
    blocked = []
    for cid in sorted(leaving):
        users = referrers_of(cid, cohorts, ignore=leaving)
        if users:
            named = ", ".join(f"{user} ({cohorts[user].name})" for user in users)
            blocked.append(f"cohort {cid} is referenced by cohort(s) {named}")
    if blocked:
        _refuse("", "; ".join(blocked))


def referrers_of(cohort_id: int, cohorts: Mapping[int, CohortDefinition], *, ignore: Iterable[int] = ()) -> list[int]:
    """The ids of the cohorts (outside `ignore`) whose selector names `cohort_id`, ascending."""
    skipped = set(ignore)
    return sorted(cid for cid, d in cohorts.items() if cid not in skipped and cohort_id in d.references())
