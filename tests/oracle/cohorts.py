"""Independent reference ("oracle") for cohorts (semantics-2.md §13): definitions, membership, count, /engage.

Shares no code with services/ or shared/. Expressions go through tests/oracle/expr.py (event context for
behaviour selectors, profile context for string cohort selectors), events through `_common.prepare` (the
oracles' one dedupe), /engage through tests/oracle/engage.py.

Public API:

    parse_cohort(body, *, existing=None, cohort_id=None, project_id=1, created="") -> Cohort | CohortError
    parse_raw_cohort(definition, *, existing=None, project_id=1) -> Cohort | CohortError   (filter_by_cohort)
    apply_patch(cohort, patch, *, existing=None) -> Cohort | CohortError                    (PATCH, bulk-update)
    check_delete(cohort_ids, cohorts) -> CohortError | None                                 (DELETE, bulk-delete)
    members(cohort_id, cohorts, *, events, profiles, tz, now_ms) -> set[str]   (cohort_id may be a Cohort:
                                                                    an unsaved/raw definition)
    count(cohort_id, cohorts, *, events, profiles, tz, now_ms) -> int
    window_start(today, unit, n) -> date | None                     first local date of a `window`
    cohorts_list(cohorts, *, events, profiles, tz, now_ms, project_id=None) -> list[dict]    (/cohorts/list)
    cohort_object(cohort, count, *, in_list=False) -> dict                                  (App API object)
    engage_by_cohort(profiles, params, *, project_id, cohorts, events, tz, now_ms, page_snapshot=None,
                     group_keys=None) -> dict | EngageError                                  (/engage)
    user_profiles(state_profiles, project_id) -> dict[str, dict]    profiles.apply(...).profiles -> id -> props
    created_text(ms) -> str                                         the `created` format (UTC)
    Cohort, Behavior, EventSelector, CohortError; MAX_BEHAVIORS, MAX_NODES, MAX_DEPTH

`cohorts` is always `dict[int, Cohort]` (id -> cohort, any projects; references resolve within the cohort's
project). `events` are the project's raw /import events (dicts, duplicates included) or `_common.Event`s;
`profiles` maps a user distinct_id to its property dict (a `profiles.Profile` is accepted as the value too).

Validation (parse_cohort; every failure is a CohortError whose `.message` starts with the member at fault as a
path - `name`, `behaviors.bhvr_0.window.value`, `behaviors[1].event_selectors[0].event`,
`selector.children[2].operator` - and, for an expression, ends with "(at position N)", N the 0-based character
offset of `expr.error_position`; `.member` and `.position` hold them separately). The first failing check in
this order is reported: body, name, description, is_visible, data_group_id, add/remove_distinct_ids, the
definition (static ids; or behaviours in order, then the selector depth-first; the node limit is checked as
each tree is met, before its nodes), references (cycle, depth). `CohortError(message)` can also be built from
a bare message (e.g. to compare with `==`). `cohort_id` is the id the cohort has (update) or will get
(create; None when unknown); `created` is stored as given (the caller copies the server's value).
 1. The body is a JSON object. Unknown members are ignored, and so are the read-only ones a client may echo
    back (`id`, `project_id`, `created`, `count`, `is_static`): "count is never accepted" = never read.
 2. `name`: required, a string of 1-255 characters (code points; not trimmed). `description`: a string of at
    most 1,000 characters; absent or null = "". `is_visible`: true/false/0/1 (JSON booleans or the integers
    0 and 1; strings are refused); absent or null = 1; stored 0/1. `data_group_id`: absent or null, anything
    else is refused.
 3. Definition: static (`distinct_ids` present and not null) or dynamic (`selector` and/or `behaviors` present
    and not null); both, or neither, is refused. A dynamic cohort needs a `selector` (`behaviors` alone is
    refused); `behaviors` may be absent/null/{} (a profile-only cohort). `add_distinct_ids` /
    `remove_distinct_ids` are refused at create (they are PATCH members, apply_patch).
 4. Static: `distinct_ids` is a JSON array of strings or integers (not booleans; integers are read as their
    text); an id longer than 255 characters is refused (no distinct_id can be longer); empty strings are
    dropped, duplicates collapse; stored sorted by code point. `[]` is a valid (empty) static cohort.
 5. `behaviors`: an object key -> entry, or the /engage list form. At most 50 (MAX_BEHAVIORS). Keys (and the
    list form's `name`s) are 1-64 characters `[A-Za-z0-9_]`; duplicate names in the list form are refused.
    Behaviours no selector reads are allowed (kept, never evaluated).
    Entry: an object with `count` (an object) and one time constraint.
      - `count.aggregationOperator` / `count.property`: any non-null value -> "not supported".
      - `count.type`: "absolute" or "days"; absent/null = "absolute"; anything else (Mixpanel's "day"
        included) is refused.
      - `count.event_selector` {"event", "selector"} - or, extension, `count.event_selectors` [..] (non-empty,
        OR-ed) - exactly one of the two. `event` a non-empty string (compared exactly, no length check).
        `selector`: absent/null/"" = no filter; a string in the EVENT expression language (expr.parse; any
        ExprError is refused with its position); or a tree of and/or combinators whose leaves are
        `{"property": "event", "value": <prop>, "operator", "operand", "type"}` (the profile-leaf rules of 6).
      - Time: exactly one of `window` and `from_date`/`to_date`. `window` = {"unit": "day"|"week"|"month",
        "value": integer >= 1 (not a boolean, no upper bound)}. `from_date` and `to_date` both present,
        `YYYY-MM-DD` real dates, from_date <= to_date.
    List form `[{"name", "window": "<N>d", "event_selectors": [{"event", "selector"?}, ..]}]`: N matches
    [1-9][0-9]* (days only, as /engage), event_selectors non-empty; it becomes
    {name: {"count": {"event_selector": .., "type": "absolute"}, "window": {"unit": "day", "value": N}}}.
    Several event selectors are OR-ed: an event is counted once even when it matches several (so the counts
    "add up" exactly when the selectors are disjoint; /engage's `behaviors` counts the same way). Their
    canonical form keeps them all: `count.event_selectors` (a list) instead of `count.event_selector`.
 6. Selector tree. A node with a `children` member, or with `operator` "and"/"or", is a combinator:
    `operator` "and"/"or", `children` a non-empty array. Any other node is a leaf of kind `property`:
      - "behaviors": `value` a defined behaviour key, `operator` in == != > >= < <=, `operand` a JSON integer
        >= 0 (not a boolean, not 3.0).
      - "user": `value` a non-empty string, `operator` in == != > >= < <= in, not in, defined, not defined,
        `type` in string number boolean datetime list (absent/null = "string"). The operand is required
        unless the operator is defined/not defined (then it is ignored and dropped), and must suit the type:
        number -> a finite JSON number or a string number() accepts; datetime -> a string or number that
        datetime() accepts; boolean -> a JSON boolean; string and list -> any JSON value (used as is). The
        operand is stored as given; evaluation uses its cast (`"50"` -> 50).
      - "cohort": `value` a JSON integer naming a cohort of the same project (`existing`), `operator` "in" or
        "not in". Its own id (`cohort_id`) or a cohort reaching it through references is a cycle; an id not in
        `existing` or of another project is "unknown cohort <id>".
    Any other kind ("event" included) is "unknown node kind".
 7. String selector (§13.2 alternative input): a PROFILE expression (expr.parse_profile: `user["x"]`,
    `properties["x"]` read the profile, `behaviors["k"]` the count of behaviour k; `event[..]` is an error);
    "" is refused; every `behaviors["k"]` it reads must be defined.
 8. Limits: at most 200 selector nodes per cohort (MAX_NODES), counting every node (combinators and leaves)
    of the `selector` tree AND of all behaviour event-selector trees (string selectors count 0; they have
    expr's 4,096-character limit). Reference depth = the number of edges of the longest reference chain
    starting at a cohort (no references: 0; A -> B: 1), at most 10 (MAX_DEPTH); a save is refused when it
    would put the saved cohort OR any cohort that references it (directly or not) over the limit.

Canonical (stored and returned) form - a `Cohort`'s `definition()`; parse_cohort(canonical) gives it back:
 - Dynamic: {"selector": <tree | text>, "behaviors": {key: entry}}. A string selector is kept VERBATIM (text in,
   the same text out, evaluated with expr's profile context); it is not converted to a tree (most expressions
   have no tree form). Tree nodes keep exactly their documented members: combinator {"operator",
   "children"}; behaviour {"property", "value", "operator", "operand"}; user/event leaves {"property",
   "value", "operator", "operand"?, "type"} with `type` filled in and no `operand` for defined/not defined;
   cohort {"property", "value", "operator"}. Entry: {"count": {"event_selector": {"event", "selector"},
   "type"}, "window": {"unit", "value"}} or with "from_date"/"to_date" in place of "window"; `selector` is
   null, the expression text, or the canonical event tree; several selectors: "event_selectors": [..].
 - Static: {"distinct_ids": [sorted ids]}.
 - cohort_object(): the 13.1 fields (`id, project_id, name, description, created, is_visible, count,
   data_group_id: null`), `is_static`, and the definition; `in_list=True` (GET .../cohorts) drops
   `distinct_ids`.

PATCH (apply_patch): absent or null members leave the field unchanged; read-only members are ignored.
`name`/`description`/`is_visible`/`data_group_id` replace. `distinct_ids` replaces the list (a dynamic cohort
becomes static). `selector`/`behaviors` each replace their part (a static cohort becomes dynamic, with
`behaviors` = the patch's or {}); both kinds at once are refused. Then `add_distinct_ids` are added and
`remove_distinct_ids` removed (removal last: an id in both ends up absent; removing a non-member is a no-op);
each is validated like `distinct_ids`, and either on a cohort that is not static after the patch is refused.
The result is validated as a whole (parse_cohort with the cohort's own id, so cycles through it are caught).
Deleting (check_delete): refused while a cohort outside the deleted set references one inside it; the message
names the referencing cohorts.

Membership (members) at `now_ms`:
 - U = non-empty distinct_ids of the given events (any name, ANY time, after `now` included) plus every id in
   `profiles`. Ids are compared literally.
 - A DYNAMIC cohort's members are { u in U : selector(u) }, so always a subset of U (a dynamic cohort that only
   says "in static S" holds S ∩ U). A STATIC cohort's members are exactly its list (ids outside U included).
 - Events are deduplicated by `_common.prepare` (identity (event, time, distinct_id, $insert_id) within the
   project; the LAST copy in list order - the latest ingested - wins, so its properties decide selectors).
   A list of `Event`s is deduplicated the same way (last wins).
 - Behaviour count of u: u's events whose name equals a selector's `event` and whose selector is boolean true
   (string: expr.where_matches; tree: leaves like profile leaves over the event's `properties[...]`, where
   time/distinct_id/$insert_id read the event's fields) with start <= time <= now_ms (and < the end of
   to_date). absolute = number of such events; days = number of distinct project-local dates among them.
   Window start, today = the local date of now: day N -> midnight of today-(N-1); week N -> midnight of
   today-(7N-1); month N -> midnight of the day after (today - N months, the day clamped to the month's
   length: Mar 31 - 1 month = Feb 29 in 2024, so the window starts Mar 1). Local midnight is
   `_common.day_start_ms` (the other reports' rule). A start before 1900-01-01 (or too far back to compute)
   means no lower bound. from_date/to_date -> [midnight of from_date, midnight after to_date) ∩ (.., now].
 - Behaviour leaf: count <op> operand as integers.
 - User leaf on value v = the profile's property (missing key, or no profile at all -> undefined):
   defined -> v is not undefined (a JSON null is defined; the type is not applied); not defined -> negation.
   Otherwise x = v for string/list, else the cast number()/boolean()/datetime() of v - EXCEPT that an
   undefined v stays undefined (boolean(undefined) would be false, which would make `== false` true for ids
   without the property; §13.4 says `==` is false for them: this rule keeps that for every type).
   `==`, `!=`, ordered: expr.compare(op, x, operand') is boolean true (operand' = the cast operand);
   `in`: expr.compare("in", operand', x) is true (substring / list element); `not in`: it is not true. So
   for an undefined x: == false, != true, ordered false, in false, not in true.
 - String selector: expr.profile_where_matches(text, properties or {}, {key: count for every behaviour}).
 - Cohort leaf: u in members(ref) / not in (ref static: its list) - evaluated at the same now.
 - count = len(members) (§13.5; ids without a profile included). The 60-second count cache is not modelled.
 - /cohorts/list: the cohorts of `project_id` (all given when None), visible or not, ordered by id, each
   exactly {"count", "is_visible", "description", "created", "project_id", "id", "name"} in that order.
 - /engage (engage_by_cohort): engage.engage with the members computed here (lazily, for the project's
   cohorts) and a raw_cohort hook: `{"raw_cohort": d}` is parsed with parse_raw_cohort (a definition only:
   name/description/is_visible are ignored, data_group_id must be null; references resolve in the project)
   and an invalid one is EngageError("filter_by_cohort: <message>"). Membership is computed on
   `page_snapshot` when given (the session's page-0 profile state) and at `now_ms` (the page-0 time).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from . import expr
from ._common import Event, day_start_ms, local, prepare
from .engage import EngageError, engage

__all__ = [
    "MAX_BEHAVIORS",
    "MAX_DEPTH",
    "MAX_NODES",
    "Behavior",
    "Cohort",
    "CohortError",
    "EventSelector",
    "apply_patch",
    "check_delete",
    "cohort_object",
    "cohorts_list",
    "count",
    "created_text",
    "engage_by_cohort",
    "members",
    "parse_cohort",
    "parse_raw_cohort",
    "user_profiles",
    "window_start",
]

MAX_NAME = 255
MAX_DESCRIPTION = 1000
MAX_BEHAVIORS = 50
MAX_NODES = 200
MAX_DEPTH = 10
MAX_ID = 255
KEY = re.compile(r"[A-Za-z0-9_]{1,64}")
LIST_WINDOW = re.compile(r"([1-9][0-9]*)d")
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
PROPERTY_OPERATORS = (*COMPARISONS, "in", "not in", "defined", "not defined")
PRESENCE = ("defined", "not defined")
TYPES = ("string", "number", "boolean", "datetime", "list")
UNITS = ("day", "week", "month")
COUNT_TYPES = ("absolute", "days")
READ_ONLY = ("id", "project_id", "created", "count", "is_static")
FLOOR = date(1900, 1, 1)
UNDEFINED = expr.UNDEFINED


# ------------------------------------------------------------------------------------------------ model
class CohortError(Exception):
    """A definition the server must refuse (HTTP 400). The oracle's messages read
    "<member>: <problem>[ (at position N)]"; `member` and `position` hold the parts. Equality: the message."""

    def __init__(self, message: str, *, member: str = "", position: int | None = None):
        super().__init__(message)
        self.message = message
        self.member = member
        self.position = position

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CohortError) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)


@dataclass(frozen=True)
class EventSelector:
    event: str
    selector: str | dict | None = None  # expression text, canonical event tree, or None (every event)

    def canonical(self) -> dict:
        return {"event": self.event, "selector": self.selector}


@dataclass(frozen=True)
class Behavior:
    selectors: tuple[EventSelector, ...]  # OR-ed
    type: str = "absolute"  # "absolute" | "days"
    window: tuple[str, int] | None = None  # (unit, value)
    dates: tuple[str, str] | None = None  # (from_date, to_date)

    def canonical(self) -> dict:
        if len(self.selectors) == 1:
            count: dict = {"event_selector": self.selectors[0].canonical(), "type": self.type}
        else:
            count = {"event_selectors": [s.canonical() for s in self.selectors], "type": self.type}
        if self.window is not None:
            return {"count": count, "window": {"unit": self.window[0], "value": self.window[1]}}
        assert self.dates is not None
        return {"count": count, "from_date": self.dates[0], "to_date": self.dates[1]}


@dataclass(frozen=True)
class Cohort:
    name: str
    description: str = ""
    is_visible: int = 1
    selector: dict | str | None = None  # canonical tree or expression text (dynamic); None when static
    behaviors: Mapping[str, Behavior] = field(default_factory=dict)
    distinct_ids: tuple[str, ...] | None = None  # sorted (static); None when dynamic
    id: int | None = None
    project_id: int = 1
    created: str = ""

    @property
    def is_static(self) -> bool:
        return self.distinct_ids is not None

    def definition(self) -> dict:
        if self.distinct_ids is not None:
            return {"distinct_ids": list(self.distinct_ids)}
        return {"selector": self.selector, "behaviors": {k: b.canonical() for k, b in self.behaviors.items()}}

    def body(self) -> dict:
        """A create body that parses back to this cohort (metadata + canonical definition)."""
        return {"name": self.name, "description": self.description, "is_visible": self.is_visible, **self.definition()}

    def references(self) -> frozenset[int]:
        out: set[int] = set()
        stack = [self.selector] if isinstance(self.selector, dict) else []
        while stack:
            node = stack.pop()
            if "children" in node:
                stack.extend(node["children"])
            elif node.get("property") == "cohort":
                out.add(node["value"])
        return frozenset(out)


def _error(member: str, problem: str, position: int | None = None) -> CohortError:
    where = f" (at position {position})" if position is not None else ""
    return CohortError(
        f"{member}: {problem}{where}" if member else f"{problem}{where}", member=member, position=position
    )


def created_text(ms: int) -> str:
    """`created`: `YYYY-MM-DD HH:MM:SS`, UTC (§13.1)."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S")


