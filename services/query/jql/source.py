"""The sources of a JQL script, read from the warehouse in bounded pages.

`parse_source` turns the runtime's description of `Events(...)`, `People(...)` or
`join(...)` into a frozen `Source`, with every selector parsed and checked by the
expression language (a bad one is a 400 naming it). The SQL is built here, pure, and
read through the scoped sources only (`final_events`, `source(PROFILES, Scope(...))`):
dates, event names and selectors are pushed down, so only the rows the script can see
are read, each already as the JSON text of its JQL item (built by ClickHouse).

* Events: `events FINAL` of the local days `from_date`..`to_date` (project zone); keyset
  pages in (time, dedup hash) order, or (distinct_id, time, dedup hash) when the first
  grouping step is `groupByUser` (each user's events in time order). Item:
  `{name, distinct_id, time, sampling_factor, properties}`; `time` is the event's epoch
  milliseconds shifted by the project zone's offset at that instant (semantics §5.3: "ms
  since epoch, project timezone"), so `new Date(time).getUTC*()` reads local wall time.
* People: user profiles (`profiles FINAL`, group key '', not deleted), keyset pages by
  id. Item: `{distinct_id, time, last_seen, properties}` with `time` = `last_seen` = the
  last update, shifted likewise [gap: the store keeps one update time].
* join: both read in distinct_id order and merged (`join_rows`), one pass, bounded memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

import orjson

from footfall.services.query.reports._common import Binds, Query, final_events, raw_events
from footfall.shared.errors import ParamError
from footfall.shared.expr import ExprError, check_expr, compile_where, parse_expr
from footfall.shared.expr.typed import TNode
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.sql import Scope, Sql, join, source, sql
from footfall.shared.timerange import day_range_utc

__all__ = [
    "PAGE",
    "EventsSource",
    "JoinSource",
    "PeopleSource",
    "Run",
    "Selector",
    "Source",
    "events_page",
    "grouped_count",
    "hour_counts",
    "merge_groups",
    "parse_source",
    "people_page",
    "plan_windows",
    "read_events",
    "read_people",
]

PAGE = 20_000
_WINDOW_ROWS = 100_000  # rows one statement reads at most (the chunks fed to the script are of PAGE rows)
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


def _expr(text: Any, what: str, context: Literal["events", "profiles"]) -> TNode | None:
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


def _event_selectors(items: Any, what: str) -> tuple[Selector, ...]:
    out = []
    for i, item in enumerate(items or []):
        name = item.get("event")
        out.append(
            Selector(name if isinstance(name, str) else None, _expr(item.get("selector"), f"{what}[{i}]", "events"))
        )
    return tuple(out)


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
        _event_selectors(join_selectors, "join selectors"),
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
def _selector_condition(selectors: Sequence[Selector], b: Binds) -> tuple[list[str] | None, Sql | None]:
    """The OR of the selectors (event name AND expression) and, when every one names an
    event, the names (for the key conditions). No selector, or one matching everything: None."""
    if not selectors:
        return None, None
    terms, names = [], []
    for s in selectors:
        parts = []
        if s.event is not None:
            parts.append(sql("event = {}", b.add(s.event, "String")))
            names.append(s.event)
        if s.expr is not None:
            parts.append(compile_where(s.expr, b))
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
    UTC `window` of the range, when given): rows `(item_json, distinct_id, time, hash)`."""
    b = Binds()
    scope = Scope(project_id, *(window or day_range_utc(src.from_date, src.to_date, tz)))
    names, condition = _selector_condition(src.selectors, b)
    extra_names, extra = _selector_condition(src.join_selectors, b)
    if extra is not None:
        condition = extra if condition is None else sql("({}) AND ({})", condition, extra)
        if extra_names is not None:
            names = extra_names if names is None else sorted(set(names) & set(extra_names))
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


def people_page(src: PeopleSource, project_id: int, tz: str, after: str | None, page: int = PAGE) -> Query:
    """One page of user profiles' JQL items after the id `after`: rows `(item_json, id)`."""
    b = Binds()
    keys = sql("group_key = ''")
    if after is not None:
        keys = sql("{} AND profile_id > {}", keys, b.add(after, "String"))
    conditions = [compile_where(e, b, properties_of=PROFILES) for e in src.selectors if e is not None]
    where = sql("deleted = 0")
    if conditions and len(conditions) == len(src.selectors):
        where = sql("deleted = 0 AND ({})", join(" OR ", [sql("({})", c) for c in conditions]))
    rows = source(PROFILES, Scope(project_id), b, final=True, keys=keys, where=where)
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
    return sql("JSONExtractRaw(properties, {})", b.add(path.removeprefix("properties."), "String"))


