"""The sources of a JQL script, read from the warehouse in bounded pages.

`parse_source` turns the runtime's description of `Events(...)`, `People(...)` or
`join(...)` into a frozen `Source`, with every selector parsed and checked by the
expression language (a bad one is a 400 naming it). The SQL is built here, pure, and
read through the scoped sources only (`final_events`, `source(PROFILES, Scope(...))`):
dates, event names and selectors are pushed down, so only the rows the script can see
are read, each already as JSON text built by ClickHouse.

* Events: `events FINAL` of the local days `from_date`..`to_date` (project zone); windows
  of whole hours in (time, dedup hash) order (`event_windows`: each event as a head and its
  stored properties text, parsed lazily by the runtime), or for `join` keyset pages in
  (distinct_id, time, dedup hash) order (`read_events`). Item:
  `{name, distinct_id, time, sampling_factor, properties}`; `time` is the event's epoch
  milliseconds shifted by the project zone's offset at that instant (semantics §5.3: "ms
  since epoch, project timezone"), so `new Date(time).getUTC*()` reads local wall time.
* People: user profiles (`profiles FINAL`, group key '', not deleted), keyset pages by
  id. Item: `{distinct_id, time, last_seen, properties}` with `time` = `last_seen` = the
  last update, shifted likewise [gap: the store keeps one update time].
* join: both read in distinct_id order and merged (`join_rows`), one pass, bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

import orjson

from footfall.services.query.reports._common import Binds, Query, final_events, raw_events
from footfall.shared.errors import ParamError
from footfall.shared.expr import ExprError, check_expr, compile_where, parse_expr
from footfall.shared.expr.typed import TNode, UserProp, walk
from footfall.shared.expr.values import property_raw
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.sql import Scope, Sql, join, source, sql
from footfall.shared.timerange import day_range_utc

__all__ = [
    "MAX_PROJECTED",
    "PAGE",
    "EventsSource",
    "JoinSource",
    "PeopleSource",
    "Pushed",
    "Run",
    "Selector",
    "Source",
    "Window",
    "event_windows",
    "events_page",
    "events_window",
    "hour_counts",
    "key_counts",
    "key_windows",
    "merge_pushed",
    "parse_pushed",
    "parse_source",
    "people_page",
    "plan_windows",
    "projected_keys",
    "projection_suffices",
    "pushed_query",
    "read_events",
    "read_people",
]

PAGE = 20_000
# Rows one statement reads at most, and one call into the isolate gets (an Events window):
# measured on the 10M bench data, a statement costs ~0.2 s of fixed work, so few large ones.
_WINDOW_ROWS = 200_000
MAX_PROJECTED = 32  # property keys read out of `properties` by the warehouse (see `projected_keys`)
JoinType = Literal["full", "left", "right", "inner"]
Run = Callable[[Query], Awaitable[list[tuple[Any, ...]]]]


@dataclass(frozen=True)
class Selector:
    event: str | None
    expr: TNode | None


@dataclass(frozen=True)
class EventsSource:
    from_date: date
    to_date: date
    selectors: tuple[Selector, ...]
    join_selectors: tuple[Selector, ...] = ()


@dataclass(frozen=True)
class PeopleSource:
    selectors: tuple[TNode | None, ...]


@dataclass(frozen=True)
class JoinSource:
    events: EventsSource
    people: PeopleSource
    type: JoinType


Source = EventsSource | PeopleSource | JoinSource


def _expr(text: Any, what: str, context: Literal["events", "profiles", "join"]) -> TNode | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ParamError(f"Error in {what}: must be a string")
    try:
        return check_expr(parse_expr(text), context=context)
    except ExprError as exc:
        raise ParamError(f"Error in {what}: {exc.message} (at character {exc.position})") from None


def _date(value: Any, what: str) -> date:
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise ParamError(f"Error in {what}: invalid date {value!r}") from None


def _event_selectors(items: Any, what: str, context: Literal["events", "join"] = "events") -> tuple[Selector, ...]:
    out = []
    for i, item in enumerate(items or []):
        name = item.get("event")
        out.append(
            Selector(name if isinstance(name, str) else None, _expr(item.get("selector"), f"{what}[{i}]", context))
        )
    return tuple(out)


def _reads_user(selectors: Sequence[Selector]) -> bool:
    """Whether a (join) selector reads the user's profile (`user[...]`)."""
    return any(isinstance(node, UserProp) for s in selectors if s.expr is not None for node in walk(s.expr))