# ------------------------------------------------------------------------------------------- parsing
def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _operand(value: object, kind: str) -> object:
    """The value a leaf compares with (the operand cast by the leaf's type); ValueError when it cannot be."""
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        raise ValueError("must be a finite number")
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValueError("a boolean leaf needs a JSON boolean operand")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError("a number leaf needs a number operand")
        number = expr.cast("number", value)
        if number is UNDEFINED or (isinstance(number, int) and abs(number) >= 2**1024):
            raise ValueError(f"{value!r} is not a number")
        return number
    if kind == "datetime":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError("a datetime leaf needs an ISO date string or an epoch time")
        instant = expr.cast("datetime", value)
        if instant is UNDEFINED:
            raise ValueError(f"{value!r} is not a datetime in [1900, 2300)")
        return instant
    return value  # string, list: as is


def _raw_nodes(node: object) -> int:
    """Nodes of a tree as sent (before validation), without recursion."""
    n, stack = 0, [node]
    while stack and n <= MAX_NODES:
        item = stack.pop()
        n += 1
        if isinstance(item, dict) and isinstance(item.get("children"), list):
            stack.extend(item["children"])
    return n


def _behavior_position(text: str, key: str) -> int | None:
    quoted = re.escape(json.dumps(key)) + "|" + re.escape("'" + key + "'")
    m = re.search(r"behaviors\s*\[\s*(?:" + quoted + ")", text)
    return m.start() if m else None


