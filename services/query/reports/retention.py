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
from datetime import datetime, timedelta
from typing import Any

from services.query.endpoints import QueryContext
from services.query.errors import ParamError
from services.query.expr import compile_on, compile_where
from services.query.expr.typed import TNode
from services.query.params import Params
from services.query.reports._common import Binds, Query, Timeline, read_expr, read_limit, timeline_for_dates
from services.query.sql import Sql, sql

__all__ = ["RetentionRequest", "build", "parse_request", "retention", "shape"]

UNITS = ("day", "week", "month")
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
    from_date, to_date = p.date("from_date"), p.date("to_date")
    assert from_date is not None and to_date is not None
    kind = p.choice("retention_type", ("birth", "compounded"), "birth")
    unit = p.choice("unit", UNITS, "day")
    assert kind is not None and unit is not None
    interval = p.integer("interval", 1, minimum=1, maximum=90 if unit == "day" else 1000)
    interval_count = p.integer("interval_count", 1, minimum=0, maximum=MAX_INTERVAL_COUNT)
    assert interval is not None and interval_count is not None
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
def _cohort(req: RetentionRequest, ms: Sql, b: Binds) -> Sql:
    local = sql("fromUnixTimestamp64Milli({}, {})", ms, b.add(req.timeline.tz, "String"))
    match req.unit:
        case "week":
            return sql("toMonday({})", local)
        case "month":
            return sql("toStartOfMonth({})", local)
    return sql("toDate({})", local)


def _bucket(req: RetentionRequest, b: Binds) -> Sql:
    """The bucket index of the return `r.ms` after the anchor `a.a_ms` (needs `at`/`rt` for months)."""
    if req.unit in UNIT_MS:
        return sql("intDiv(r.ms - a.a_ms, {})", b.add(req.interval * UNIT_MS[req.unit], "Int64"))
    # Whole calendar months m from the anchor's local month to the return's; the boundary
    # anchor + m months (day clamped) may still lie after the return: then it is m - 1.
    months = sql("((toYear(rt) * 12 + toMonth(rt)) - (toYear(at) * 12 + toMonth(at)))")
    return sql("intDiv({} - if(addMonths(at, {}) > rt, 1, 0), {})", months, months, b.add(req.interval, "Int64"))


def _scan_end(req: RetentionRequest) -> datetime:
    """Returns can lie up to `buckets` x L after an anchor before the end of the range."""
    if req.unit in UNIT_MS:
        return req.timeline.end + timedelta(milliseconds=req.buckets * req.interval * UNIT_MS[req.unit])
    return req.timeline.end + timedelta(days=31 * req.buckets * req.interval + 1)


def _event_filter(name: str | None, b: Binds) -> Sql:
    return sql("event = {}", b.add(name, "String")) if name is not None else sql("1")


def _anchors(req: RetentionRequest, b: Binds, start_ms: Sql) -> Sql:
    """(distinct_id, cohort, a_ms, a_event, a_iid): the anchors in the range."""
    project = b.add(req.project_id, "UInt64")
    end = b.add(req.timeline.end, "DateTime64(3, 'UTC')")
    if req.retention_type == "birth":
        assert req.born_event is not None
        born_where = compile_where(req.born_where, b) if req.born_where is not None else None
        return sql(
            "SELECT distinct_id, {} AS cohort, f.1 AS a_ms, {} AS a_event, f.2 AS a_iid FROM ("
            "SELECT distinct_id, min((toUnixTimestamp64Milli(time), insert_id)) AS f FROM events {} "
            "WHERE project_id = {} AND event = {} AND time < {} AND distinct_id != '' AND {} GROUP BY distinct_id"
            ") WHERE a_ms >= {}",
            _cohort(req, sql("f.1"), b),
            b.add(req.born_event, "String"),
            sql("FINAL") if born_where is not None else sql(""),
            project,
            b.add(req.born_event, "String"),
            end,
            born_where if born_where is not None else sql("1"),
            start_ms,
        )
    where = compile_where(req.where, b) if req.where is not None else None
    return sql(
        "SELECT distinct_id, cohort, f.1 AS a_ms, f.2 AS a_event, f.3 AS a_iid FROM ("
        "SELECT distinct_id, {} AS cohort, min((toUnixTimestamp64Milli(time), event, insert_id)) AS f FROM events {} "
        "WHERE project_id = {} AND time >= {} AND time < {} AND {} AND distinct_id != '' AND {} "
        "GROUP BY distinct_id, cohort)",
        _cohort(req, sql("toUnixTimestamp64Milli(time)"), b),
        sql("FINAL") if where is not None else sql(""),
        project,
        b.add(req.timeline.start, "DateTime64(3, 'UTC')"),
        end,
        _event_filter(req.event, b),
        where if where is not None else sql("1"),
    )


