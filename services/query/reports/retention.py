"""`/retention` (semantics §1.4, §2.2; decisions.md).

* Cohorts are the calendar `unit` buckets (day; Monday week; first of the month) of the
  local range [from_date, to_date]; every one is present, zero-filled.
* `birth`: a user's anchor is their first-ever `born_event` passing `born_where` (history
  before `from_date` included; ties in time by `$insert_id`); only anchors inside the
  range form cohorts. `where` does not apply to births.
* `compounded`: `born_event` is ignored; a user joins the cohort of every bucket in which
  they did `event` (any event when absent) passing `where`, anchored at their first such
  event of the bucket (decisions.md; ties by event name, then `$insert_id`).
* Returns: events matching `event` and `where` at or after the anchor, other than the
  anchor itself (another event at the same instant counts). A return at t falls in
  bucket i when anchor + i·L <= t < anchor + (i+1)·L with L = `interval` x `unit`: 24 h
  and 168 h for day and week, calendar months in the project's zone for month (the day
  clamped: Jan 31 + 1 month = Feb 29). `counts[i]` = users with a return in bucket i, for
  i = 0..interval_count (`interval_count + 1` values). Returns after `to_date` count.
* `unbounded_retention`: counts[i] = users with a return in any bucket j >= i (j within
  the reported ones).
* `on` segments the returns: a segment's counts[i] = users with a return in bucket i
  whose `on` keys include it; its `first` is the whole cohort. Segments ranked by the
  distinct users with a counted return carrying the key, ties by key, top `limit`
  (default 255). Shape `{date: {"$overall": {...}, "<key>": {...}}}` [gap, §11].

Duplicates count once: users are counted distinct and the anchor's copies share its
identity; FINAL is used wherever a property (`where`, `born_where`, `on`) is read, so the
latest copy decides.

Query: anchors (one per user for birth; per user and bucket for compounded) RIGHT JOIN
the returns of the same users at or after the anchor, so that anchors without returns
still count in `first`; one aggregation gives, per (cohort, segment, bucket), the users,
with bucket -1 meaning "in the cohort".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.params import Params
from footfall.services.query.reports._common import (
    Binds,
    Query,
    Timeline,
    read_dates,
    read_expr,
    read_limit,
    timeline_for_dates,
)
from footfall.services.query.reports._common.buckets import bucket_date_of_ms
from footfall.services.query.reports._common.scan import (
    HAS_USER,
    USER,
    Scope,
    final_events,
    one_event,
    raw_events,
    where_condition,
)
from footfall.services.query.reports._common.segments import on_keys, ranked_cells, segment_weight, top_segments
from footfall.shared.errors import ParamError
from footfall.shared.events.validate import TIME_FLOOR_MS
from footfall.shared.expr import compile_on
from footfall.shared.expr.typed import TNode
from footfall.shared.sql import Sql, sql

__all__ = ["RetentionRequest", "build", "parse_request", "retention", "shape"]

UNITS = ("day", "week", "month")
# Births look at the whole history: no stored event is older than the validator's floor.
HISTORY_START = datetime.fromtimestamp(TIME_FLOOR_MS / 1000, UTC)
UNIT_MS = {"day": 86_400_000, "week": 7 * 86_400_000}
MAX_INTERVAL_COUNT = 3650
DEFAULT_LIMIT = 255


@dataclass(frozen=True)
class RetentionRequest:
    project_id: int
    timeline: Timeline  # cohort buckets (calendar `unit`)
    retention_type: str  # "birth" | "compounded"
    born_event: str | None
    event: str | None
    born_where: TNode | None
    where: TNode | None
    interval: int
    interval_count: int
    unbounded: bool
    on: TNode | None
    limit: int

    @property
    def unit(self) -> str:
        return self.timeline.unit

    @property
    def buckets(self) -> int:
        return self.interval_count + 1


def parse_request(p: Params, project_id: int, timezone: str) -> RetentionRequest:
    from_date, to_date = read_dates(p)
    kind = p.choice("retention_type", ("birth", "compounded"), "birth")
    unit = p.choice("unit", UNITS, "day")
    interval = p.integer("interval", 1, minimum=1, maximum=90 if unit == "day" else 1000)
    interval_count = p.integer("interval_count", 1, minimum=0, maximum=MAX_INTERVAL_COUNT)
    born_event = p.get("born_event")
    if kind == "birth" and born_event is None:
        raise ParamError("Missing required parameter: born_event (required when retention_type is birth)")
    return RetentionRequest(
        project_id=project_id,
        timeline=timeline_for_dates(from_date, to_date, timezone, unit),
        retention_type=kind,
        born_event=born_event if kind == "birth" else None,
        event=p.get("event"),
        born_where=read_expr(p, "born_where") if kind == "birth" else None,
        where=read_expr(p, "where"),
        interval=interval,
        interval_count=interval_count,
        unbounded=p.boolean("unbounded_retention"),
        on=read_expr(p, "on"),
        limit=read_limit(p, DEFAULT_LIMIT),
    )


# -- query -----------------------------------------------------------------------------------------
def _bucket(req: RetentionRequest, b: Binds, anchor: Sql, t: Sql) -> Sql:
    """The bucket index of a return at `t` after the anchor at `anchor` (both Int64 ms, t >= anchor)."""
    if req.unit in UNIT_MS:
        return sql("intDiv({} - {}, {})", t, anchor, b.add(req.interval * UNIT_MS[req.unit], "Int64"))
    # Whole calendar months m from the anchor's local month to the return's; the boundary
    # anchor + m months (day clamped) may still lie after the return: then it is m - 1.
    tz = b.add(req.timeline.tz, "String")
    at = sql("fromUnixTimestamp64Milli({}, {})", anchor, tz)
    rt = sql("fromUnixTimestamp64Milli({}, {})", t, tz)
    months = sql("((toYear({}) * 12 + toMonth({})) - (toYear({}) * 12 + toMonth({})))", rt, rt, at, at)
    return sql(
        "intDiv({} - if(addMonths({}, {}) > {}, 1, 0), {})", months, at, months, rt, b.add(req.interval, "Int64")
    )


def _scan_end(req: RetentionRequest) -> datetime:
    """Returns can lie up to `buckets` x L after an anchor before the end of the range."""
    if req.unit in UNIT_MS:
        return req.timeline.end + timedelta(milliseconds=req.buckets * req.interval * UNIT_MS[req.unit])
    return req.timeline.end + timedelta(days=31 * req.buckets * req.interval + 1)


@dataclass(frozen=True)
class _Shape:
    """The tuple of one return event in the per-user array `ev`, and how to read it.

    `id` is the dedup hash (as a number): the identity of an event, shared by its unmerged
    copies, so the anchor's copies are never returns. Compounded anchors are the first
    event of each bucket in the sorted array; without `on` the order of events at the same
    millisecond cannot change a count (the anchor and the other event both stand at that
    instant), with `on` it decides which event's keys count, so the order is the oracle's
    (time, event, insert_id)."""

    element: Sql  # the tuple, in the scan's SELECT
    id_of: tuple[Sql, Sql]  # id accessor of a return `e` and of the anchor `a`
    keys_of: Sql | None  # keys accessor of a return `e`
    sort: bool


def _shape(req: RetentionRequest, keys: Sql | None) -> _Shape:
    ident = sql("reinterpretAsUInt128(dedup_hash)")
    if keys is None:
        return _Shape(
            sql("(toUnixTimestamp64Milli(time), {})", ident),
            (sql("e.2"), sql("a.2")),
            None,
            req.retention_type == "compounded",
        )
    if req.retention_type == "birth":
        return _Shape(
            sql("(toUnixTimestamp64Milli(time), {}, {})", ident, keys), (sql("e.2"), sql("a.2")), sql("e.3"), False
        )
    return _Shape(
        sql("(toUnixTimestamp64Milli(time), event, insert_id, {}, {})", ident, keys),
        (sql("e.4"), sql("a.4")),
        sql("e.5"),
        True,
    )


def _returns(req: RetentionRequest, b: Binds) -> tuple[Sql, _Shape]:
    """Per user `ev`: the return events (see `_Shape`)."""
    where = where_condition(req.where, b)
    keys = on_keys(compile_on(req.on, b)) if req.on is not None else None
    shape_ = _shape(req, keys)
    collect = sql("arraySort(groupArray({}))", shape_.element) if shape_.sort else sql("groupArray({})", shape_.element)
    scope, names = Scope(req.project_id, req.timeline.start, _scan_end(req)), one_event(req.event)
    if where is not None or keys is not None:
        source = final_events(scope, names, where, b, keys=HAS_USER)
    else:
        source = raw_events(scope, names, b, keys=HAS_USER)
    return sql("SELECT {} AS u, {} AS ev FROM {} GROUP BY u", USER, collect, source), shape_


def _anchored(req: RetentionRequest, b: Binds) -> tuple[Sql, _Shape]:
    """One row per anchor: the user `u`, cohort, the anchor `a` (ms first, see `_Shape`) and the user's `ev`."""
    returns, shape_ = _returns(req, b)
    start_ms = b.add(int(req.timeline.start.timestamp() * 1000), "Int64")
    end_ms = b.add(int(req.timeline.end.timestamp() * 1000), "Int64")
    if req.retention_type == "compounded":
        # the anchors are the user's first return-eligible event of each cohort bucket in the range
        text = sql(
            "SELECT u, a, {} AS cohort, ev FROM ("
            "SELECT u, ev, arrayMap(e -> {}, ev) AS ck, "
            "arrayFilter((e, k, q) -> k != q AND e.1 < {}, ev, ck, "
            "arrayPopBack(arrayPushFront(ck, toDate('1970-01-01')))) AS anchors FROM ({})) ARRAY JOIN anchors AS a",
            bucket_date_of_ms(sql("a.1"), req.timeline, b),
            bucket_date_of_ms(sql("e.1"), req.timeline, b),
            end_ms,
            returns,
        )
        return text, shape_
    if req.born_event is None:
        raise AssertionError("invariant: req.born_event is not None")
    born_where = where_condition(req.born_where, b)
    history = Scope(req.project_id, HISTORY_START, req.timeline.end)
    if born_where is not None:
        born = final_events(history, [req.born_event], born_where, b, keys=HAS_USER)
    else:
        born = raw_events(history, [req.born_event], b, keys=HAS_USER)
    # First-ever born event, ties by insert_id; `a` = (ms, id) like a return's first two
    # members. The order is one string, the time big-endian then the insert_id (a prefix
    # first), because ClickHouse compares a min() over tuples value by value as generic
    # fields: the births of 100M events took 497 ms that way, 321 ms this way.
    births = sql(
        "SELECT u, (t, h) AS a FROM (SELECT {} AS u, min(toUnixTimestamp64Milli(time)) AS t, "
        "argMin(reinterpretAsUInt128(dedup_hash), "
        "concat(reverse(reinterpretAsFixedString(toUInt64(toUnixTimestamp64Milli(time)))), insert_id)) AS h "
        "FROM {} GROUP BY u) WHERE t >= {}",
        USER,
        born,
        start_ms,
    )
    text = sql(
        "SELECT u, a, {} AS cohort, ev FROM ({}) AS births LEFT JOIN ({}) AS r USING u",
        bucket_date_of_ms(sql("a.1"), req.timeline, b),
        births,
        returns,
    )
    return text, _Shape(shape_.element, (shape_.id_of[0], sql("a.2")), shape_.keys_of, shape_.sort)