class _Parser:
    def __init__(self, existing: Mapping[int, Cohort] | None, cohort_id: int | None, project_id: int):
        self.existing = dict(existing or {})
        self.cohort_id = cohort_id
        self.project_id = project_id
        self.nodes = 0
        self.behavior_keys: frozenset[str] = frozenset()

    # -- metadata
    @staticmethod
    def name(body: dict) -> str:
        name = body.get("name")
        if name is None:
            raise _error("name", "required")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
            raise _error("name", f"must be a string of 1-{MAX_NAME} characters")
        return name

    @staticmethod
    def description(body: dict) -> str:
        text = body.get("description")
        if text is None:
            return ""
        if not isinstance(text, str) or len(text) > MAX_DESCRIPTION:
            raise _error("description", f"must be a string of at most {MAX_DESCRIPTION} characters")
        return text

    @staticmethod
    def is_visible(body: dict) -> int:
        value = body.get("is_visible")
        if value is None:
            return 1
        if value is True or value is False or (_int(value) and value in (0, 1)):
            return int(value)
        raise _error("is_visible", f"must be true, false, 0 or 1, got {value!r}")

    @staticmethod
    def no_group(body: dict) -> None:
        if body.get("data_group_id") is not None:
            raise _error("data_group_id", "group cohorts are not supported (must be null)")

    # -- static
    @staticmethod
    def distinct_ids(value: object, member: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise _error(member, "must be a JSON array of distinct ids")
        out: set[str] = set()
        for i, item in enumerate(value):
            if not (isinstance(item, str) or _int(item)):
                raise _error(f"{member}[{i}]", f"a distinct id is a string or an integer, got {item!r}")
            text = str(item)
            if len(text) > MAX_ID:
                raise _error(f"{member}[{i}]", f"a distinct id has at most {MAX_ID} characters")
            if text:
                out.add(text)
        return tuple(sorted(out))

    # -- definition
    def definition(self, body: dict) -> tuple[dict | str | None, dict[str, Behavior], tuple[str, ...] | None]:
        static = body.get("distinct_ids") is not None
        dynamic = body.get("selector") is not None or body.get("behaviors") is not None
        if static and dynamic:
            raise _error("distinct_ids", "a cohort is dynamic (selector, behaviors) or static, not both")
        if static:
            return None, {}, self.distinct_ids(body["distinct_ids"], "distinct_ids")
        if not dynamic:
            raise _error("selector", "a definition is required: selector (+ behaviors) or distinct_ids")
        behaviors = self.behaviors(body.get("behaviors"))
        self.behavior_keys = frozenset(behaviors)
        if body.get("selector") is None:
            raise _error("selector", "required with behaviors")
        return self.selector(body["selector"]), behaviors, None

    # -- behaviours
    def behaviors(self, value: object) -> dict[str, Behavior]:
        if value is None:
            return {}
        if not isinstance(value, (dict, list)):
            raise _error("behaviors", "must be an object (key -> behaviour) or the /engage list form")
        if len(value) > MAX_BEHAVIORS:
            raise _error("behaviors", f"at most {MAX_BEHAVIORS} behaviours, got {len(value)}")
        if isinstance(value, list):
            return self.list_form(value)
        out = {}
        for key, entry in value.items():
            member = f"behaviors.{key}"
            if not KEY.fullmatch(key):
                raise _error(member, "a behaviour key is 1-64 characters [A-Za-z0-9_]")
            out[key] = self.behavior(entry, member)
        return out

    def list_form(self, items: list) -> dict[str, Behavior]:
        out: dict[str, Behavior] = {}
        for i, item in enumerate(items):
            member = f"behaviors[{i}]"
            if not isinstance(item, dict):
                raise _error(member, "must be an object {name, window, event_selectors}")
            name = item.get("name")
            if not isinstance(name, str) or not KEY.fullmatch(name):
                raise _error(f"{member}.name", "a behaviour name is 1-64 characters [A-Za-z0-9_]")
            if name in out:
                raise _error(f"{member}.name", f"duplicate behaviour name {name!r}")
            window = item.get("window")
            match = LIST_WINDOW.fullmatch(window) if isinstance(window, str) else None
            if match is None:
                raise _error(f"{member}.window", f"must be '<N>d' with N >= 1, got {window!r}")
            selectors = item.get("event_selectors")
            if not isinstance(selectors, list) or not selectors:
                raise _error(f"{member}.event_selectors", "must be a non-empty array")
            out[name] = Behavior(
                tuple(self.event_selector(s, f"{member}.event_selectors[{j}]") for j, s in enumerate(selectors)),
                "absolute",
                ("day", int(match.group(1))),
            )
        return out

    def behavior(self, entry: object, member: str) -> Behavior:
        if not isinstance(entry, dict):
            raise _error(member, "must be an object {count, window | from_date + to_date}")
        count = entry.get("count")
        if not isinstance(count, dict):
            raise _error(f"{member}.count", "must be an object {event_selector, type}")
        for unsupported in ("aggregationOperator", "property"):
            if count.get(unsupported) is not None:
                raise _error(f"{member}.count.{unsupported}", "not supported")
        kind = count.get("type")
        kind = "absolute" if kind is None else kind
        if kind not in COUNT_TYPES:
            raise _error(f"{member}.count.type", f"must be 'absolute' or 'days', got {kind!r}")
        one, many = count.get("event_selector"), count.get("event_selectors")
        if (one is None) == (many is None):
            raise _error(f"{member}.count.event_selector", "exactly one of event_selector, event_selectors")
        if one is not None:
            selectors = (self.event_selector(one, f"{member}.count.event_selector"),)
        else:
            if not isinstance(many, list) or not many:
                raise _error(f"{member}.count.event_selectors", "must be a non-empty array")
            selectors = tuple(
                self.event_selector(s, f"{member}.count.event_selectors[{j}]") for j, s in enumerate(many)
            )
        window, dates = self.time(entry, member)
        return Behavior(selectors, kind, window, dates)

    @staticmethod
    def time(entry: dict, member: str) -> tuple[tuple[str, int] | None, tuple[str, str] | None]:
        window = entry.get("window")
        has_dates = entry.get("from_date") is not None or entry.get("to_date") is not None
        if window is not None and has_dates:
            raise _error(member, "exactly one time constraint: window, or from_date + to_date")
        if window is not None:
            if not isinstance(window, dict):
                raise _error(f"{member}.window", "must be an object {unit, value}")
            unit, value = window.get("unit"), window.get("value")
            if unit not in UNITS:
                raise _error(f"{member}.window.unit", f"must be 'day', 'week' or 'month', got {unit!r}")
            if not _int(value) or value < 1:
                raise _error(f"{member}.window.value", f"must be an integer >= 1, got {value!r}")
            return (unit, value), None
        if not has_dates:
            raise _error(f"{member}.window", "a time constraint is required: window, or from_date + to_date")
        days = []
        for name in ("from_date", "to_date"):
            text = entry.get(name)
            try:
                if not isinstance(text, str) or not DATE.fullmatch(text):
                    raise ValueError
                days.append(date.fromisoformat(text))
            except ValueError:
                raise _error(f"{member}.{name}", f"must be a date YYYY-MM-DD, got {text!r}") from None
        if days[0] > days[1]:
            raise _error(f"{member}.from_date", "must not be after to_date")
        return None, (days[0].isoformat(), days[1].isoformat())

    def event_selector(self, item: object, member: str) -> EventSelector:
        if not isinstance(item, dict):
            raise _error(member, "must be an object {event, selector}")
        event = item.get("event")
        if not isinstance(event, str) or not event:
            raise _error(f"{member}.event", "a non-empty event name is required")
        selector = item.get("selector")
        if selector is None or selector == "":
            return EventSelector(event, None)
        if isinstance(selector, str):
            try:
                expr.parse(selector)
            except expr.ExprError as exc:
                raise _error(f"{member}.selector", str(exc), expr.error_position(selector)) from None
            return EventSelector(event, selector)
        if isinstance(selector, dict):
            self.count_nodes(selector, f"{member}.selector")
            return EventSelector(event, self.node(selector, f"{member}.selector", event_leaves=True))
        raise _error(f"{member}.selector", "must be null, an expression or a selector tree")

    # -- selector
    def count_nodes(self, tree: object, member: str) -> None:
        self.nodes += _raw_nodes(tree)
        if self.nodes > MAX_NODES:
            raise _error(member, f"at most {MAX_NODES} selector nodes per cohort")

    def selector(self, value: object) -> dict | str:
        if isinstance(value, str):
            return self.selector_text(value)
        if not isinstance(value, dict):
            raise _error("selector", "must be a selector tree (object) or an expression (string)")
        self.count_nodes(value, "selector")
        return self.node(value, "selector", event_leaves=False)

    def selector_text(self, text: str) -> str:
        if not text:
            raise _error("selector", "empty expression")
        try:
            used = expr.behavior_names(text)
        except expr.ExprError as exc:
            raise _error("selector", str(exc), expr.error_position(text, profile=True)) from None
        undefined = sorted(used - self.behavior_keys)
        if undefined:
            key = undefined[0]
            raise _error("selector", f"behaviors[{key!r}] is not defined in behaviors", _behavior_position(text, key))
        return text

    def node(self, node: object, member: str, *, event_leaves: bool) -> dict:
        if not isinstance(node, dict):
            raise _error(member, "a selector node must be an object")
        if "children" in node or node.get("operator") in ("and", "or"):
            operator, children = node.get("operator"), node.get("children")
            if operator not in ("and", "or"):
                raise _error(f"{member}.operator", f"unknown combinator operator {operator!r} (and, or)")
            if not isinstance(children, list) or not children:
                raise _error(f"{member}.children", "must be a non-empty array of nodes")
            return {
                "operator": operator,
                "children": [
                    self.node(c, f"{member}.children[{i}]", event_leaves=event_leaves) for i, c in enumerate(children)
                ],
            }
        kind = node.get("property")
        if event_leaves:
            if kind != "event":
                raise _error(f"{member}.property", f"unknown node kind {kind!r} (event selector leaves: event)")
            return self.property_leaf(node, member, "event")
        if kind == "behaviors":
            return self.behavior_leaf(node, member)
        if kind == "user":
            return self.property_leaf(node, member, "user")
        if kind == "cohort":
            return self.cohort_leaf(node, member)
        raise _error(f"{member}.property", f"unknown node kind {kind!r} (behaviors, user, cohort)")

    def behavior_leaf(self, node: dict, member: str) -> dict:
        key, operator, operand = node.get("value"), node.get("operator"), node.get("operand")
        if not isinstance(key, str) or key not in self.behavior_keys:
            raise _error(f"{member}.value", f"behaviour {key!r} is not defined in behaviors")
        if operator not in COMPARISONS:
            raise _error(f"{member}.operator", f"unknown operator {operator!r} for a behaviour count")
        if not _int(operand) or operand < 0:
            raise _error(f"{member}.operand", f"a behaviour count is compared with an integer >= 0, got {operand!r}")
        return {"property": "behaviors", "value": key, "operator": operator, "operand": operand}

    @staticmethod
    def property_leaf(node: dict, member: str, kind: str) -> dict:
        name, operator = node.get("value"), node.get("operator")
        if not isinstance(name, str) or not name:
            raise _error(f"{member}.value", "a property name (non-empty string) is required")
        if operator not in PROPERTY_OPERATORS:
            raise _error(f"{member}.operator", f"unknown operator {operator!r}")
        kind_of_value = node.get("type")
        kind_of_value = "string" if kind_of_value is None else kind_of_value
        if kind_of_value not in TYPES:
            raise _error(f"{member}.type", f"unknown type {kind_of_value!r} ({', '.join(TYPES)})")
        out = {"property": kind, "value": name, "operator": operator}
        if operator not in PRESENCE:
            if "operand" not in node:
                raise _error(f"{member}.operand", "required")
            try:
                _operand(node["operand"], kind_of_value)
            except ValueError as exc:
                raise _error(f"{member}.operand", str(exc)) from None
            out["operand"] = node["operand"]
        out["type"] = kind_of_value
        return out

    def cohort_leaf(self, node: dict, member: str) -> dict:
        ref, operator = node.get("value"), node.get("operator")
        if not _int(ref):
            raise _error(f"{member}.value", f"a cohort id (integer) is required, got {ref!r}")
        if operator not in ("in", "not in"):
            raise _error(f"{member}.operator", f"unknown operator {operator!r} for a cohort ('in', 'not in')")
        if ref == self.cohort_id:
            raise _error(f"{member}.value", f"reference cycle: cohort {ref} references itself")
        target = self.existing.get(ref)
        if target is None or target.project_id != self.project_id:
            raise _error(f"{member}.value", f"unknown cohort {ref}")
        return {"property": "cohort", "value": ref, "operator": operator}

    # -- references
    def check_graph(self, cohort: Cohort) -> None:
        """Cycles and depth over the project's cohorts with `cohort` saved (as `cohort_id`, or as a new one)."""
        me: object = self.cohort_id if self.cohort_id is not None else object()
        graph: dict[object, frozenset[int]] = {
            i: c.references() for i, c in self.existing.items() if c.project_id == self.project_id and i != me
        }
        graph[me] = cohort.references()
        depth: dict[object, int] = {}

        def walk(node: object, path: tuple[object, ...]) -> int:
            if node in path:
                raise _error("selector", f"reference cycle: {' -> '.join(map(str, (*path, node)))}")
            if node not in depth:
                depth[node] = max((1 + walk(r, (*path, node)) for r in graph.get(node, ())), default=0)
            return depth[node]

        for start in sorted(graph, key=lambda n: (n is not me, str(n))):
            walk(start, ())
        reaching = {n for n in graph if n == me or self.reaches(graph, n, me)}
        for n in sorted(reaching, key=lambda n: (n is not me, str(n))):
            if depth[n] > MAX_DEPTH:
                who = "the cohort's" if n is me else f"cohort {n}'s"
                raise _error("selector", f"{who} references nest {depth[n]} deep (at most {MAX_DEPTH})")

    @staticmethod
    def reaches(graph: Mapping[object, frozenset[int]], start: object, goal: object) -> bool:
        seen, stack = set(), list(graph.get(start, ()))
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
    existing: Mapping[int, Cohort] | None,
    cohort_id: int | None,
    project_id: int,
    created: str,
    definition_only: bool = False,
) -> Cohort:
    if not isinstance(body, dict):
        raise _error("body", "must be a JSON object")
    parser = _Parser(existing, cohort_id, project_id)
    if definition_only:
        name, description, visible = "", "", 1
    else:
        name, description, visible = parser.name(body), parser.description(body), parser.is_visible(body)
    parser.no_group(body)
    for member in ("add_distinct_ids", "remove_distinct_ids"):
        if body.get(member) is not None:
            raise _error(member, "only accepted on update (PATCH)")
    selector, behaviors, ids = parser.definition(body)
    cohort = Cohort(name, description, visible, selector, behaviors, ids, cohort_id, project_id, created)
    parser.check_graph(cohort)
    return cohort


