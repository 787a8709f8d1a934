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
  `selector`; `behaviors` may be absent, null or {} (a profile-only cohort).
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
  "value": N}}} (several selectors: `event_selectors`).
* Selector tree: a node with `children`, or with `operator` "and"/"or", is a combinator
  (`operator` and/or, `children` a non-empty array). Other nodes are leaves by `property`:
  "behaviors" (`value` a defined key, `operator` == != > >= < <=, `operand` an integer >= 0, not a
  boolean); "user" (`value` a non-empty string, `operator` also in, not in, defined, not defined,
  `type` string|number|boolean|datetime|list, default string; `operand` required unless
  defined/not defined, where it is dropped; it must suit the type: number -> a finite JSON number
  or a string number() accepts, datetime -> a string or number datetime() accepts (in [1900, 2300)),
  boolean -> a JSON boolean, string/list -> any JSON value; stored as given); "cohort" (`value` an
  integer naming a cohort in `existing`, not the cohort itself; `operator` in / not in). Anything
  else is an unknown node kind.
* Selector string: a PROFILE expression (`user["x"]`, `properties["x"]`, `behaviors["k"]` with k
  defined); "" is refused. Kept verbatim.
* Limits: 50 behaviours; 200 selector nodes per cohort, counting every node (combinators and
  leaves) of the selector tree and of every behaviour's event-selector tree as sent (string
  selectors count 0; they have the expression language's own limits); reference depth (edges of
  the longest reference chain starting at a cohort) at most 10, for the saved cohort and for every
  cohort that reaches it.

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
removing a non-member is a no-op); each is validated like `distinct_ids`, and either is refused on
a cohort that is not static after the patch. The result is validated as a whole, with the
cohort's own id, so cycles through it are caught.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, TypeGuard

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

_KEY = re.compile(r"[A-Za-z0-9_]{1,64}", re.ASCII)
_LIST_WINDOW = re.compile(r"([1-9][0-9]*)d", re.ASCII)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
# number("…"): the expression language's rule (no whitespace, hex, inf or other scripts' digits).
_NUMBER_TEXT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


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


# ------------------------------------------------------------------------------------------ checks
def _shown(value: object) -> str:
    """A value as an error message quotes it (bounded)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_operand(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("a number leaf needs a number operand")
    if isinstance(value, str):
        if _NUMBER_TEXT.fullmatch(value) is None or not math.isfinite(float(value)):
            raise ValueError(f"{_shown(value)} is not a number")
        return
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError(f"{_shown(value)} is not a number")


def _datetime_operand(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("a datetime leaf needs an ISO date string or an epoch time")
    if isinstance(value, str):
        ok = parse_iso(value) is not None
    else:
        try:
            seconds = epoch_seconds(float(value))
        except OverflowError:
            seconds = math.inf
        ok = math.isfinite(seconds) and DATETIME_MIN <= seconds < DATETIME_MAX
    if not ok:
        raise ValueError(f"{_shown(value)} is not a datetime in [1900, 2300)")


def _check_operand(value: object, kind: str) -> None:
    """Refuses an operand the leaf's type cannot use (ValueError with the reason)."""
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValueError("a boolean leaf needs a JSON boolean operand")
    elif kind == "number":
        _number_operand(value)
    elif kind == "datetime":
        _datetime_operand(value)
    # string, list: any JSON value, used as is


def _raw_nodes(node: object) -> int:
    """Nodes of a tree as sent (before validation), without recursion; stops past MAX_NODES."""
    n, stack = 0, [node]
    while stack and n <= MAX_NODES:
        item = stack.pop()
        n += 1
        if isinstance(item, dict) and isinstance(item.get("children"), list):
            stack.extend(item["children"])
    return n


def _expression_error(member: str, exc: ExprError) -> CohortDefinitionError:
    return CohortDefinitionError(member, exc.message, exc.position)


