"""`/retention/addiction`: the frequency report (semantics §1.5, §2.3).

* Periods are the calendar `unit` buckets (day; Monday week; first of the month) that
  intersect [from_date, to_date], keyed by their first day (which may precede
  `from_date`); a period's window is the whole calendar period in local time.
* Slots are local wall-clock `addiction_unit`s of the period: days, or (day, hour) pairs.
  The array has one element per slot of the period (days x 24 for hours), so a DST change
  does not change its length: a skipped hour just never has activity and a repeated
  one is one slot.
* Element k = the users (non-empty distinct_id) whose matching events (`event`, any when
  absent, and `where`) fall in at least k + 1 distinct slots; non-increasing.
* `on`: an event counts for each of its keys; `{"$overall": [...], "<key>": [...]}` per
  period, keys ranked by the distinct users having the key in any period (ties by key),
  top `limit` (default 255), every kept key in every period.

Response `{"data": {...}}` (the interface's wrapper, semantics §11). Duplicates never
add a slot; FINAL is used when `where` or `on` reads properties (the latest copy decides).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
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
from footfall.services.query.reports._common.buckets import bucket_date
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
from footfall.shared.expr import compile_on
from footfall.shared.expr.typed import TNode
from footfall.shared.sql import sql
from footfall.shared.timerange import local_midnight_utc

__all__ = ["FrequencyRequest", "build", "frequency", "parse_request", "shape"]

UNITS = ("day", "week", "month")
SLOT_UNITS = ("hour", "day")
DEFAULT_LIMIT = 255


@dataclass(frozen=True)
class FrequencyRequest:
    project_id: int
    timeline: Timeline  # the periods
    slot_unit: str
    event: str | None
    where: TNode | None
    on: TNode | None
    limit: int

    @property
    def unit(self) -> str:
        return self.timeline.unit


def parse_request(p: Params, project_id: int, timezone: str) -> FrequencyRequest:
    from_date, to_date = read_dates(p)
    unit = p.choice("unit", UNITS) or p.required("unit")
    slot_unit = p.choice("addiction_unit", SLOT_UNITS) or p.required("addiction_unit")
    return FrequencyRequest(
        project_id=project_id,
        timeline=timeline_for_dates(from_date, to_date, timezone, unit),
        slot_unit=slot_unit,
        event=p.get("event"),
        where=read_expr(p, "where"),
        on=read_expr(p, "on"),
        limit=read_limit(p, DEFAULT_LIMIT),
    )


def _next_period(start: date, unit: str) -> date:
    if unit == "day":
        return start + timedelta(days=1)
    if unit == "week":
        return start + timedelta(weeks=1)
    return date(start.year + start.month // 12, start.month % 12 + 1, 1)


def _slots(start: date, req: FrequencyRequest) -> int:
    days = (_next_period(start, req.unit) - start).days
    return days * 24 if req.slot_unit == "hour" else days


def build(req: FrequencyRequest) -> Query:
    """Rows (period Date, segment Nullable(String), slots k, users with exactly k slots, segment rank)."""
    b = Binds()
    tz = b.add(req.timeline.tz, "String")
    periods = [date.fromisoformat(k) for k in req.timeline.series]
    scope = Scope(
        req.project_id,
        local_midnight_utc(periods[0], req.timeline.tz),
        local_midnight_utc(_next_period(periods[-1], req.unit), req.timeline.tz),
    )
    local_day = sql("toDate(time, {})", tz)
    period = bucket_date(local_day, req.timeline, b)
    if req.slot_unit == "hour":
        slot = sql("dateDiff('day', period, {}) * 24 + toHour(time, {})", local_day, tz)
    else:
        slot = sql("dateDiff('day', period, {})", local_day)
    where = where_condition(req.where, b)
    if where is not None or req.on is not None:
        source = final_events(scope, one_event(req.event), where, b, keys=HAS_USER)
    else:
        source = raw_events(scope, one_event(req.event), b, keys=HAS_USER)
    if req.on is None:
        # Without segments, no segment column in the groupings (a constant NULL key costs:
        # measured 2x the hand-written query on 100M events with it).
        events = sql("SELECT {} AS period, {} AS slot, {} AS u FROM {}", period, slot, USER, source)
        users = sql("SELECT period, uniqExact(slot) AS k FROM ({}) GROUP BY period, u", events)
        return Query(
            sql(
                "SELECT period, CAST(NULL, 'Nullable(String)') AS segment, k, count() AS users, 0 FROM ({})"
                " GROUP BY period, k",
                users,
            ),
            b,
        )
    segment = sql("arrayJoin(arrayPushFront({}, NULL))", on_keys(compile_on(req.on, b)))
    events = sql("SELECT {} AS period, {} AS slot, {} AS u, {} AS segment FROM {}", period, slot, USER, segment, source)
    # per (period, segment) each user once, with their number of distinct slots k
    per_user = sql(
        "SELECT period, segment, u, uniqExact(slot) AS k FROM ({}) GROUP BY period, segment, u",
        events,
    )
    # a segment's weight: its distinct users over every period
    grouped = sql(
        "SELECT period, segment, k, count() AS users, any(seg_weight) AS seg_weight FROM ({}) "
        "GROUP BY period, segment, k",
        segment_weight(per_user, sql("uniqExact(u)")),
    )
    ranked = sql("SELECT period, segment, k, users, seg_rank FROM ({})", top_segments(grouped, req.limit, b))
    return Query(ranked, b)


def shape(rows: list[tuple[Any, ...]], req: FrequencyRequest) -> dict[str, Any]:
    exactly, segments = ranked_cells(rows)

    def row(key: str, segment: str | None) -> list[int]:
        counts = exactly.get((key, segment), {})
        n = _slots(date.fromisoformat(key), req)
        out, acc = [0] * n, 0
        for k in range(n, 0, -1):  # element k-1 = users with at least k slots
            acc += counts.get(k, 0)
            out[k - 1] = acc
        return out

    data: dict[str, Any] = {}
    for key in req.timeline.series:
        if req.on is None:
            data[key] = row(key, None)
        else:
            data[key] = {"$overall": row(key, None), **{s: row(key, s) for s in segments}}
    return {"data": data}


async def frequency(ctx: QueryContext) -> dict[str, Any]:
    req = parse_request(ctx.params, ctx.project_id, ctx.timezone)
    return shape(await build(req).run(ctx), req)