def parse_cohort(
    body: object,
    *,
    existing: Mapping[int, Cohort] | None = None,
    cohort_id: int | None = None,
    project_id: int = 1,
    created: str = "",
) -> Cohort | CohortError:
    """A create body (or a whole updated cohort) -> the stored Cohort, or the CohortError of a 400.
    `existing`: the stored cohorts (id -> Cohort); `cohort_id`: the id the cohort has or will have."""
    try:
        return _parse(body, existing=existing, cohort_id=cohort_id, project_id=project_id, created=created)
    except CohortError as exc:
        return exc


def parse_raw_cohort(
    definition: object, *, existing: Mapping[int, Cohort] | None = None, project_id: int = 1
) -> Cohort | CohortError:
    """The `raw_cohort` of /engage filter_by_cohort: a definition only (metadata ignored, name "")."""
    try:
        return _parse(
            definition, existing=existing, cohort_id=None, project_id=project_id, created="", definition_only=True
        )
    except CohortError as exc:
        return exc


def apply_patch(cohort: Cohort, patch: object, *, existing: Mapping[int, Cohort] | None = None) -> Cohort | CohortError:
    """PATCH /cohorts/{id} (and one bulk-update item): the updated cohort, or the CohortError of a 400."""
    try:
        if not isinstance(patch, dict):
            raise _error("body", "must be a JSON object")
        given = {k: v for k, v in patch.items() if v is not None and k not in READ_ONLY}
        body = cohort.body()
        for member in ("name", "description", "is_visible", "data_group_id"):
            if member in given:
                body[member] = given[member]
        static = "distinct_ids" in given
        dynamic = "selector" in given or "behaviors" in given
        if static and dynamic:
            raise _error("distinct_ids", "a cohort is dynamic (selector, behaviors) or static, not both")
        if static:
            body.pop("selector", None)
            body.pop("behaviors", None)
            body["distinct_ids"] = list(_Parser.distinct_ids(given["distinct_ids"], "distinct_ids"))
        elif dynamic:
            if cohort.is_static:
                body.pop("distinct_ids", None)
                body["selector"], body["behaviors"] = None, None
            for member in ("selector", "behaviors"):
                if member in given:
                    body[member] = given[member]
        if "add_distinct_ids" in given or "remove_distinct_ids" in given:
            if body.get("distinct_ids") is None:
                member = "add_distinct_ids" if "add_distinct_ids" in given else "remove_distinct_ids"
                raise _error(member, "the cohort is not static")
            ids = set(body["distinct_ids"])
            ids |= set(_Parser.distinct_ids(given.get("add_distinct_ids", []), "add_distinct_ids"))
            ids -= set(_Parser.distinct_ids(given.get("remove_distinct_ids", []), "remove_distinct_ids"))
            body["distinct_ids"] = sorted(ids)
        return _parse(
            body, existing=existing, cohort_id=cohort.id, project_id=cohort.project_id, created=cohort.created
        )
    except CohortError as exc:
        return exc