def _distinct_ids(value: object, member: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise CohortDefinitionError(member, "must be a JSON array of distinct ids")
    out: set[str] = set()
    for i, item in enumerate(value):
        if not (isinstance(item, str) or _int(item)):
            problem = f"a distinct id is a string or an integer, got {_shown(item)}"
            raise CohortDefinitionError(f"{member}[{i}]", problem)
        text = str(item)
        if len(text) > MAX_DISTINCT_ID:
            raise CohortDefinitionError(f"{member}[{i}]", f"a distinct id has at most {MAX_DISTINCT_ID} characters")
        if text:
            out.add(text)
    return tuple(sorted(out))


class _Parser:
    """One validation: the project's cohorts, the cohort's own id, and the running node count."""

    def __init__(self, existing: Mapping[int, CohortDefinition] | None, cohort_id: int | None) -> None:
        self.existing: Mapping[int, CohortDefinition] = existing or {}
        self.cohort_id = cohort_id
        self.nodes = 0
        self.behavior_keys: frozenset[str] = frozenset()

    # -- metadata
    @staticmethod
    def name(body: Mapping[str, Any]) -> str:
        name = body.get("name")
        if name is None:
            raise CohortDefinitionError("name", "required")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
            raise CohortDefinitionError("name", f"must be a string of 1-{MAX_NAME} characters")
        return name

    @staticmethod
    def description(body: Mapping[str, Any]) -> str:
        text = body.get("description")
        if text is None:
            return ""
        if not isinstance(text, str) or len(text) > MAX_DESCRIPTION:
            raise CohortDefinitionError("description", f"must be a string of at most {MAX_DESCRIPTION} characters")
        return text

    @staticmethod
    def is_visible(body: Mapping[str, Any]) -> int:
        value = body.get("is_visible")
        if value is None:
            return 1
        if isinstance(value, bool) or (_int(value) and value in (0, 1)):
            return int(value)
        raise CohortDefinitionError("is_visible", f"must be true, false, 0 or 1, got {_shown(value)}")

    @staticmethod
    def no_group(body: Mapping[str, Any]) -> None:
        if body.get("data_group_id") is not None:
            raise CohortDefinitionError("data_group_id", "group cohorts are not supported (must be null)")

    # -- definition
    def definition(
        self, body: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | str | None, dict[str, Behavior], tuple[str, ...] | None]:
        static = body.get("distinct_ids") is not None
        dynamic = body.get("selector") is not None or body.get("behaviors") is not None
        if static and dynamic:
            raise CohortDefinitionError("distinct_ids", "a cohort is dynamic (selector, behaviors) or static, not both")
        if static:
            return None, {}, _distinct_ids(body["distinct_ids"], "distinct_ids")
        if not dynamic:
            raise CohortDefinitionError("selector", "a definition is required: selector (+ behaviors) or distinct_ids")
        behaviors = self.behaviors(body.get("behaviors"))
        self.behavior_keys = frozenset(behaviors)
        if body.get("selector") is None:
            raise CohortDefinitionError("selector", "required with behaviors")
        return self.selector(body["selector"]), behaviors, None

    # -- behaviours
    def behaviors(self, value: object) -> dict[str, Behavior]:
        if value is None:
            return {}
        if not isinstance(value, (dict, list)):
            raise CohortDefinitionError("behaviors", "must be an object (key -> behaviour) or the /engage list form")
        if len(value) > MAX_BEHAVIORS:
            raise CohortDefinitionError("behaviors", f"at most {MAX_BEHAVIORS} behaviours, got {len(value)}")
        if isinstance(value, list):
            return self.list_form(value)
        out = {}
        for key, entry in value.items():
            member = f"behaviors.{key}"
            if not _KEY.fullmatch(key):
                raise CohortDefinitionError(member, "a behaviour key is 1-64 characters [A-Za-z0-9_]")
            out[key] = self.behavior(entry, member)
        return out

    def list_form(self, items: list[Any]) -> dict[str, Behavior]:
        out: dict[str, Behavior] = {}
        for i, item in enumerate(items):
            member = f"behaviors[{i}]"
            if not isinstance(item, dict):
                raise CohortDefinitionError(member, "must be an object {name, window, event_selectors}")
            name = item.get("name")
            if not isinstance(name, str) or not _KEY.fullmatch(name):
                raise CohortDefinitionError(f"{member}.name", "a behaviour name is 1-64 characters [A-Za-z0-9_]")
            if name in out:
                raise CohortDefinitionError(f"{member}.name", f"duplicate behaviour name {_shown(name)}")
            window = item.get("window")
            match = _LIST_WINDOW.fullmatch(window) if isinstance(window, str) else None
            if match is None:
                raise CohortDefinitionError(f"{member}.window", f"must be '<N>d' with N >= 1, got {_shown(window)}")
            selectors = item.get("event_selectors")
            if not isinstance(selectors, list) or not selectors:
                raise CohortDefinitionError(f"{member}.event_selectors", "must be a non-empty array")
            out[name] = Behavior(
                tuple(self.event_selector(s, f"{member}.event_selectors[{j}]") for j, s in enumerate(selectors)),
                "absolute",
                ("day", int(match.group(1))),
            )
        return out

    def behavior(self, entry: object, member: str) -> Behavior:
        if not isinstance(entry, dict):
            raise CohortDefinitionError(member, "must be an object {count, window | from_date + to_date}")
        count = entry.get("count")
        if not isinstance(count, dict):
            raise CohortDefinitionError(f"{member}.count", "must be an object {event_selector, type}")
        for unsupported in ("aggregationOperator", "property"):
            if count.get(unsupported) is not None:
                raise CohortDefinitionError(f"{member}.count.{unsupported}", "not supported")
        kind = count.get("type")
        kind = "absolute" if kind is None else kind
        if not isinstance(kind, str) or kind not in COUNT_TYPES:
            raise CohortDefinitionError(f"{member}.count.type", f"must be 'absolute' or 'days', got {_shown(kind)}")
        one, many = count.get("event_selector"), count.get("event_selectors")
        if (one is None) == (many is None):
            raise CohortDefinitionError(
                f"{member}.count.event_selector", "exactly one of event_selector, event_selectors"
            )
        if one is not None:
            selectors: tuple[EventSelector, ...] = (self.event_selector(one, f"{member}.count.event_selector"),)
        else:
            if not isinstance(many, list) or not many:
                raise CohortDefinitionError(f"{member}.count.event_selectors", "must be a non-empty array")
            selectors = tuple(
                self.event_selector(s, f"{member}.count.event_selectors[{j}]") for j, s in enumerate(many)
            )
        window, dates = self.time(entry, member)
        return Behavior(selectors, kind, window, dates)

    @staticmethod
    def time(entry: Mapping[str, Any], member: str) -> tuple[tuple[str, int] | None, tuple[str, str] | None]:
        window = entry.get("window")
        has_dates = entry.get("from_date") is not None or entry.get("to_date") is not None
        if window is not None and has_dates:
            raise CohortDefinitionError(member, "exactly one time constraint: window, or from_date + to_date")
        if window is not None:
            if not isinstance(window, dict):
                raise CohortDefinitionError(f"{member}.window", "must be an object {unit, value}")
            unit, value = window.get("unit"), window.get("value")
            if not isinstance(unit, str) or unit not in UNITS:
                problem = f"must be 'day', 'week' or 'month', got {_shown(unit)}"
                raise CohortDefinitionError(f"{member}.window.unit", problem)
            if not _int(value) or value < 1:
                raise CohortDefinitionError(f"{member}.window.value", f"must be an integer >= 1, got {_shown(value)}")
            return (unit, value), None
        if not has_dates:
            raise CohortDefinitionError(
                f"{member}.window", "a time constraint is required: window, or from_date + to_date"
            )
        days = []
        for name in ("from_date", "to_date"):
            text = entry.get(name)
            try:
                if not isinstance(text, str) or not _DATE.fullmatch(text):
                    raise ValueError
                days.append(date.fromisoformat(text))
            except ValueError:
                problem = f"must be a date YYYY-MM-DD, got {_shown(text)}"
                raise CohortDefinitionError(f"{member}.{name}", problem) from None
        if days[0] > days[1]:
            raise CohortDefinitionError(f"{member}.from_date", "must not be after to_date")
        return None, (days[0].isoformat(), days[1].isoformat())

    def event_selector(self, item: object, member: str) -> EventSelector:
        if not isinstance(item, dict):
            raise CohortDefinitionError(member, "must be an object {event, selector}")
        event = item.get("event")
        if not isinstance(event, str) or not event:
            raise CohortDefinitionError(f"{member}.event", "a non-empty event name is required")
        selector = item.get("selector")
        if selector is None or selector == "":
            return EventSelector(event, None)
        if isinstance(selector, str):
            try:
                check_expr(parse_expr(selector))
            except ExprError as exc:
                raise _expression_error(f"{member}.selector", exc) from None
            return EventSelector(event, selector)
        if isinstance(selector, dict):
            self.count_nodes(selector, f"{member}.selector")
            return EventSelector(event, self.node(selector, f"{member}.selector", event_leaves=True))
        raise CohortDefinitionError(f"{member}.selector", "must be null, an expression or a selector tree")

    # -- selector
    def count_nodes(self, tree: object, member: str) -> None:
        self.nodes += _raw_nodes(tree)
        if self.nodes > MAX_NODES:
            raise CohortDefinitionError(member, f"at most {MAX_NODES} selector nodes per cohort")

    def selector(self, value: object) -> dict[str, Any] | str:
        if isinstance(value, str):
            return self.selector_text(value)
        if not isinstance(value, dict):
            raise CohortDefinitionError("selector", "must be a selector tree (object) or an expression (string)")
        self.count_nodes(value, "selector")
        return self.node(value, "selector", event_leaves=False)

    def selector_text(self, text: str) -> str:
        if not text:
            raise CohortDefinitionError("selector", "empty expression")
        try:
            check_expr(parse_expr(text), context="profiles", behaviors=self.behavior_keys)
        except ExprError as exc:
            raise _expression_error("selector", exc) from None
        return text

    def node(self, node: object, member: str, *, event_leaves: bool) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise CohortDefinitionError(member, "a selector node must be an object")
        if "children" in node or node.get("operator") in ("and", "or"):
            operator, children = node.get("operator"), node.get("children")
            if operator not in ("and", "or"):
                problem = f"unknown combinator operator {_shown(operator)} (and, or)"
                raise CohortDefinitionError(f"{member}.operator", problem)
            if not isinstance(children, list) or not children:
                raise CohortDefinitionError(f"{member}.children", "must be a non-empty array of nodes")
            return {
                "operator": operator,
                "children": [
                    self.node(c, f"{member}.children[{i}]", event_leaves=event_leaves) for i, c in enumerate(children)
                ],
            }
        kind = node.get("property")
        if event_leaves:
            if kind != "event":
                raise CohortDefinitionError(
                    f"{member}.property", f"unknown node kind {_shown(kind)} (event selector leaves: event)"
                )
            return self.property_leaf(node, member, "event")
        if kind == "behaviors":
            return self.behavior_leaf(node, member)
        if kind == "user":
            return self.property_leaf(node, member, "user")
        if kind == "cohort":
            return self.cohort_leaf(node, member)
        raise CohortDefinitionError(f"{member}.property", f"unknown node kind {_shown(kind)} (behaviors, user, cohort)")

    def behavior_leaf(self, node: Mapping[str, Any], member: str) -> dict[str, Any]:
        key, operator, operand = node.get("value"), node.get("operator"), node.get("operand")
        if not isinstance(key, str) or key not in self.behavior_keys:
            raise CohortDefinitionError(f"{member}.value", f"behaviour {_shown(key)} is not defined in behaviors")
        if operator not in COMPARISONS:
            problem = f"unknown operator {_shown(operator)} for a behaviour count"
            raise CohortDefinitionError(f"{member}.operator", problem)
        if not _int(operand) or operand < 0:
            raise CohortDefinitionError(
                f"{member}.operand", f"a behaviour count is compared with an integer >= 0, got {_shown(operand)}"
            )
        return {"property": "behaviors", "value": key, "operator": operator, "operand": operand}

    @staticmethod
    def property_leaf(node: Mapping[str, Any], member: str, kind: str) -> dict[str, Any]:
        name, operator = node.get("value"), node.get("operator")
        if not isinstance(name, str) or not name:
            raise CohortDefinitionError(f"{member}.value", "a property name (non-empty string) is required")
        if operator not in PROPERTY_OPERATORS:
            raise CohortDefinitionError(f"{member}.operator", f"unknown operator {_shown(operator)}")
        value_type = node.get("type")
        value_type = "string" if value_type is None else value_type
        if value_type not in TYPES:
            raise CohortDefinitionError(f"{member}.type", f"unknown type {_shown(value_type)} ({', '.join(TYPES)})")
        out = {"property": kind, "value": name, "operator": operator}
        if operator not in PRESENCE:
            if "operand" not in node:
                raise CohortDefinitionError(f"{member}.operand", "required")
            try:
                _check_operand(node["operand"], value_type)
            except ValueError as exc:
                raise CohortDefinitionError(f"{member}.operand", str(exc)) from None
            out["operand"] = node["operand"]
        out["type"] = value_type
        return out

    def cohort_leaf(self, node: Mapping[str, Any], member: str) -> dict[str, Any]:
        ref, operator = node.get("value"), node.get("operator")
        if not _int(ref):
            raise CohortDefinitionError(f"{member}.value", f"a cohort id (integer) is required, got {_shown(ref)}")
        if operator not in ("in", "not in"):
            raise CohortDefinitionError(
                f"{member}.operator", f"unknown operator {_shown(operator)} for a cohort ('in', 'not in')"
            )
        if ref == self.cohort_id:
            raise CohortDefinitionError(f"{member}.value", f"reference cycle: cohort {ref} references itself")
        if ref not in self.existing:
            raise CohortDefinitionError(f"{member}.value", f"unknown cohort {ref}")
        return {"property": "cohort", "value": ref, "operator": operator}

    # -- references
    def check_graph(self, cohort: CohortDefinition) -> None:
        """Cycles and depth over the project's cohorts with `cohort` saved (as `cohort_id`, or as a new one)."""
        me: object = self.cohort_id if self.cohort_id is not None else object()
        graph: dict[object, frozenset[int]] = {i: c.references() for i, c in self.existing.items() if i != me}
        graph[me] = cohort.references()
        depth: dict[object, int] = {}

        def walk(node: object, path: tuple[object, ...]) -> int:
            if node in path:
                raise CohortDefinitionError("selector", f"reference cycle: {' -> '.join(map(str, (*path, node)))}")
            if node not in depth:
                depth[node] = max((1 + walk(r, (*path, node)) for r in sorted(graph.get(node, ()))), default=0)
            return depth[node]

        order = sorted(graph, key=lambda n: (n is not me, str(n)))
        for start in order:
            walk(start, ())
        reaching = [n for n in order if n is me or _reaches(graph, n, me)]
        for n in reaching:
            if depth[n] > MAX_DEPTH:
                who = "the cohort's" if n is me else f"cohort {n}'s"
                raise CohortDefinitionError("selector", f"{who} references nest {depth[n]} deep (at most {MAX_DEPTH})")


def _reaches(graph: Mapping[object, frozenset[int]], start: object, goal: object) -> bool:
    seen: set[object] = set()
    stack: list[object] = list(graph.get(start, ()))
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, ()))
    return False