def _events(spec: dict[str, Any], join_selectors: Any = None) -> EventsSource:
    from_date, to_date = (
        _date(spec.get("from_date"), "Events() from_date"),
        _date(spec.get("to_date"), "Events() to_date"),
    )
    if to_date < from_date:
        raise ParamError("Error in Events(): to_date is before from_date")
    return EventsSource(
        from_date,
        to_date,
        _event_selectors(spec.get("event_selectors"), "event_selectors"),
        _event_selectors(join_selectors, "join selectors", "join"),
    )


def _people(spec: dict[str, Any]) -> PeopleSource:
    items = spec.get("user_selectors") or []
    return PeopleSource(
        tuple(_expr(item.get("selector"), f"user_selectors[{i}]", "profiles") for i, item in enumerate(items))
    )


def parse_source(spec: dict[str, Any]) -> Source:
    """The runtime's description of the script's source (already shape-checked there)."""
    kind = spec.get("type")
    if kind == "events":
        return _events(spec)
    if kind == "people":
        return _people(spec)
    if kind == "join":
        return JoinSource(_events(spec["events"], spec.get("selectors")), _people(spec["people"]), spec["join_type"])
    raise ParamError("main() must return a collection of Events, People or join")


# -- SQL -------------------------------------------------------------------------------------------
def _selector_condition(
    selectors: Sequence[Selector], b: Binds, user_properties: Sql | None = None
) -> tuple[list[str] | None, Sql | None]:
    """The OR of the selectors (event name AND expression) and, when every one names an
    event, the names (for the key conditions). No selector, or one matching everything: None.
    `user_properties`: the joined profile text that `user[...]` reads."""
    if not selectors:
        return None, None
    terms, names = [], []
    for s in selectors:
        parts = []
        if s.event is not None:
            parts.append(sql("event = {}", b.add(s.event, "String")))
            names.append(s.event)
        if s.expr is not None:
            parts.append(compile_where(s.expr, b, user_properties=user_properties))
        if not parts:
            return None, None
        terms.append(sql("({})", join(" AND ", parts)))
    every_named = all(s.event is not None for s in selectors)
    return (sorted(set(names)) if every_named else None), join(" OR ", terms)


def _local_ms(column: Sql, tz: Sql) -> Sql:
    return sql("toUnixTimestamp64Milli({}) + 1000 * toInt64(timeZoneOffset(toTimeZone({}, {})))", column, column, tz)