def check_delete(cohort_ids: Iterable[int], cohorts: Mapping[int, Cohort]) -> CohortError | None:
    """Deleting `cohort_ids` (DELETE or bulk-delete): an error while a cohort outside the set references one
    inside it (the message names the referencing cohorts), else None. Unknown ids are the caller's 404."""
    doomed = set(cohort_ids)
    for target in sorted(doomed):
        users = sorted(i for i, c in cohorts.items() if i not in doomed and target in c.references())
        if users:
            names = ", ".join(f"{i} ({cohorts[i].name})" for i in users)
            return _error("", f"cohort {target} is referenced by cohort(s) {names}")
    return None


# ----------------------------------------------------------------------------------------- membership
def _months_back(d: date, n: int) -> date:
    months = d.year * 12 + d.month - 1 - n
    y, m = divmod(months, 12)
    m += 1
    last = ((date(y + 1, 1, 1) if m == 12 else date(y, m + 1, 1)) - timedelta(days=1)).day
    return date(y, m, min(d.day, last))


def window_start(today: date, unit: str, n: int) -> date | None:
    """The first local date of a `window` ending today (None: no lower bound)."""
    try:
        if unit == "day":
            first = today - timedelta(days=n - 1)
        elif unit == "week":
            first = today - timedelta(days=7 * n - 1)
        else:
            first = _months_back(today, n) + timedelta(days=1)
    except (OverflowError, ValueError):
        return None
    return first if first >= FLOOR else None


