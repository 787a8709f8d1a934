"""Plumbing shared by the breakdown reports (segmentation, events, properties).

* Reading the shared parameters (`type`, `unit`, `interval`, `limit`, `format`, `where`,
  `on`) with their defaults and ranges; every error names its parameter.
* `Timeline`: the local days `from_date`..`to_date` (inclusive) of the project's time
  zone, or the last `interval` units back from now, cut into keyed buckets. Bucket keys
  (decisions.md): `yyyy-mm-dd` for day, the Monday for week, the first of the month for
  month, `yyyy-mm-dd HH:00:00` / `yyyy-mm-dd HH:MM:00` (local wall clock) for hour and
  minute. A wall-clock hour that repeats at a DST fall-back is one bucket; a skipped one
  has no key. `series` lists every key that has an instant in the range, ascending.
* `bucket_key()`: the same key computed by ClickHouse from a timestamp, as a String. The
  key is taken from the local wall-clock text (`toString(toDateTime(t, tz))`), never from
  `toStartOfHour`, whose instants are wrong in 30-minute DST zones (Australia/Lord_Howe).
* `Scope`: project and UTC time range; every scan is built from one, so no query can
  leave out either (STYLE principle 6).
* `Query`: finished SQL and its bound values; `run()` sends it through the warehouse.
* Count sources, all exact under unmerged duplicates: `counts_final` (rows of `events
  FINAL`), `counts_mv` (the m0003 quarter-hour distinct sets plus raw partial quarters),
  `counts_raw` (distinct dedup hashes), `counts` choosing among them by measured cost;
  `counts_where` and `segmented` for reports that read properties (`final_events`:
  FINAL with the key conditions in PREWHERE).
* Zero-filled values, CSV output, and the clock (`utc_now`, replaced by tests).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from starlette.responses import Response

from services.query.endpoints import QueryContext
from services.query.errors import ParamError
from services.query.expr import ExprError, OnSql, check_expr, parse_expr
from services.query.expr.typed import TNode
from services.query.params import Params, check_range
from services.query.sql import Params as Binds
from services.query.sql import Sql, render, sql
from services.query.timerange import local_midnight_utc

__all__ = [
    "MAX_BUCKETS",
    "MAX_LIMIT",
    "TYPES",
    "UNITS",
    "Binds",
    "Query",
    "Scope",
    "Timeline",
    "bucket_key",
    "cell_measures",
    "counts",
    "counts_final",
    "counts_mv",
    "counts_raw",
    "counts_where",
    "csv_response",
    "event_filter",
    "final_events",
    "measure",
    "mv_covers",
    "read_expr",
    "read_format",
    "read_limit",
    "read_timeline",
    "read_type",
    "read_unit",
    "segment_expr",
    "segmented",
    "segmented_values",
    "series_csv",
    "series_values",
    "timeline_back_from_now",
    "timeline_for_dates",
    "utc_now",
    "zero_filled",
]

TYPES = ("general", "unique", "average")
UNITS = ("minute", "hour", "day", "week", "month")
MAX_LIMIT = 10_000
MAX_BUCKETS = 50_000
_QUARTER = timedelta(minutes=15)


def utc_now() -> datetime:
    """The service's clock. Reports read it once per request; tests replace it."""
    return datetime.now(UTC)


# -- parameters ------------------------------------------------------------------------------------
def read_type(p: Params, default: str = "general") -> str:
    value = p.choice("type", TYPES, default)
    assert value is not None
    return value


def read_unit(p: Params, allowed: Sequence[str] = UNITS, default: str = "day") -> str:
    value = p.choice("unit", allowed, default)
    assert value is not None
    return value


def read_limit(p: Params, default: int) -> int:
    value = p.integer("limit", default, minimum=1, maximum=MAX_LIMIT)
    assert value is not None
    return value


def read_format(p: Params) -> str:
    value = p.choice("format", ("json", "csv"), "json")
    assert value is not None
    return value