def events_page(
    src: EventsSource,
    project_id: int,
    tz: str,
    by_user: bool,
    after: tuple[Any, ...] | None,
    page: int = PAGE,
    window: tuple[datetime, datetime] | None = None,
) -> Query:
    """One page of the events' JQL items, after the keyset position `after` (and within the
    UTC `window` of the range, when given): rows `(item_json, distinct_id, time, hash)`.
    Join selectors that read `user[...]` are tested beside the event's live user profile
    (a LEFT JOIN: no profile reads undefined)."""
    b = Binds()
    scope = Scope(project_id, *(window or day_range_utc(src.from_date, src.to_date, tz)))
    names, condition = _selector_condition(src.selectors, b)
    with_user = _reads_user(src.join_selectors)
    extra_names, extra = _selector_condition(src.join_selectors, b, sql("user_properties") if with_user else None)
    if extra_names is not None:
        names = extra_names if names is None else sorted(set(names) & set(extra_names))
    if extra is not None and not with_user:
        condition = extra if condition is None else sql("({}) AND ({})", condition, extra)
    if after is not None:
        if by_user:
            key = sql(
                "(distinct_id, time, hex(dedup_hash)) > ({}, {}, {})",
                b.add(after[0], "String"),
                b.add(after[1], "DateTime64(3, 'UTC')"),
                b.add(after[2], "String"),
            )
        else:
            key = sql(
                "(time, hex(dedup_hash)) > ({}, {})", b.add(after[1], "DateTime64(3, 'UTC')"), b.add(after[2], "String")
            )
        condition = key if condition is None else sql("({}) AND ({})", key, condition)
    keys = sql("distinct_id >= {}", b.add(after[0], "String")) if by_user and after is not None else None
    rows = final_events(scope, names, condition, b, keys=keys)
    if with_user and extra is not None:
        users = sql("group_key = ''")
        people = source(PROFILES, Scope(project_id), b, final=True, keys=users, where=sql("deleted = 0"))
        rows = sql(
            "(SELECT event, distinct_id, time, insert_id, dedup_hash, properties FROM {}) AS e"
            " LEFT JOIN (SELECT profile_id, properties AS user_properties FROM {}) AS u ON e.distinct_id = u.profile_id"
            " WHERE {}",
            rows,
            people,
            extra,
        )
    # The item's JSON text (char(123) and char(125) are the braces, which SQL templates reserve).
    item = sql(
        "concat(char(123), '\"name\":', toJSONString(event), ',\"distinct_id\":', toJSONString(distinct_id), "
        '\',"time":\', toString({}), \',"sampling_factor":1,"properties":\', properties, char(125))',
        _local_ms(sql("time"), b.add(tz, "String")),
    )
    order = sql("distinct_id, time, h") if by_user else sql("time, h")
    return Query(
        sql(
            "SELECT {} AS item, distinct_id, time, hex(dedup_hash) AS h FROM {} ORDER BY {} LIMIT {}",
            item,
            rows,
            order,
            b.add(page, "UInt32"),
        ),
        b,
    )


def events_window(
    src: EventsSource,
    project_id: int,
    tz: str,
    keys: Sequence[str],
    window: Window,
    offset: int = 0,
    limit: int = _WINDOW_ROWS,
    ordered: bool = True,
    with_properties: bool = True,
) -> Query:
    """The events of the `window` in time order (unless not `ordered`: measured, the sort
    is a quarter of the statement), from the `offset`-th on, as rows `(head_json,
    properties)`: `head_json` is `[name, distinct_id, time,
    {projected}]`, where `{projected}` holds the raw values of the property `keys` the
    event has (read by the warehouse, `property_raw`), and `properties` is the stored JSON
    text, given to the isolate as it is and parsed there only when the script reaches a
    property outside `keys` (runtime.js, `lazyProperties`). Not `with_properties`: rows
    `(head_json,)` only (the runtime then asks for a second run when the script reaches
    further, `NeedsProperties`)."""
    b = Binds()
    scope = Scope(project_id, window.start, window.end)
    names, condition = _selector_condition(src.selectors, b)
    rows = final_events(scope, names, condition, b, keys=window.key_condition(b))
    members = []
    for name in keys:
        raw = property_raw(name, b)
        members.append(
            sql("if(empty({}), '', concat({}, ':', {}))", raw, b.add(orjson.dumps(name).decode(), "String"), raw)
        )
    projected = (
        sql("arrayStringConcat(arrayFilter(m -> notEmpty(m), [{}]), ',')", join(", ", members))
        if members
        else sql("''")
    )
    head = sql(
        "concat('[', toJSONString(event), ',', toJSONString(distinct_id), ',', toString({}), ',', char(123), {},"
        " char(125), ']')",
        _local_ms(sql("time"), b.add(tz, "String")),
        projected,
    )
    return Query(
        sql(
            "SELECT {} AS head{} FROM {} {}LIMIT {} OFFSET {}",
            head,
            sql(", properties") if with_properties else sql(""),
            rows,
            sql("ORDER BY time, dedup_hash ") if ordered else sql(""),
            b.add(limit, "UInt32"),
            b.add(offset, "UInt64"),
        ),
        b,
    )