def _dedupe_events(events: Iterable[Event | dict]) -> list[Event]:
    items = list(events)
    if all(isinstance(e, dict) for e in items):
        return prepare(items)
    if not all(isinstance(e, Event) for e in items):
        raise TypeError("events: raw /import dicts or _common.Event objects, not a mix")
    last: dict[tuple, Event] = {}
    for e in items:
        key = (e.name, e.time_ms, e.distinct_id, e.insert_id)
        last.pop(key, None)
        last[key] = e
    return sorted(last.values(), key=lambda e: (e.time_ms, e.name, e.distinct_id, e.insert_id))


def _properties_of(profile: object) -> dict:
    return profile.properties if hasattr(profile, "properties") else profile  # type: ignore[return-value]


def _event_value(event: Event, name: str) -> object:
    return expr.evaluate(f"properties[{json.dumps(name)}]", event)


def _leaf_true(leaf: dict, value: object) -> bool:
    """A user/event leaf on the property value (UNDEFINED when missing)."""
    operator, kind = leaf["operator"], leaf["type"]
    if operator == "defined":
        return value is not UNDEFINED
    if operator == "not defined":
        return value is UNDEFINED
    x = value if kind in ("string", "list") or value is UNDEFINED else expr.cast(kind, value)
    operand = _operand(leaf["operand"], kind)
    if operator == "in":
        return expr.compare("in", operand, x) is True
    if operator == "not in":
        return expr.compare("in", operand, x) is not True
    return expr.compare(operator, x, operand) is True