def _parse(
    body: object,
    *,
    existing: Mapping[int, CohortDefinition] | None,
    cohort_id: int | None,
    definition_only: bool = False,
) -> CohortDefinition:
    if not isinstance(body, dict):
        raise CohortDefinitionError("body", "must be a JSON object")
    parser = _Parser(existing, cohort_id)
    if definition_only:
        name, description, visible = "", "", 1
    else:
        name, description, visible = parser.name(body), parser.description(body), parser.is_visible(body)
    parser.no_group(body)
    for member in ("add_distinct_ids", "remove_distinct_ids"):
        if body.get(member) is not None:
            raise CohortDefinitionError(member, "only accepted on update (PATCH)")
    selector, behaviors, ids = parser.definition(body)
    cohort = CohortDefinition(name, description, visible, selector, behaviors, ids)
    parser.check_graph(cohort)
    return cohort


def parse_cohort(
    body: object, *, existing: Mapping[int, CohortDefinition] | None, cohort_id: int | None = None
) -> CohortDefinition:
    """A create body (or a whole updated cohort) -> the validated definition; raises
    `CohortDefinitionError`. `existing`: the project's stored cohorts (id -> definition);
    `cohort_id`: the id the cohort has (update) or None (create)."""
    return _parse(body, existing=existing, cohort_id=cohort_id)