def build(req: RetentionRequest) -> Query:
    """Rows (cohort Date, segment Nullable(String), bucket Int64, users, segment rank): bucket
    -1 is the cohort size; with `unbounded`, bucket i counts users whose LAST bucket is i
    (-1: none). With `on`, only the top `limit` segments (rank 2, 3, …; $overall is 1)."""
    b = Binds()
    start_ms = b.add(int(req.timeline.start.timestamp() * 1000), "Int64")
    anchors = _anchors(req, b, start_ms)
    where = compile_where(req.where, b) if req.where is not None else None
    if req.on is not None:
        on = compile_on(req.on, b)
        keys = on.sql if on.is_array else sql("[{}]", on.sql)
        key_col = sql(", arrayDistinct(arrayFilter(x -> isNotNull(x), {})) AS keys", keys)
        segs = sql("arrayPushFront(r.keys, NULL)")
    else:
        key_col, segs = sql(""), sql("[CAST(NULL, 'Nullable(String)')]")
    reads = where is not None or req.on is not None
    returns = sql(
        "SELECT distinct_id, toUnixTimestamp64Milli(time) AS ms, event, insert_id{} FROM events {} "
        "WHERE project_id = {} AND time >= {} AND time < {} AND {} AND distinct_id != '' AND {}",
        key_col,
        sql("FINAL") if reads else sql(""),
        b.add(req.project_id, "UInt64"),
        b.add(req.timeline.start, "DateTime64(3, 'UTC')"),
        b.add(_scan_end(req), "DateTime64(3, 'UTC')"),
        _event_filter(req.event, b),
        where if where is not None else sql("1"),
    )
    tz = b.add(req.timeline.tz, "String")
    n = b.add(req.buckets, "Int64")
    # One row per (anchor, candidate return); unmatched anchors come with r.ms = 0.
    pairs = sql(
        "SELECT a.cohort AS cohort, a.distinct_id AS uid, fromUnixTimestamp64Milli(a.a_ms, {}) AS at, "
        "fromUnixTimestamp64Milli(r.ms, {}) AS rt, {} AS i, "
        "r.ms >= a.a_ms AND NOT (r.ms = a.a_ms AND r.event = a.a_event AND r.insert_id = a.a_iid) AND i < {} AS hit, "
        "arrayConcat([(CAST(NULL, 'Nullable(String)'), toInt64(-1))], "
        "if(hit, arrayMap(s -> (s, toInt64(i)), {}), [])) AS marks "
        "FROM ({}) AS r RIGHT JOIN ({}) AS a ON r.distinct_id = a.distinct_id AND r.ms >= a.a_ms",
        tz,
        tz,
        _bucket(req, b),
        n,
        segs,
        returns,
        anchors,
    )
    cells = sql(
        "SELECT cohort, m.1 AS segment, m.2 AS bucket, uid FROM ({}) ARRAY JOIN marks AS m",
        pairs,
    )
    if req.unbounded:  # per user the last bucket (-1: none), then users per last bucket
        cells = sql(
            "SELECT cohort, segment, uid, if(max(bucket) < 0, -1, max(bucket)) AS bucket FROM ({}) "
            "GROUP BY cohort, segment, uid",
            cells,
        )
    grouped = sql(
        "SELECT cohort, segment, bucket, uniqExactState(uid) AS st FROM ({}) GROUP BY cohort, segment, bucket",
        cells,
    )
    if req.on is None:
        return Query(sql("SELECT cohort, segment, bucket, finalizeAggregation(st) AS users, 0 AS seg_rank FROM ({}) "
                         "ORDER BY cohort, bucket", grouped), b)
    ranked = sql(
        "SELECT cohort, segment, bucket, users, seg_rank FROM ("
        "SELECT *, dense_rank() OVER (ORDER BY isNull(segment) DESC, seg_users DESC, segment) AS seg_rank FROM ("
        "SELECT cohort, segment, bucket, finalizeAggregation(st) AS users, "
        "uniqExactMerge(st) OVER (PARTITION BY segment) AS seg_users FROM ({}))) "
        "WHERE seg_rank <= {} ORDER BY cohort, segment, bucket",
        grouped,
        b.add(req.limit + 1, "UInt32"),
    )
    return Query(ranked, b)


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
    cells: dict[tuple[str, str | None], dict[int, int]] = {}
    ranks: dict[str, int] = {}
    for cohort, segment, bucket, users, rank in rows:
        cells.setdefault((cohort.isoformat(), segment), {})[int(bucket)] = int(users)
        if segment is not None:
            ranks[segment] = int(rank)
    segments = sorted(ranks, key=lambda seg: ranks[seg])
    firsts: dict[str, int] = {}
    for (cohort, segment), by_bucket in cells.items():
        if segment is None:
            # bounded: bucket -1 holds the cohort; unbounded: every user is in exactly one last bucket
            firsts[cohort] = by_bucket.get(-1, 0) if not req.unbounded else sum(by_bucket.values())
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