def _event_tree_true(node: dict, event: Event) -> bool:
    if "children" in node:
        results = (_event_tree_true(c, event) for c in node["children"])
        return all(results) if node["operator"] == "and" else any(results)
    return _leaf_true(node, _event_value(event, node["value"]))


def _selector_true(selector: str | dict | None, event: Event) -> bool:
    if selector is None:
        return True
    if isinstance(selector, str):
        return expr.where_matches(selector, event)
    return _event_tree_true(selector, event)


def _compare_count(operator: str, count: int, operand: int) -> bool:
    return {
        "==": count == operand,
        "!=": count != operand,
        ">": count > operand,
        ">=": count >= operand,
        "<": count < operand,
        "<=": count <= operand,
    }[operator]


class _Evaluation:
    """Membership of any number of cohorts at one `now`, over one set of events and profiles (memoised)."""

    def __init__(
        self,
        cohorts: Mapping[int, Cohort],
        events: Iterable[Event | dict],
        profiles: Mapping[str, object],
        tz: str,
        now_ms: int,
    ):
        self.cohorts = cohorts
        self.profiles = {str(i): _properties_of(p) for i, p in profiles.items() if str(i)}
        self.by_id: dict[str, list[Event]] = {}
        for e in _dedupe_events(events):
            if e.distinct_id:
                self.by_id.setdefault(e.distinct_id, []).append(e)
        self.universe = frozenset(self.by_id) | frozenset(self.profiles)
        self.zone = ZoneInfo(tz)
        self.now_ms = now_ms
        self.today = local(now_ms, self.zone).date()
        self.memo: dict[int, frozenset[str]] = {}
        self.open: list[int] = []

    def members_by_id(self, cohort_id: int) -> frozenset[str]:
        if cohort_id in self.memo:
            return self.memo[cohort_id]
        if cohort_id in self.open:
            raise ValueError(f"reference cycle through cohort {cohort_id}")
        if cohort_id not in self.cohorts:
            raise KeyError(f"unknown cohort {cohort_id}")
        self.open.append(cohort_id)
        try:
            out = self.members_of(self.cohorts[cohort_id])
        finally:
            self.open.pop()
        self.memo[cohort_id] = out
        return out

    def members_of(self, cohort: Cohort) -> frozenset[str]:
        if cohort.distinct_ids is not None:
            return frozenset(cohort.distinct_ids)
        counts = {key: self.counts(b) for key, b in cohort.behaviors.items()}
        return frozenset(u for u in self.universe if self.matches(cohort.selector, u, counts))

    def time_range(self, behavior: Behavior) -> tuple[int | None, int]:
        """[start, end) in epoch ms; start None = unbounded; end never after now (now itself included)."""
        end = self.now_ms + 1
        if behavior.window is not None:
            first = window_start(self.today, *behavior.window)
            return (None if first is None else day_start_ms(first, self.zone)), end
        assert behavior.dates is not None
        first, last = (date.fromisoformat(d) for d in behavior.dates)
        start = day_start_ms(first, self.zone) if first >= FLOOR else None
        if last < date.max:
            end = min(end, day_start_ms(last + timedelta(days=1), self.zone))
        return start, end

    def counts(self, behavior: Behavior) -> dict[str, int]:
        start, end = self.time_range(behavior)
        out = {}
        for u, evs in self.by_id.items():
            hits = [
                e
                for e in evs
                if (start is None or e.time_ms >= start)
                and e.time_ms < end
                and any(e.name == s.event and _selector_true(s.selector, e) for s in behavior.selectors)
            ]
            n = len(hits) if behavior.type == "absolute" else len({local(e.time_ms, self.zone).date() for e in hits})
            if n:
                out[u] = n
        return out

    def matches(self, node: dict | str | None, u: str, counts: dict[str, dict[str, int]]) -> bool:
        props = self.profiles.get(u, {})
        if isinstance(node, str):
            return expr.profile_where_matches(node, props, {k: c.get(u, 0) for k, c in counts.items()})
        assert node is not None
        if "children" in node:
            results = (self.matches(c, u, counts) for c in node["children"])
            return all(results) if node["operator"] == "and" else any(results)
        kind = node["property"]
        if kind == "behaviors":
            return _compare_count(node["operator"], counts[node["value"]].get(u, 0), node["operand"])
        if kind == "user":
            return _leaf_true(node, props.get(node["value"], UNDEFINED))
        inside = u in self.members_by_id(node["value"])
        return inside if node["operator"] == "in" else not inside