def build(req: RetentionRequest) -> Query:
    """Rows (cohort Date, segment Nullable(String), bucket Int64, users, segment rank): bucket
    -1 is the cohort size; with `unbounded`, bucket i counts users whose LAST bucket is i.
    With `on`, only the top `limit` segments (rank 2, 3, …; $overall is 1).

    Per anchor `marks`: the distinct (segment, bucket) pairs of its returns (segment NULL =
    $overall), so the final counts are plain `count()`s; one anchor per user and cohort."""
    b = Binds()
    anchored, shape_ = _anchored(req, b)
    not_return = sql("e.1 < a.1 OR {} = {}", shape_.id_of[0], shape_.id_of[1])
    if shape_.keys_of is None:
        return _overall(req, b, anchored, not_return)
    marks = sql(
        "arrayFilter(m -> m.2 >= 0 AND m.2 < {}, arrayDistinct(arrayFlatten(arrayMap(e -> if({}, [], "
        "arrayMap(s -> (CAST(s, 'Nullable(String)'), {}), arrayPushFront({}, NULL))), ev))))",
        b.add(req.buckets, "Int64"),
        not_return,
        _bucket(req, b, sql("a.1"), sql("e.1")),
        shape_.keys_of,
    )
    if req.unbounded:  # per segment only the last bucket with a return (arrayDistinct drops NULL)
        last = sql(
            "arrayMap(s -> (s, arrayMax(arrayMap(m -> m.2, arrayFilter(m -> (m.1 IS NULL AND s IS NULL) OR m.1 = s, "
            "mk)))), if(empty(mk), [], arrayPushFront(arrayDistinct(arrayMap(m -> m.1, mk)), NULL)))",
        )
        marks_col = sql("{} AS mk, {} AS marks", marks, last)
    else:
        marks_col = sql("{} AS marks", marks)
    # one row per (anchor, mark); -1: the anchor is in its cohort; -2: a segment to rank by users
    cells = sql(
        "SELECT cohort, m.1 AS segment, m.2 AS bucket, u FROM ("
        "SELECT u, cohort, {} FROM ({})) "
        "ARRAY JOIN arrayConcat([(CAST(NULL, 'Nullable(String)'), toInt64(-1))], marks, arrayMap(s -> "
        "(s, toInt64(-2)), arrayDistinct(arrayFilter(s -> isNotNull(s), arrayMap(m -> m.1, marks))))) AS m",
        marks_col,
        anchored,
    )
    grouped = sql(
        "SELECT if(bucket = -2, toDate('1970-01-01'), cohort) AS ck, segment, bucket, "
        "if(bucket = -2, uniqExactIf(u, bucket = -2), count()) AS users FROM ({}) "
        "GROUP BY ck, segment, bucket",
        cells,
    )
    seg_users = segment_weight(grouped, sql("max(if(bucket = -2, users, 0))"))
    ranked = sql(
        "SELECT ck AS cohort, segment, bucket, users, seg_rank FROM ({}) "
        "WHERE bucket != -2 ORDER BY ck, segment, bucket",
        top_segments(seg_users, req.limit, b),
    )
    return Query(ranked, b)