def grouped_count(src: EventsSource, project_id: int, tz: str, keys: Sequence[str]) -> Query:
    """`groupBy(keys, count())` of the events in one statement: rows of the keys' JSON texts
    (property values raw, '' when missing; names and ids as text) and the count."""
    b = Binds()
    scope = Scope(project_id, *day_range_utc(src.from_date, src.to_date, tz))
    names, condition = _selector_condition(src.selectors, b)
    exprs = join(", ", [_key_expr(k, b) for k in keys])
    rows = final_events(scope, names, condition, b)
    return Query(sql("SELECT {}, count() FROM {} GROUP BY {}", exprs, rows, exprs), b)


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


def merge_groups(rows: list[tuple[Any, ...]], keys: Sequence[str]) -> str:
    """The `[{key, value}]` JSON of `grouped_count`'s rows: raw property texts parsed, and rows
    whose keys are the same JavaScript values (`1.50` and `1.5`) summed."""
    raw = [k not in ("name", "distinct_id") for k in keys]
    groups: dict[bytes, list[Any]] = {}
    for row in rows:
        key = [_json_value(v) if is_raw else v for v, is_raw in zip(row[:-1], raw, strict=True)]
        text = orjson.dumps(key)
        if text in groups:
            groups[text][1] += int(row[-1])
        else:
            groups[text] = [key, int(row[-1])]
    return orjson.dumps([{"key": k, "value": n} for k, n in groups.values()]).decode()


# -- reading ---------------------------------------------------------------------------------------
async def read_events(
    run: Run, src: EventsSource, project_id: int, tz: str, by_user: bool, page: int = PAGE
) -> AsyncIterator[list[tuple[Any, ...]]]:
    """The events in pages of at most `page` rows: by user (distinct_id, time; keyset pages),
    or in time order through windows of whole hours holding about `_WINDOW_ROWS` rows
    (`plan_windows` over `hour_counts`), one statement per window (a fuller one continues
    from its last row): each statement reads only its window, so the work stays linear in
    the rows read (measured: keyset pages over a day cost 470 ms each, a FINAL merge of the
    day per page)."""
    if by_user:
        after: tuple[Any, ...] | None = None
        while True:
            rows = await run(events_page(src, project_id, tz, True, after, page))
            if rows:
                yield rows
            if len(rows) < page:
                return
            after = (rows[-1][1], rows[-1][2], rows[-1][3])
    start, end = day_range_utc(src.from_date, src.to_date, tz)
    hours = await run(hour_counts(src, project_id, start, end))
    for window_start, window_end in plan_windows(hours, start, end, _WINDOW_ROWS):
        after = None
        while True:
            scope_start = _utc(after[1]) if after is not None else window_start
            rows = await run(events_page(src, project_id, tz, False, after, _WINDOW_ROWS, (scope_start, window_end)))
            for i in range(0, len(rows), page):
                yield rows[i : i + page]
            if len(rows) < _WINDOW_ROWS:
                break
            after = (rows[-1][1], rows[-1][2], rows[-1][3])


def hour_counts(src: EventsSource, project_id: int, start: datetime, end: datetime) -> Query:
    """Rows per UTC hour of the range (all copies, before selectors: an upper bound), from
    the key columns alone: what `plan_windows` cuts the range by."""
    b = Binds()
    names, _ = _selector_condition(src.selectors, b)
    rows = raw_events(Scope(project_id, start, end), names, b)
    return Query(sql("SELECT toStartOfHour(time) AS hour, count() FROM {} GROUP BY hour ORDER BY hour", rows), b)


def plan_windows(
    hours: Sequence[tuple[Any, ...]], start: datetime, end: datetime, rows: int
) -> list[tuple[datetime, datetime]]:
    """[start, end) cut into windows of whole hours holding about `rows` rows each (an hour
    holding more is one window, read in pages); hours without rows join their neighbours."""
    windows: list[tuple[datetime, datetime]] = []
    window_start, total = start, 0
    for hour, count in hours:
        hour_end = _utc(hour) + timedelta(hours=1)
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
