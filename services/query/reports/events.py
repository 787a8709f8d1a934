"""`/events`, `/events/top`, `/events/names`: counts per event name, no expressions.

They read only counts: `type=general` counts the rows of `events FINAL`; unique and
average merge the materialised quarter-hour aggregates (m0003) whenever those cover the
request (`_common.mv_covers`), else read the events table. Every route counts a
duplicate once (FINAL collapses it; the aggregates hold distinct sets).

Semantics (semantics.md §1.13–1.15, §2.4, §2.7, §2.8; decisions.md) and gaps decided here:

* `/events`: `event` is a JSON array; every requested name (deduplicated, in request
  order) is a key of `values`, zero-filled, even without events. With `from_date` and
  `to_date` the range is those local days; without them `interval` N is the `unit`
  bucket holding now and the N-1 before it (old clients send only `unit`+`interval`).
  `interval` is never a bucket width here. `type=unique` with hour/minute is computed
  rather than refused [gap, §2.4].
* `/events/top` [gap, §2.7]: today = [local midnight, now); yesterday = the same elapsed
  time from the previous local midnight. Events with no amount today are not listed;
  `percent_change` = (today − yesterday) / yesterday, 1.0 when yesterday is 0. Sorted by
  amount descending, then name; `limit` default 100.
* `/events/names`: the last 31 local days (today and the 30 before, up to now); the
  `limit` (default 255) names with the highest `type` measure (ties by name), returned
  in descending alphabetical order (decisions.md). A name seen only with anonymous
  events still counts as seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports import _common
from footfall.services.query.reports._common import (
    UNITS,
    Binds,
    Query,
    Scope,
    Timeline,
    counts,
    counts_mv,
    counts_raw,
    measure,
    read_format,
    read_limit,
    read_timeline,
    read_type,
    read_unit,
    scope_of,
    series_body,
    series_response,
    series_values,
)
from footfall.shared.errors import ParamError
from footfall.shared.timerange import local_midnight_utc

__all__ = [
    "EventsRequest",
    "NamesRequest",
    "TopRequest",
    "build",
    "build_mv",
    "build_raw",
    "events",
    "names",
    "shape",
    "top",
]


# -- /events ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EventsRequest:
    project_id: int
    names: tuple[str, ...]
    type: str
    timeline: Timeline
    format: str

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> EventsRequest:
        p = ctx.params
        raw = p.json_list("event", required=True)
        if raw is None:
            raise AssertionError("invariant: raw is not None")
        if any(isinstance(n, list | dict) or n is None for n in raw):
            raise ParamError("Error in event: must be a JSON array of event names")
        names = tuple(dict.fromkeys(n if isinstance(n, str) else str(n) for n in raw))
        timeline = read_timeline(p, ctx.timezone, now, unit=read_unit(p, UNITS))
        return cls(ctx.project_id, names, read_type(p), timeline, read_format(p))


def build(req: EventsRequest) -> Query:
    binds = Binds()
    return Query(counts(scope_of(req.project_id, req.timeline), req.names, req.timeline, binds, kind=req.type), binds)


def build_mv(req: EventsRequest) -> Query:
    """The numbers from the materialised aggregates (plus raw partial quarters); call only
    when `mv_covers` (differential tests)."""
    binds = Binds()
    return Query(counts_mv(scope_of(req.project_id, req.timeline), req.names, req.timeline, binds), binds)


def build_raw(req: EventsRequest) -> Query:
    """The same numbers from the events table only (differential tests, fallback)."""
    binds = Binds()
    return Query(counts_raw(scope_of(req.project_id, req.timeline), req.names, req.timeline, binds), binds)


def shape(rows: list[tuple[Any, ...]], req: EventsRequest) -> dict[str, Any]:
    values = series_values(rows, req.type, req.timeline.series, req.names)
    return series_body(req.timeline.series, values)


async def events(ctx: QueryContext) -> Any:
    req = EventsRequest.parse(ctx, _common.utc_now())
    ctx.check_cells(len(req.timeline.series), len(req.names), "from_date/to_date, unit or event")
    body = await ctx.shape(shape, await build(req).run(ctx), req)
    return series_response(body, req.format)


# -- /events/top -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopRequest:
    project_id: int
    type: str
    limit: int
    today: Scope
    yesterday: Scope

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> TopRequest:
        p = ctx.params
        day = now.astimezone(ZoneInfo(ctx.timezone)).date()
        midnight = local_midnight_utc(day, ctx.timezone)
        before = local_midnight_utc(day - timedelta(days=1), ctx.timezone)
        elapsed = now - midnight
        return cls(
            ctx.project_id,
            read_type(p),
            read_limit(p, 100),
            Scope(ctx.project_id, midnight, now),
            Scope(ctx.project_id, before, before + elapsed),
        )


def build_window(scope: Scope, kind: str) -> Query:
    binds = Binds()
    return Query(counts(scope, None, None, binds, kind=kind), binds)


def shape_top(today: list[tuple[Any, ...]], yesterday: list[tuple[Any, ...]], req: TopRequest) -> dict[str, Any]:
    before = {name: measure(req.type, n, u) for name, _, n, u in yesterday}
    rows = []
    for name, _, n, u in today:
        amount = measure(req.type, n, u)
        if not amount:
            continue
        previous = before.get(name, 0)
        change = (amount - previous) / previous if previous else 1.0
        rows.append({"amount": amount, "event": name, "percent_change": float(change)})
    rows.sort(key=lambda r: (-r["amount"], r["event"]))
    return {"events": rows[: req.limit], "type": req.type}


async def top(ctx: QueryContext) -> Any:
    req = TopRequest.parse(ctx, _common.utc_now())
    today = await build_window(req.today, req.type).run(ctx)
    yesterday = await build_window(req.yesterday, req.type).run(ctx)
    return shape_top(today, yesterday, req)


# -- /events/names ---------------------------------------------------------------------------------
def last_31_days(project_id: int, tz: str, now: datetime) -> Scope:
    """[local midnight 30 days before today, now): the window of /events/names and the
    /events/properties/top|values endpoints."""
    today = now.astimezone(ZoneInfo(tz)).date()
    return Scope(project_id, local_midnight_utc(today - timedelta(days=30), tz), now)


@dataclass(frozen=True)
class NamesRequest:
    project_id: int
    type: str
    limit: int
    window: Scope

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> NamesRequest:
        p = ctx.params
        return cls(ctx.project_id, read_type(p), read_limit(p, 255), last_31_days(ctx.project_id, ctx.timezone, now))


def shape_names(rows: list[tuple[Any, ...]], req: NamesRequest) -> list[str]:
    volume = {name: measure(req.type, n, u) for name, _, n, u in rows}
    chosen = sorted(volume, key=lambda name: (-volume[name], name))[: req.limit]
    return sorted(chosen, reverse=True)


async def names(ctx: QueryContext) -> Any:
    req = NamesRequest.parse(ctx, _common.utc_now())
    return shape_names(await build_window(req.window, req.type).run(ctx), req)