def _overall(req: RetentionRequest, b: Binds, anchored: Sql, not_return: Sql) -> Query:
    """`build` without `on`: per anchor the distinct buckets of its returns, no segment column
    in the marks or the GROUP BY (with a constant NULL segment in both, compounded retention
    on 100M events took 1.37x the hand-written query; the same lesson as frequency's)."""
    marks = sql(
        "arrayFilter(i -> i >= 0 AND i < {}, arrayDistinct(arrayMap(e -> if({}, toInt64(-1), {}), ev)))",
        b.add(req.buckets, "Int64"),
        not_return,
        _bucket(req, b, sql("a.1"), sql("e.1")),
    )
    if req.unbounded:  # only the last bucket with a return
        marks = sql("if(empty({} AS bk), emptyArrayInt64(), [arrayMax(bk)])", marks)
    # one row per (anchor, bucket); -1: the anchor is in its cohort
    cells = sql(
        "SELECT cohort, bucket FROM (SELECT cohort, {} AS marks FROM ({})) "
        "ARRAY JOIN arrayPushFront(marks, toInt64(-1)) AS bucket",
        marks,
        anchored,
    )
    return Query(
        sql(
            "SELECT cohort, CAST(NULL, 'Nullable(String)') AS segment, bucket, count() AS users, 0 AS seg_rank "
            "FROM ({}) GROUP BY cohort, bucket ORDER BY cohort, bucket",
            cells,
        ),
        b,
    )


