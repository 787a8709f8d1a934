"""`/insights?bookmark_id=`: a saved report computed in the shape of semantics §1.1.

The saved report (`footfall.shared.saved`, schema `insights`) names 1..20 events, a `unit`
(hour, day, week, month), a count type (`general`, `unique`, `average`), an optional
`where` and `on`, and its dates (absolute, or the last N days up to today in the project's
zone). The counts are those of `/segmentation` / `/events` for the same parameters (the
shared count sources of `_common`), reshaped:

    {"computed_at": "<UTC ISO timestamp>",
     "date_range": {"from_date": "2024-03-04T00:00:00-05:00", "to_date": "2024-03-10T23:59:59.999000-04:00"},
     "headers": ["$event"],
     "series": {"<event>": {"2024-03-04T00:00:00-05:00": 12, ...}, ...}}

Bucket keys are the ISO timestamps (with the zone's offset) of each bucket's first local
instant; every bucket of the range is present, zero-filled. With `on`, `headers` is
`["$event", "<on expression>"]` and each event maps `"$overall"` and its top `limit`
segment values (by total over the range; for `unique` by users) to such series [gap:
§1.1 shows the segmented shape only as "nests deeper"].
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports import _common
from footfall.services.query.reports._common import (
    Binds,
    Query,
    Timeline,
    check_text,
    counts,
    counts_where,
    scope_of,
    segmented,
    segmented_values,
    series_values,
    timeline_for_dates,
    where_condition,
)
from footfall.shared.errors import NotFoundError, ParamError
from footfall.shared.expr import compile_on, compile_where
from footfall.shared.expr.typed import TNode
from footfall.shared.saved import Bookmark, InsightsParams, WarehouseSavedStore

__all__ = ["bucket_timestamp", "insights", "shape_series"]


def bucket_timestamp(key: str, tz: str) -> str:
    """The ISO timestamp of a bucket key's first local instant (`2024-03-04T00:00:00-05:00`).
    A repeated wall-clock hour (DST fall-back) is keyed by its first occurrence."""
    local = datetime.fromisoformat(key)
    return local.replace(tzinfo=ZoneInfo(tz)).isoformat()


def _date_range(first: date, last: date, tz: str) -> dict[str, str]:
    zone = ZoneInfo(tz)
    start = datetime.combine(first, time(0), tzinfo=zone)
    end = (
        datetime.combine(last + timedelta(days=1), time(0), tzinfo=zone).astimezone(ZoneInfo("UTC"))
        - timedelta(milliseconds=1)
    ).astimezone(zone)
    return {"from_date": start.isoformat(), "to_date": end.isoformat(timespec="microseconds")}


def shape_series(values: dict[str, dict[str, int | float]], tz: str) -> dict[str, dict[str, int | float]]:
    return {name: {bucket_timestamp(k, tz): v for k, v in cells.items()} for name, cells in values.items()}


async def _event_values(
    ctx: QueryContext, params: InsightsParams, timeline: Timeline, where: TNode | None
) -> dict[str, dict[str, int | float]]:
    binds = Binds()
    scope = scope_of(ctx.project_id, timeline)
    if where is not None:
        text = counts_where(scope, list(params.events), timeline, compile_where(where, binds), binds)
    else:
        text = counts(scope, list(params.events), timeline, binds)
    rows = await Query(text, binds).run(ctx)
    return series_values(rows, params.type_of_count, timeline.series, list(params.events))


async def _segment_values(
    ctx: QueryContext, params: InsightsParams, timeline: Timeline, event: str, where: TNode | None, on: TNode
) -> dict[str, dict[str, int | float]]:
    binds = Binds()
    scope = scope_of(ctx.project_id, timeline)
    where_sql = where_condition(where, binds)
    text = segmented(
        scope,
        [event],
        timeline,
        compile_on(on, binds),
        where_sql,
        None,
        params.type_of_count == "unique",
        params.limit,
        binds,
    )
    return segmented_values(await Query(text, binds).run(ctx), params.type_of_count, timeline.series)


async def compute(ctx: QueryContext, bookmark: Bookmark, now: datetime) -> dict[str, Any]:
    params = bookmark.params
    tz = ctx.timezone
    first, last = params.dates(now.astimezone(ZoneInfo(tz)).date())
    timeline = timeline_for_dates(first, last, tz, params.unit)
    where, on = check_text(params.where, "the saved report's where"), check_text(params.on, "the saved report's on")
    overall = await _event_values(ctx, params, timeline, where)
    headers = ["$event"]
    series: dict[str, Any]
    if on is None:
        series = shape_series(overall, tz)
    else:
        if params.on is None:
            raise AssertionError("invariant: params.on is not None")
        headers.append(params.on)
        series = {}
        for event in params.events:
            segments = await _segment_values(ctx, params, timeline, event, where, on)
            series[event] = shape_series({"$overall": overall[event], **segments}, tz)
    return {
        "computed_at": now.isoformat(),
        "date_range": _date_range(first, last, tz),
        "headers": headers,
        "series": series,
    }


async def insights(ctx: QueryContext) -> dict[str, Any]:
    bookmark_id = ctx.params.integer("bookmark_id", minimum=1)
    if bookmark_id is None:
        raise ParamError("Missing required parameter: bookmark_id")
    store = WarehouseSavedStore(ctx.warehouse)
    bookmark = await ctx.warehouse.run(store.get_bookmark, ctx.project_id, bookmark_id)
    if bookmark is None:
        raise NotFoundError(f"Error in bookmark_id: no saved report {bookmark_id} in this project")
    return await compute(ctx, bookmark, _common.utc_now())