def parse_raw_definition(definition: object, *, existing: Mapping[int, CohortDefinition] | None) -> CohortDefinition:
    """The `raw_cohort` of /engage `filter_by_cohort`: a definition only (`name`, `description`,
    `is_visible` ignored; `data_group_id` must be null; references resolve in `existing`)."""
    return _parse(definition, existing=existing, cohort_id=None, definition_only=True)


def apply_patch(
    current: CohortDefinition,
    patch: object,
    *,
    existing: Mapping[int, CohortDefinition] | None,
    cohort_id: int | None,
) -> CohortDefinition:
    """PATCH /cohorts/{id} (and one bulk-update item) on the cohort `cohort_id` whose definition
    is `current`: the updated definition, validated as a whole; raises `CohortDefinitionError`."""
    if not isinstance(patch, dict):
        raise CohortDefinitionError("body", "must be a JSON object")
    given = {k: v for k, v in patch.items() if v is not None and k not in READ_ONLY}
    body: dict[str, Any] = current.canonical()
    body.pop("is_static")
    for member in ("name", "description", "is_visible", "data_group_id"):
        if member in given:
            body[member] = given[member]
    static = "distinct_ids" in given
    dynamic = "selector" in given or "behaviors" in given
    if static and dynamic:
        raise CohortDefinitionError("distinct_ids", "a cohort is dynamic (selector, behaviors) or static, not both")
    if static:
        body.pop("selector", None)
        body.pop("behaviors", None)
        body["distinct_ids"] = list(_distinct_ids(given["distinct_ids"], "distinct_ids"))
    elif dynamic:
        if current.is_static:
            body.pop("distinct_ids", None)
            body["selector"], body["behaviors"] = None, None
        for member in ("selector", "behaviors"):
            if member in given:
                body[member] = given[member]
    if "add_distinct_ids" in given or "remove_distinct_ids" in given:
        if body.get("distinct_ids") is None:
            member = "add_distinct_ids" if "add_distinct_ids" in given else "remove_distinct_ids"
            raise CohortDefinitionError(member, "the cohort is not static")
        ids = set(body["distinct_ids"])
        ids |= set(_distinct_ids(given.get("add_distinct_ids", []), "add_distinct_ids"))
        ids -= set(_distinct_ids(given.get("remove_distinct_ids", []), "remove_distinct_ids"))
        body["distinct_ids"] = sorted(ids)
    return _parse(body, existing=existing, cohort_id=cohort_id)


def check_delete(cohort_ids: Collection[int], cohorts: Mapping[int, CohortDefinition]) -> None:
    """Deleting `cohort_ids` from a project whose cohorts are `cohorts`: refused (400, naming the
    referencing cohorts) while a cohort outside the set references one inside it."""
    doomed = set(cohort_ids)
    for target in sorted(doomed):
        users = referrers_of(target, cohorts, ignore=doomed)
        if users:
            names = ", ".join(f"{i} ({cohorts[i].name})" for i in users)
            raise CohortDefinitionError("", f"cohort {target} is referenced by cohort(s) {names}")


def referrers_of(cohort_id: int, cohorts: Mapping[int, CohortDefinition], *, ignore: Iterable[int] = ()) -> list[int]:
    """The ids of the cohorts (outside `ignore`) whose selector names `cohort_id`, ascending."""
    skip = set(ignore)
    return sorted(i for i, c in cohorts.items() if i not in skip and cohort_id in c.references())