# -- shape -----------------------------------------------------------------------------------------
def _counts(req: RetentionRequest, cells: dict[int, int]) -> list[int]:
    n = req.buckets
    if not req.unbounded:
        return [cells.get(i, 0) for i in range(n)]
    out, acc = [0] * n, 0
    for i in reversed(range(n)):
        acc += cells.get(i, 0)
        out[i] = acc
    return out


def shape(rows: list[tuple[Any, ...]], req: RetentionRequest) -> dict[str, Any]:
    cells, segments = ranked_cells(rows)
    firsts: dict[str, int] = {}
    for (cohort, segment), by_bucket in cells.items():
        if segment is None:
            firsts[cohort] = by_bucket.get(-1, 0)  # bucket -1: every anchor of the cohort
    out: dict[str, Any] = {}
    for key in req.timeline.series:
        first = firsts.get(key, 0)
        overall = {"counts": _counts(req, cells.get((key, None), {})), "first": first}
        if req.on is None:
            out[key] = overall
            continue
        value = {"$overall": overall}
        for seg in segments:
            value[seg] = {"counts": _counts(req, cells.get((key, seg), {})), "first": first}
        out[key] = value
    return out


async def retention(ctx: QueryContext) -> dict[str, Any]:
    req = parse_request(ctx.params, ctx.project_id, ctx.timezone)
    return shape(await build(req).run(ctx), req)