# Where a script names an event property: `properties.plan`, `properties["plan"]`, `'properties.plan'`.
_PROPERTY_NAME = re.compile(
    r"""properties\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*(?:"([^"\\\n]*)"|'([^'\\\n]*)')\s*\])"""
    r"""|["'`]properties\.([^."'`\\\n]+)"""
)


def projected_keys(script: str) -> tuple[str, ...]:
    """The property names the script spells out (at most `MAX_PROJECTED`, first seen first):
    the warehouse reads them out of each event's `properties`, so a script that reaches only
    these never parses the whole text. A guess from the text alone, so it is never trusted:
    any other access parses the event's properties in full (same answer, slower)."""
    out: dict[str, None] = {}
    for match in _PROPERTY_NAME.finditer(script):
        name = next(g for g in match.groups() if g is not None)
        out.setdefault(name, None)
        if len(out) >= MAX_PROJECTED:
            break
    return tuple(out)


def projection_suffices(script: str) -> bool:
    """Whether every mention of `properties` in the script is one that `projected_keys`
    reads (and they are at most `MAX_PROJECTED` names): then the script can likely run on
    the projected values alone, without the stored texts. Still a guess, checked at run
    time (engine.NeedsProperties)."""
    matches = list(_PROPERTY_NAME.finditer(script))
    if len({next(g for g in m.groups() if g is not None) for m in matches}) > MAX_PROJECTED:
        return False
    # Linear in the script (this runs on the event loop): each read holds one `properties`.
    read = {script.find("properties", m.start(), m.end()) for m in matches}
    return all(m.start() in read for m in _PROPERTIES_WORD.finditer(script))


_PROPERTIES_WORD = re.compile(r"properties")


def _people_rows(src: PeopleSource, project_id: int, b: Binds, after: str | None = None) -> Sql:
    """The live user profiles the selectors keep (any of them), after the id `after`."""
    keys = sql("group_key = ''")
    if after is not None:
        keys = sql("{} AND profile_id > {}", keys, b.add(after, "String"))
    conditions = [compile_where(e, b, properties_of=PROFILES) for e in src.selectors if e is not None]
    where = sql("deleted = 0")
    if conditions and len(conditions) == len(src.selectors):
        where = sql("deleted = 0 AND ({})", join(" OR ", [sql("({})", c) for c in conditions]))
    return source(PROFILES, Scope(project_id), b, final=True, keys=keys, where=where)


def people_page(src: PeopleSource, project_id: int, tz: str, after: str | None, page: int = PAGE) -> Query:
    """One page of user profiles' JQL items after the id `after`: rows `(item_json, id)`."""
    b = Binds()
    rows = _people_rows(src, project_id, b, after)
    ms = _local_ms(sql("last_time"), b.add(tz, "String"))
    item = sql(
        "concat(char(123), '\"distinct_id\":', toJSONString(profile_id), ',\"time\":', toString({}), "
        "',\"last_seen\":', toString({}), ',\"properties\":', properties, char(125))",
        ms,
        ms,
    )
    return Query(
        sql("SELECT {} AS item, profile_id FROM {} ORDER BY profile_id LIMIT {}", item, rows, b.add(page, "UInt32")), b
    )


def _key_expr(path: str, b: Binds) -> Sql:
    if path == "name":
        return sql("toString(event)")
    if path == "distinct_id":
        return sql("distinct_id")
    return property_raw(path.removeprefix("properties."), b)


@dataclass(frozen=True)
class Pushed:
    """A first step computed by the warehouse (runtime.js `pushdown`): group by `keys`
    (`name`, `distinct_id`, `properties.<key>`; none for `reduce`), one built-in `reducer`
    (count, sum, avg, min, max) of the property `path`."""

    keys: tuple[str, ...]
    reducer: Literal["count", "sum", "avg", "min", "max"]
    path: str | None
    reduce: bool