def read_expr(p: Params, name: str, *, required: bool = False) -> TNode | None:
    """Parse and check the expression in parameter `name`; a bad one is a 400 naming it,
    with the position and what was expected (from the parser)."""
    text = p.required(name) if required else p.get(name)
    if text is None:
        return None
    try:
        return check_expr(parse_expr(text))
    except ExprError as exc:
        raise ParamError(f"Error in {name}: {exc.message}") from None


# -- timelines -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timeline:
    """Half-open UTC range [start, end) cut into local buckets of `unit`, or into
    `interval_days`-day buckets anchored at `anchor` (keyed by their first day)."""

    tz: str
    start: datetime
    end: datetime
    unit: str
    series: tuple[str, ...]
    interval_days: int | None = None
    anchor: date | None = None


def _sub_day_series(start: datetime, end: datetime, tz: ZoneInfo, unit: str) -> tuple[str, ...]:
    """Every local hour/minute key with an instant in [start, end). Offsets and DST
    transitions are whole quarter hours, so the offset is constant inside a UTC quarter
    hour: one zone conversion per quarter, the minutes inside it by arithmetic."""
    keys: set[str] = set()
    q = start - timedelta(minutes=start.minute % 15, seconds=start.second, microseconds=start.microsecond)
    while q < end:
        local = q.astimezone(tz)
        if unit == "hour":
            keys.add(local.strftime("%Y-%m-%d %H:00:00"))
        else:
            first = max(q, start)
            last = min(q + _QUARTER, end)
            offset = local.utcoffset() or timedelta(0)
            m = first.replace(second=0, microsecond=0)
            while m < last:
                keys.add((m + offset).strftime("%Y-%m-%d %H:%M:00"))
                m += timedelta(minutes=1)
        q += _QUARTER
        if len(keys) > MAX_BUCKETS:
            raise ParamError(f"Error in unit: the range holds more than {MAX_BUCKETS} {unit} buckets")
    return tuple(sorted(keys))


def _calendar_key(day: date, unit: str) -> str:
    if unit == "week":
        day -= timedelta(days=day.weekday())
    elif unit == "month":
        day = day.replace(day=1)
    return day.isoformat()


def _series(start: datetime, end: datetime, first: date, last: date, tz: ZoneInfo, unit: str) -> tuple[str, ...]:
    if unit in ("minute", "hour"):
        return _sub_day_series(start, end, tz, unit)
    if (last - first).days > MAX_BUCKETS:
        raise ParamError(f"Error in to_date: the range holds more than {MAX_BUCKETS} days")
    return tuple(sorted({_calendar_key(first + timedelta(days=i), unit) for i in range((last - first).days + 1)}))


def timeline_for_dates(first: date, last: date, tz: str, unit: str = "day",
                       interval_days: int | None = None) -> Timeline:
    check_range(first, last)
    zone = ZoneInfo(tz)
    start, end = local_midnight_utc(first, tz), local_midnight_utc(last + timedelta(days=1), tz)
    if interval_days:
        span = (last - first).days + 1
        series = tuple((first + timedelta(days=i)).isoformat() for i in range(0, span, interval_days))
        return Timeline(tz, start, end, "day", series, interval_days, first)
    return Timeline(tz, start, end, unit, _series(start, end, first, last, zone, unit))


