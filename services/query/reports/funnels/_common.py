"""Pieces shared by the two funnel query variants (`disjoint.py`, `general.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import LiteralString

from footfall.services.query.reports._common import (
    HAS_USER,
    USER,
    Query,
    event_filter,
    on_keys,
    segment_weight,
    top_segments,
)
from footfall.services.query.reports.funnels.request import FunnelsRequest
from footfall.shared.expr import compile_on, compile_where
from footfall.shared.schema.catalog import EVENTS
from footfall.shared.sql import Params, Scope, Sql, number, source, sql

__all__ = [
    "COLUMNS",
    "GRACE_MS",
    "USER",
    "FunnelScan",
    "Query",
    "aggregate",
    "alias",
    "events_scan",
    "funnel_scan",
    "ranked",
    "step_condition",
]

GRACE_MS = 2000

# Result columns: bucket (Date), segment (Nullable(String), NULL = $overall), step, the
# attempts that reached the step, and the sums over them of the ms since the previous step
# and since step 0 (negative differences, possible within the grace, count as 0).
COLUMNS = ("bucket", "segment", "step", "attempts", "step_ms", "start_ms")


@dataclass(frozen=True)
class FunnelScan:
    """What every variant reads: where entries may lie and which events can count."""

    entries: Scope  # [start, end) of the request: the step-0 events that enter
    scanned: Scope  # from start - grace per later step to end + window: every event that can count
    start_ms: Sql  # the entries' range as Int64 ms
    end_ms: Sql
    names: Sql  # UInt8: the row is an event of some step (`event IN …`, so the primary key prunes)
    where: Sql  # UInt8
    final: bool  # read with FINAL: properties are read by where/selectors
    on_keys: Sql | None  # Array(String) of a row, without repeats


def _ms(value: datetime) -> int:
    return int(value.timestamp()) * 1000 + value.microsecond // 1000


def funnel_scan(req: FunnelsRequest, p: Params) -> FunnelScan:
    n = len(req.funnel.steps)
    start, end = req.timeline.start, req.timeline.end
    start_ms, end_ms = _ms(start), _ms(end)
    names = sorted({name for step in req.funnel.steps for name in step.names})
    reads_properties = req.where is not None or any(s is not None for s in req.selectors)
    keys = on_keys(compile_on(req.on, p)) if req.on is not None else None
    # The scanned range is inclusive of its last millisecond (a step at exactly t0 + window counts).
    last = _datetime(end_ms + req.window_ms + 1)
    return FunnelScan(
        entries=Scope(req.project_id, start, end),
        scanned=Scope(req.project_id, _datetime(start_ms - GRACE_MS * (n - 1)), last),
        start_ms=p.add(start_ms, "Int64"),
        end_ms=p.add(end_ms, "Int64"),
        names=event_filter(names, p),
        where=compile_where(req.where, p) if req.where is not None else sql("1"),
        final=reads_properties,
        on_keys=keys,
    )


def events_scan(scope: Scope, final: bool, keys: Sql, where: Sql, p: Params) -> Sql:
    """The users' events of `scope` restricted to `keys` (conditions on sorting-key columns
    only: event, and the user key, a function of distinct_id) and `where` (anything else:
    properties, selectors).

    With FINAL the keys go into an explicit PREWHERE, as in `final_events`: every copy of a
    duplicate shares them, so filtering before the FINAL merge is exact, and ClickHouse then
    reads `properties` for matching rows only (it does not move conditions to PREWHERE
    under FINAL by itself). `where` stays after the merge, so it sees the latest copy."""
    return source(EVENTS, scope, p, final=final, keys=sql("{} AND {}", keys, HAS_USER), where=where)


def _datetime(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def step_condition(req: FunnelsRequest, k: int, p: Params) -> Sql:
    """UInt8: the row is an event of step k (one of its names, and its selector)."""
    step = req.funnel.steps[k]
    cond = event_filter(list(step.names), p)
    selector = req.selectors[k] if k < len(req.selectors) else None
    if selector is not None:
        cond = sql("({} AND {})", cond, compile_where(selector, p))
    return cond


def alias(prefix: LiteralString, k: int) -> Sql:
    """`prefix` followed by the step number: the names of the unrolled per-step columns."""
    return sql(prefix + "{}", number(k))


def aggregate(req: FunnelsRequest, per_user: Sql, p: Params) -> Query:
    """Rows of `COLUMNS` from a per-user query with the `out` column (`general.py`; see `query.py`)."""
    if req.on is None:
        grouped = sql(
            "SELECT o.1 AS bucket, CAST(NULL, 'Nullable(String)') AS segment, o.2 AS step, count() AS attempts, "
            "sum(o.3) AS step_ms, sum(o.4) AS start_ms FROM ({}) ARRAY JOIN out AS o GROUP BY bucket, step",
            per_user,
        )
    else:
        grouped = sql(
            "SELECT o.1 AS bucket, segment, o.2 AS step, count() AS attempts, sum(o.3) AS step_ms, "
            "sum(o.4) AS start_ms FROM ({}) ARRAY JOIN out AS o ARRAY JOIN arrayPushFront(o.5, NULL) AS segment "
            "GROUP BY bucket, segment, step",
            per_user,
        )
    return ranked(req, grouped, p)


def ranked(req: FunnelsRequest, counted: Sql, p: Params) -> Query:
    """The query of `counted` (rows of `COLUMNS`) in order, with `on` cut to `$overall` and
    the top `limit` segments by entries over the whole range."""
    if req.on is None:
        return Query(sql("SELECT * FROM ({}) ORDER BY bucket, step", counted), p)
    entries = segment_weight(counted, sql("sum(if(step = 0, attempts, 0))"))
    top = sql(
        "SELECT bucket, segment, step, attempts, step_ms, start_ms FROM ({}) ORDER BY bucket, segment, step",
        top_segments(entries, req.limit, p),
    )
    return Query(top, p)