def parse_pushed(spec: Any) -> Pushed | None:
    if not isinstance(spec, dict):
        return None
    return Pushed(tuple(spec["keys"]), spec["reducer"], spec.get("path"), bool(spec.get("reduce")))


def _profile_key_expr(path: str, b: Binds) -> Sql:
    if path == "distinct_id":
        return sql("profile_id")
    return property_raw(path.removeprefix("properties."), b, PROFILES)


def _value_aggregates(raw: Sql) -> Sql:
    """For the values of a property (its raw JSON text): how many are numbers as JQL's
    reducers read them (JSON numbers, finite; booleans as 1/0), their sum, min and max,
    and how many are strings with a digit in them (numeric strings count too in JQL, by a
    JavaScript rule: such a group is left to the engine)."""
    v = sql(
        "multiIf({} = 'true', 1., {} = 'false', 0., match({}, '^-?[0-9]'), toFloat64OrNull({}), NULL)",
        raw,
        raw,
        raw,
        raw,
    )
    ok = sql("ifNull(isFinite({}), 0)", v)
    return sql(
        "countIf({}), sumIf(assumeNotNull({}), {}), minIf(assumeNotNull({}), {}), maxIf(assumeNotNull({}), {}),"
        " countIf(startsWith({}, '\"') AND match({}, '[0-9]'))",
        ok,
        v,
        ok,
        v,
        ok,
        v,
        ok,
        raw,
        raw,
    )


def pushed_query(src: EventsSource | PeopleSource, project_id: int, tz: str, pushed: Pushed) -> Query:
    """The pushed-down step in one statement: rows of the keys' texts (property values raw,
    '' when missing; names and ids as text), the count, and for a value reducer the
    aggregates of `_value_aggregates`."""
    b = Binds()
    if isinstance(src, EventsSource):
        scope = Scope(project_id, *day_range_utc(src.from_date, src.to_date, tz))
        names, condition = _selector_condition(src.selectors, b)
        exprs = [_key_expr(k, b) for k in pushed.keys]
        rows = final_events(scope, names, condition, b)
        value = property_raw(pushed.path.removeprefix("properties."), b) if pushed.path else None
    else:
        exprs = [_profile_key_expr(k, b) for k in pushed.keys]
        rows = _people_rows(src, project_id, b)
        value = property_raw(pushed.path.removeprefix("properties."), b, PROFILES) if pushed.path else None
    columns = [*exprs, sql("count()")]
    if value is not None:
        columns.append(_value_aggregates(value))
    if not exprs:
        return Query(sql("SELECT {} FROM {}", join(", ", columns), rows), b)
    return Query(sql("SELECT {} FROM {} GROUP BY {}", join(", ", columns), rows, join(", ", exprs)), b)


def merge_pushed(rows: list[tuple[Any, ...]], pushed: Pushed) -> str | None:
    """The step's answer as JSON (`[{key, value}]`, or `[value]` for reduce): raw property
    texts parsed, and rows whose keys are the same JavaScript values (`1.50` and `1.5`)
    merged. None when a group holds strings that may be numeric (left to the engine)."""
    n = len(pushed.keys)
    raw = [k not in ("name", "distinct_id") for k in pushed.keys]
    groups: dict[bytes, list[Any]] = {}
    for row in rows:
        key = [_json_value(v) if is_raw else v for v, is_raw in zip(row[:n], raw, strict=True)]
        text = orjson.dumps(key)
        count = int(row[n])
        if pushed.path is None:
            stats = [count, 0, 0.0, None, None]
        else:
            if int(row[n + 5]):
                return None
            numbers = int(row[n + 1])
            stats = [
                count,
                numbers,
                float(row[n + 2]),
                row[n + 3] if numbers else None,
                row[n + 4] if numbers else None,
            ]
        old = groups.get(text)
        if old is None:
            groups[text] = [key, stats]
            continue
        s = old[1]
        s[0] += stats[0]
        s[1] += stats[1]
        s[2] += stats[2]
        s[3] = stats[3] if s[3] is None else s[3] if stats[3] is None else min(s[3], stats[3])
        s[4] = stats[4] if s[4] is None else s[4] if stats[4] is None else max(s[4], stats[4])
    values = [(key, _reduced(pushed.reducer, s)) for key, s in groups.values()]
    if pushed.reduce:
        return orjson.dumps([values[0][1] if values else _reduced(pushed.reducer, [0, 0, 0.0, None, None])]).decode()
    return orjson.dumps([{"key": k, "value": v} for k, v in values]).decode()