def _add_months(day: date, n: int) -> date:
    months = day.year * 12 + day.month - 1 + n
    return date(months // 12, months % 12 + 1, 1)


def timeline_back_from_now(now: datetime, tz: str, unit: str, n: int) -> Timeline:
    """`interval` on /events*: the `unit` bucket holding `now` and the n-1 before it.
    Calendar units step back in local calendar units; hour/minute in absolute ones."""
    zone = ZoneInfo(tz)
    if unit in ("minute", "hour"):
        size = timedelta(minutes=1) if unit == "minute" else timedelta(hours=1)
        local = now.astimezone(zone)
        floored = local.replace(second=0, microsecond=0)
        if unit == "hour":
            floored = floored.replace(minute=0)
        end = floored.astimezone(UTC) + size
        start = end - n * size
        return Timeline(tz, start, end, unit, _sub_day_series(start, end, zone, unit))
    today = now.astimezone(zone).date()
    if unit == "day":
        first, last = today - timedelta(days=n - 1), today
    elif unit == "week":
        monday = today - timedelta(days=today.weekday())
        first, last = monday - timedelta(weeks=n - 1), monday + timedelta(days=6)
    else:
        month = today.replace(day=1)
        first, last = _add_months(month, -(n - 1)), _add_months(month, 1) - timedelta(days=1)
    return timeline_for_dates(first, last, tz, unit)


def read_timeline(p: Params, tz: str, now: datetime, *, unit: str, allow_interval_days: bool = False,
                  max_interval: int = 36_500) -> Timeline:
    """`from_date`+`to_date` (inclusive local days) when given, cut by `unit`, or by
    `interval`-day buckets when `allow_interval_days`; else the last `interval` units."""
    interval = p.integer("interval", None, minimum=1, maximum=max_interval)
    if p.get("from_date") is not None or p.get("to_date") is not None or interval is None:
        first, last = p.date("from_date"), p.date("to_date")
        assert first is not None and last is not None
        return timeline_for_dates(first, last, tz, unit, interval if allow_interval_days else None)
    return timeline_back_from_now(now, tz, unit, interval)


# -- SQL pieces ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    """What every scan is restricted to: one project, one UTC half-open time range."""

    project_id: int
    start: datetime
    end: datetime

    @classmethod
    def of(cls, project_id: int, timeline: Timeline) -> Scope:
        return cls(project_id, timeline.start, timeline.end)

    def condition(self, binds: Binds, time: Sql) -> Sql:
        return sql(
            "project_id = {} AND {} >= {} AND {} < {}",
            binds.add(self.project_id, "UInt64"),
            time,
            binds.add(self.start, "DateTime64(3, 'UTC')"),
            time,
            binds.add(self.end, "DateTime64(3, 'UTC')"),
        )


@dataclass(frozen=True)
class Query:
    """Finished SQL plus its bound values."""

    sql: Sql
    binds: Binds

    @property
    def text(self) -> str:
        return render(self.sql)

    async def run(self, ctx: QueryContext) -> list[tuple[Any, ...]]:
        return await ctx.warehouse.run(ctx.warehouse.query, self.text, self.binds.values)


def bucket_key(ts: Sql, timeline: Timeline, binds: Binds) -> Sql:
    """The bucket key (String) of timestamp expression `ts`, as `Timeline` keys them."""
    tz = binds.add(timeline.tz, "String")
    if timeline.interval_days:
        assert timeline.anchor is not None
        anchor = binds.add(timeline.anchor, "Date")
        width = binds.add(timeline.interval_days, "UInt32")
        return sql(
            "toString(addDays({}, intDiv(dateDiff('day', {}, toDate({}, {})), {}) * {}))",
            anchor, anchor, ts, tz, width, width,
        )
    match timeline.unit:
        case "minute":
            return sql("concat(substring(toString(toDateTime({}, {})), 1, 16), ':00')", ts, tz)
        case "hour":
            return sql("concat(substring(toString(toDateTime({}, {})), 1, 13), ':00:00')", ts, tz)
        case "day":
            return sql("toString(toDate({}, {}))", ts, tz)
        case "week":
            return sql("toString(toMonday(toDate({}, {})))", ts, tz)
        case "month":
            return sql("toString(toStartOfMonth(toDate({}, {})))", ts, tz)
    raise AssertionError(f"unknown unit {timeline.unit!r}")  # pragma: no cover


# -- values ----------------------------------------------------------------------------------------
def measure(kind: str, events: int, users: int) -> int | float:
    """general: events; unique: distinct non-empty distinct_ids; average: events per user."""
    if kind == "general":
        return int(events)
    if kind == "unique":
        return int(users)
    return events / users if users else 0.0


def zero_filled(series: Sequence[str], cells: Mapping[str, int | float], zero: int | float) -> dict[str, int | float]:
    return {key: cells.get(key, zero) for key in series}


def csv_response(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Response:
    """`format=csv`: a header row, then one row per (segment, date) (semantics §11)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8")


def series_csv(data: Mapping[str, Any]) -> Response:
    """CSV of a `{"data": {"series": [...], "values": {segment: {date: n}}}}` body."""
    values: Mapping[str, Mapping[str, Any]] = data["data"]["values"]
    series: Sequence[str] = data["data"]["series"]
    return csv_response(
        ("segment", "date", "value"),
        ((segment, key, cells.get(key, 0)) for segment, cells in values.items() for key in series),
    )


# -- count sources ---------------------------------------------------------------------------------
# Rows of every source: (name, bucket, n, u) = event name, bucket key ('' without a
# timeline), distinct events, distinct non-empty distinct_ids.
_TIME = sql("time")


def event_filter(names: Sequence[str] | None, binds: Binds) -> Sql:
    """`event` restricted to `names` (None: every event)."""
    if names is None:
        return sql("1")
    if not names:
        return sql("0")
    if len(names) == 1:
        return sql("event = {}", binds.add(names[0], "String"))
    return sql("event IN {}", binds.add(list(names), "Array(String)"))


def _bucket_or_blank(ts: Sql, timeline: Timeline | None, binds: Binds) -> Sql:
    return bucket_key(ts, timeline, binds) if timeline is not None else sql("''")


def counts_raw(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Counts from the events table. Distinct dedup hashes, so an unmerged duplicate
    counts once; no property is read, so which copy wins does not matter."""
    return sql(
        "SELECT event AS name, {} AS bucket, uniqExact(dedup_hash) AS n, "
        "uniqExactIf(distinct_id, distinct_id != '') AS u "
        "FROM events WHERE {} AND {} GROUP BY name, bucket",
        _bucket_or_blank(_TIME, timeline, binds),
        scope.condition(binds, _TIME),
        event_filter(names, binds),
    )


def _ceil_quarter(t: datetime) -> datetime:
    floor = _floor_quarter(t)
    return floor if floor == t else floor + _QUARTER


def _floor_quarter(t: datetime) -> datetime:
    return t.replace(minute=t.minute - t.minute % 15, second=0, microsecond=0)


def mv_covers(scope: Scope, timeline: Timeline | None) -> bool:
    """Whether `event_counts_15m` can answer: buckets no finer than an hour, at least one
    whole quarter hour in the range, and every UTC offset of the zone in the range a
    multiple of 15 minutes (true of all zones since 1971; checked, not assumed)."""
    if timeline is not None and timeline.unit == "minute" and not timeline.interval_days:
        return False
    if _ceil_quarter(scope.start) >= _floor_quarter(scope.end):
        return False
    if timeline is None:
        return True
    zone = ZoneInfo(timeline.tz)
    t, step = scope.start, max(timedelta(hours=6), (scope.end - scope.start) / 2000)
    while t <= scope.end:
        offset = t.astimezone(zone).utcoffset() or timedelta(0)
        if offset % _QUARTER:
            return False
        t += step
    return True


def counts_mv(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Counts from the materialised quarter-hour aggregates (m0003), plus the events of
    the partial quarter hours at either end of the range (a range ending at `now`),
    merged as the same distinct-set states. Call only when `mv_covers(...)`."""
    inner = Scope(scope.project_id, _ceil_quarter(scope.start), _floor_quarter(scope.end))
    head = Scope(scope.project_id, scope.start, inner.start)
    tail = Scope(scope.project_id, inner.end, scope.end)
    quarter = sql("quarter")
    return sql(
        "SELECT name, {} AS bucket, uniqExactMerge(e) AS n, uniqExactMerge(us) AS u FROM ("
        "SELECT event AS name, quarter, events AS e, users AS us FROM event_counts_15m WHERE {} AND {} "
        "UNION ALL "
        "SELECT event AS name, toDateTime(toStartOfFifteenMinutes(time), 'UTC') AS quarter, "
        "uniqExactState(dedup_hash) AS e, uniqExactStateIf(distinct_id, distinct_id != '') AS us "
        "FROM events WHERE (({}) OR ({})) AND {} GROUP BY name, quarter"
        ") GROUP BY name, bucket",
        _bucket_or_blank(quarter, timeline, binds),
        inner.condition(binds, quarter),
        event_filter(names, binds),
        head.condition(binds, _TIME),
        tail.condition(binds, _TIME),
        event_filter(names, binds),
    )


def counts_final(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Event counts only (`u` is 0): `count()` over `events FINAL`. Exact — FINAL collapses
    unmerged duplicates — and, on merged data, as fast as a plain `count()`: FINAL only
    merges where parts overlap in key ranges (recent days during ingestion)."""
    return sql(
        "SELECT event AS name, {} AS bucket, count() AS n, toUInt64(0) AS u FROM {} GROUP BY name, bucket",
        _bucket_or_blank(_TIME, timeline, binds),
        final_events(scope, names, None, binds),
    )


def counts(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds, *,
           kind: str | None = None) -> Sql:
    """Rows (name, bucket, n, u) by the fastest exact route (bench/results/query_segmentation.json):

    * `kind="general"`: `counts_final` (distinct-hash states cost more to merge than
      counting the deduplicated rows; `u` is not computed);
    * otherwise the materialised aggregates when they cover the request (merging the
      users' sets beats `uniqExact(distinct_id)` over the rows by 2-3x), else the
      events table."""
    if kind == "general":
        return counts_final(scope, names, timeline, binds)
    if mv_covers(scope, timeline):
        return counts_mv(scope, names, timeline, binds)
    return counts_raw(scope, names, timeline, binds)


def final_events(scope: Scope, names: Sequence[str] | None, where: Sql | None, binds: Binds) -> Sql:
    """`events FINAL`, scoped: the table with duplicates collapsed (the latest ingested copy
    wins), for reports that read properties.

    The scope and event conditions go into an explicit PREWHERE: they test sorting-key
    columns only, which every copy of a duplicate shares, so filtering before the FINAL
    merge is exact — and it lets ClickHouse skip reading `properties` for other rows,
    which it does not do on its own under FINAL (`optimize_move_to_prewhere_if_final`
    is off, rightly: a property condition must see only the latest copy, so `where`
    stays in WHERE, after the merge)."""
    return sql(
        "events FINAL PREWHERE {} AND {} WHERE {}",
        scope.condition(binds, _TIME),
        event_filter(names, binds),
        where if where is not None else sql("1"),
    )


# Per-cell measures by `type`: reading and hashing distinct_id only where the answer needs it.
_CELL_MEASURES = {
    "general": sql("count() AS n, toUInt64(0) AS u"),
    "average": sql("count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u"),
    None: sql("count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u"),
}


def cell_measures(kind: str | None) -> Sql:
    """`n, u` of one cell for `type` `kind` (`u` is 0 for general; None: both)."""
    return _CELL_MEASURES.get(kind, _CELL_MEASURES[None])


def counts_where(scope: Scope, names: Sequence[str] | None, timeline: Timeline, where: Sql,
                 binds: Binds, *, kind: str | None = None) -> Sql:
    """Counts of the events passing `where`. `FINAL` collapses duplicates first, so the
    latest copy's properties decide (semantics §2: the most recently ingested wins).
    With `kind="general"` the users (`u`) are not computed (0)."""
    return sql(
        "SELECT event AS name, {} AS bucket, {} FROM {} GROUP BY name, bucket",
        bucket_key(_TIME, timeline, binds),
        cell_measures(kind),
        final_events(scope, names, where, binds),
    )


def segment_expr(on: OnSql) -> Sql:
    return sql("arrayJoin({})", on.sql) if on.is_array else on.sql


def segmented(scope: Scope, names: Sequence[str] | None, timeline: Timeline, on: OnSql, where: Sql | None,
              allowed: Sequence[str] | None, rank_by_users: bool, limit: int, binds: Binds, *,
              kind: str | None = None) -> Sql:
    """Per segment of `on`: (segment, total events, total users, [(bucket, n, u)]), for the
    top `limit` segments by events (or by users over the whole range, `rank_by_users`),
    ties by segment ascending. Events whose `on` is undefined or null have no segment;
    a list puts the event once into each of its distinct elements' segments.

    `kind` general or average skips what that type does not use (users, or the users'
    totals over the range; reported as 0)."""
    keep = sql("isNotNull(seg)")
    if allowed is not None:
        keep = sql("isNotNull(seg) AND has({}, assumeNotNull(seg))", binds.add(list(allowed), "Array(String)"))
    if kind in ("general", "average") and not rank_by_users:
        return sql(
            "SELECT assumeNotNull(seg) AS segment, sum(n) AS tn, toUInt64(0) AS tu, groupArray((bucket, n, u)) "
            "FROM (SELECT seg, bucket, {} FROM (SELECT {} AS seg, {} AS bucket{} FROM {}) "
            "WHERE {} GROUP BY seg, bucket) "
            "GROUP BY seg ORDER BY tn DESC, seg ASC LIMIT {}",
            _CELL_MEASURES[kind],
            segment_expr(on),
            bucket_key(_TIME, timeline, binds),
            sql(", distinct_id") if kind == "average" else sql(""),
            final_events(scope, names, where, binds),
            keep,
            binds.add(limit, "UInt32"),
        )
    order = sql("tu DESC, seg ASC") if rank_by_users else sql("tn DESC, seg ASC")
    return sql(
        "SELECT assumeNotNull(seg) AS segment, sum(n) AS tn, uniqExactMerge(us) AS tu, groupArray((bucket, n, u)) "
        "FROM (SELECT seg, bucket, count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u, "
        "uniqExactStateIf(distinct_id, distinct_id != '') AS us "
        "FROM (SELECT {} AS seg, {} AS bucket, distinct_id FROM {}) "
        "WHERE {} GROUP BY seg, bucket) "
        "GROUP BY seg ORDER BY {} LIMIT {}",
        segment_expr(on),
        bucket_key(_TIME, timeline, binds),
        final_events(scope, names, where, binds),
        keep,
        order,
        binds.add(limit, "UInt32"),
    )


def series_values(rows: Iterable[Sequence[Any]], kind: str, series: Sequence[str],
                  names: Sequence[str]) -> dict[str, dict[str, int | float]]:
    """`values` of a breakdown keyed by event name, zero-filled, from (name, bucket, n, u) rows."""
    cells: dict[str, dict[str, int | float]] = {name: {} for name in names}
    for name, bucket, n, u in rows:
        if name in cells:
            cells[name][bucket] = measure(kind, n, u)
    zero: int | float = 0.0 if kind == "average" else 0
    return {name: zero_filled(series, cells[name], zero) for name in names}


def segmented_values(rows: Iterable[Sequence[Any]], kind: str,
                     series: Sequence[str]) -> dict[str, dict[str, int | float]]:
    """`values` from `segmented()` rows, in rank order, zero-filled."""
    zero: int | float = 0.0 if kind == "average" else 0
    out: dict[str, dict[str, int | float]] = {}
    for segment, _, _, cells in rows:
        out[segment] = zero_filled(series, {bucket: measure(kind, n, u) for bucket, n, u in cells}, zero)
    return out