def members(
    cohort_id: int | Cohort,
    cohorts: Mapping[int, Cohort],
    *,
    events: Iterable[Event | dict],
    profiles: Mapping[str, object],
    tz: str,
    now_ms: int,
) -> set[str]:
    """The members of cohort `cohort_id` (or of the given Cohort, its references resolved in `cohorts`) at
    `now_ms` (§13.4)."""
    evaluation = _Evaluation(cohorts, events, profiles, tz, now_ms)
    if isinstance(cohort_id, Cohort):
        return set(evaluation.members_of(cohort_id))
    return set(evaluation.members_by_id(cohort_id))


def count(
    cohort_id: int | Cohort,
    cohorts: Mapping[int, Cohort],
    *,
    events: Iterable[Event | dict],
    profiles: Mapping[str, object],
    tz: str,
    now_ms: int,
) -> int:
    """§13.5: the number of members, ids without a profile included."""
    return len(members(cohort_id, cohorts, events=events, profiles=profiles, tz=tz, now_ms=now_ms))


def cohorts_list(
    cohorts: Mapping[int, Cohort],
    *,
    events: Iterable[Event | dict],
    profiles: Mapping[str, object],
    tz: str,
    now_ms: int,
    project_id: int | None = None,
) -> list[dict]:
    """The /cohorts/list answer: every cohort (of `project_id` when given) by ascending id, seven fields each."""
    ev = _Evaluation(cohorts, events, profiles, tz, now_ms)
    out = []
    for i in sorted(cohorts):
        c = cohorts[i]
        if project_id is not None and c.project_id != project_id:
            continue
        out.append(
            {
                "count": len(ev.members_by_id(i)),
                "is_visible": c.is_visible,
                "description": c.description,
                "created": c.created,
                "project_id": c.project_id,
                "id": i,
                "name": c.name,
            }
        )
    return out


def cohort_object(cohort: Cohort, count: int, *, in_list: bool = False) -> dict:
    """The App API cohort object (§13.7): 13.1 fields, is_static, definition (`in_list`: no distinct_ids)."""
    out = {
        "id": cohort.id,
        "project_id": cohort.project_id,
        "name": cohort.name,
        "description": cohort.description,
        "created": cohort.created,
        "is_visible": cohort.is_visible,
        "count": count,
        "data_group_id": None,
        "is_static": cohort.is_static,
        **cohort.definition(),
    }
    if in_list:
        out.pop("distinct_ids", None)
    return out


# ----------------------------------------------------------------------------------------------- /engage
def user_profiles(state_profiles: Mapping[tuple, object], project_id: int) -> dict[str, dict]:
    """`profiles.apply(...).profiles` (ProfileKey -> Profile) -> the project's user profiles: id -> properties."""
    return {
        pid: _properties_of(p)
        for (proj, group_key, pid), p in state_profiles.items()
        if proj == project_id and group_key is None
    }


class _LazyMembers(Mapping[int, frozenset[str]]):
    def __init__(self, evaluation: _Evaluation, ids: Iterable[int]):
        self.evaluation, self.ids = evaluation, frozenset(ids)

    def __getitem__(self, cohort_id: int) -> frozenset[str]:
        if cohort_id not in self.ids:
            raise KeyError(cohort_id)
        return self.evaluation.members_by_id(cohort_id)

    def __contains__(self, cohort_id: object) -> bool:
        return cohort_id in self.ids

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.ids))

    def __len__(self) -> int:
        return len(self.ids)


def engage_by_cohort(
    profiles: Mapping[tuple, object],
    params: Mapping[str, object],
    *,
    project_id: int,
    cohorts: Mapping[int, Cohort],
    events: Iterable[dict],
    tz: str,
    now_ms: int,
    page_snapshot: Mapping[tuple, object] | None = None,
    group_keys: Mapping[object, str] | None = None,
) -> dict | EngageError:
    """/engage (engage.engage) with `filter_by_cohort` resolved against `cohorts` at `now_ms` (§13.6).
    `profiles`/`page_snapshot` as engage.engage (ProfileKey -> Profile); `events`: the project's raw events."""
    raw_events = list(events)
    state = page_snapshot if page_snapshot is not None else profiles
    evaluation = _Evaluation(cohorts, raw_events, user_profiles(state, project_id), tz, now_ms)
    own = [i for i, c in cohorts.items() if c.project_id == project_id]

    def raw_cohort(definition: object) -> frozenset[str]:
        parsed = parse_raw_cohort(definition, existing=cohorts, project_id=project_id)
        if isinstance(parsed, CohortError):
            raise EngageError(f"filter_by_cohort: {parsed.message}")
        return evaluation.members_of(parsed)

    return engage(
        profiles,
        params,
        project_id=project_id,
        events=raw_events,
        now_ms=now_ms,
        page_snapshot=page_snapshot,
        group_keys=group_keys,
        cohorts=_LazyMembers(evaluation, own),
        tz=tz,
        raw_cohort=raw_cohort,
    )