def _reduced(reducer: str, s: list[Any]) -> Any:
    count, numbers, total, low, high = s
    if reducer == "count":
        return count
    if reducer == "sum":
        return total
    if reducer == "avg":
        return total / numbers if numbers else None
    return low if reducer == "min" else high


def _json_value(raw: str) -> Any:
    return _canonical(orjson.loads(raw)) if raw else None


def _canonical(value: Any) -> Any:
    """A JSON value as JavaScript holds it: a whole float is the same number as the int."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


# -- reading ---------------------------------------------------------------------------------------
async def read_events(
    run: Run, src: EventsSource, project_id: int, tz: str, page: int = PAGE
) -> AsyncIterator[list[tuple[Any, ...]]]:
    """The events by user (distinct_id, time), in keyset pages of at most `page` rows: the
    events side of `join` (time-ordered reading is `event_windows`)."""
    after: tuple[Any, ...] | None = None
    while True:
        rows = await run(events_page(src, project_id, tz, True, after, page))
        if rows:
            yield rows
        if len(rows) < page:
            return
        after = (rows[-1][1], rows[-1][2], rows[-1][3])


@dataclass(frozen=True)
class Window:
    """The part of an Events source one statement reads: the UTC range [start, end), and
    for a window cut along the sorting key (`key_windows`) its UTC `day` and the range of
    event names [first_event, last_event]: a prefix range of the events' sorting key
    `(project_id, toDate(time), event, …)`, so the statement reads only its own granules
    (a window of time alone inside a day reads every granule of that day)."""

    start: datetime
    end: datetime
    day: date | None = None
    first_event: str = ""
    last_event: str = ""

    def key_condition(self, b: Binds) -> Sql | None:
        if self.day is None:
            return None
        return sql(
            "toDate(time) = {} AND event >= {} AND event <= {}",
            b.add(self.day, "Date"),
            b.add(self.first_event, "String"),
            b.add(self.last_event, "String"),
        )


async def event_windows(
    run: Run,
    src: EventsSource,
    project_id: int,
    tz: str,
    keys: Sequence[str],
    ordered: bool = True,
    with_properties: bool = True,
) -> AsyncIterator[list[tuple[Any, ...]]]:
    """The events in windows holding at most `_WINDOW_ROWS` rows, one statement each
    (`events_window`; only a window planned to hold more is read in several, by offset and
    in time order), so the work stays linear in the rows read and memory is bounded by the
    window. `ordered`: in time order, windows of whole hours (`plan_windows` over
    `hour_counts`). Not `ordered`: windows along the sorting key (`key_windows` over
    `key_counts`; measured, a third cheaper than windows of time), each one's rows in any
    order."""
    start, end = day_range_utc(src.from_date, src.to_date, tz)
    windows: list[tuple[Window, int]]
    if ordered:
        hours = await run(hour_counts(src, project_id, start, end))
        windows = [
            (Window(a, b), sum(int(n) for hour, n in hours if a < _utc(hour) + timedelta(hours=1) and _utc(hour) < b))
            for a, b in plan_windows(hours, start, end, _WINDOW_ROWS, fill=True)
        ]
    else:
        windows = key_windows(await run(key_counts(src, project_id, start, end)), start, end, _WINDOW_ROWS)
    for window, planned in windows:
        offset = 0
        in_order = ordered or planned >= _WINDOW_ROWS
        while True:
            query = events_window(
                src, project_id, tz, keys, window, offset, ordered=in_order, with_properties=with_properties
            )
            rows = await run(query)
            if rows:
                yield rows
            if len(rows) < _WINDOW_ROWS:
                break
            offset += len(rows)


def hour_counts(src: EventsSource, project_id: int, start: datetime, end: datetime) -> Query:
    """Rows per UTC hour of the range (all copies, before selectors: an upper bound), from
    the key columns alone: what `plan_windows` cuts the range by."""
    b = Binds()
    names, _ = _selector_condition(src.selectors, b)
    rows = raw_events(Scope(project_id, start, end), names, b)
    return Query(sql("SELECT toStartOfHour(time) AS hour, count() FROM {} GROUP BY hour ORDER BY hour", rows), b)


def key_counts(src: EventsSource, project_id: int, start: datetime, end: datetime) -> Query:
    """Rows per UTC day and event name of the range (all copies, before selectors: an upper
    bound), in sorting-key order: what `key_windows` cuts the range by."""
    b = Binds()
    names, _ = _selector_condition(src.selectors, b)
    rows = raw_events(Scope(project_id, start, end), names, b)
    text = sql("SELECT toDate(time) AS day, event, count() FROM {} GROUP BY day, event ORDER BY day, event", rows)
    return Query(text, b)


def key_windows(
    cells: Sequence[tuple[Any, ...]], start: datetime, end: datetime, rows: int
) -> list[tuple[Window, int]]:
    """[start, end) cut along the sorting key: per UTC day, runs of consecutive event names
    holding at most `rows` rows each (a name holding more is a window of its own, read in
    pages), each with its planned row count."""
    windows: list[tuple[Window, int]] = []
    current: list[Any] | None = None  # [day, first event, last event, rows]

    def close() -> None:
        if current is not None:
            day, first, last, n = current
            midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
            bounds = max(start, midnight), min(end, midnight + timedelta(days=1))
            windows.append((Window(*bounds, day=day, first_event=first, last_event=last), n))

    for day, event, count in cells:
        n = int(count)
        if current is not None and current[0] == day and current[3] + n <= rows:
            current[2], current[3] = event, current[3] + n
            continue
        close()
        current = [day, event, event, n]
    close()
    return windows


def plan_windows(
    hours: Sequence[tuple[Any, ...]], start: datetime, end: datetime, rows: int, fill: bool = False
) -> list[tuple[datetime, datetime]]:
    """[start, end) cut into windows of whole hours holding about `rows` rows each (an hour
    holding more is one window, read in pages); hours without rows join their neighbours.
    `fill`: at most `rows` rows each (a window closes before the hour that would overflow it)."""
    windows: list[tuple[datetime, datetime]] = []
    window_start, total = start, 0
    for hour, count in hours:
        hour_start = max(_utc(hour), start)
        hour_end = _utc(hour) + timedelta(hours=1)
        if fill and total and total + int(count) > rows and window_start < hour_start:
            windows.append((window_start, hour_start))
            window_start, total = hour_start, 0
        total += int(count)
        if total >= rows and hour_end < end:
            windows.append((window_start, hour_end))
            window_start, total = hour_end, 0
    if window_start < end:
        windows.append((window_start, end))
    return windows


def _utc(value: datetime) -> datetime:
    """clickhouse-connect returns DateTime64('UTC') values as naive UTC datetimes."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


async def read_people(
    run: Run, src: PeopleSource, project_id: int, tz: str, page: int = PAGE
) -> AsyncIterator[list[tuple[Any, ...]]]:
    after: str | None = None
    while True:
        rows = await run(people_page(src, project_id, tz, after, page))
        if rows:
            yield rows
        if len(rows) < page:
            return
        after = rows[-1][1]
