"""`FunnelsRequest`: the parameters of `/funnels`, parsed once, with the saved funnel resolved.

* `from_date`, `to_date` (required, inclusive local days); `length` x `length_unit`
  (default: the funnel's; at most 90 days); buckets by `unit` (day, week, month: calendar
  buckets, Monday weeks, keyed by their first day even before `from_date`), else by
  `interval` days anchored at `from_date` (default 1); `unit` wins when both are given.
* `where` (applied to every step), `on` (the entry event's value), `limit` (default 255,
  at most 10,000; only with `on`).
* The funnel's per-step selectors are parsed and checked here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from footfall.services.query.params import Params
from footfall.services.query.reports._common import (
    Timeline,
    check_text,
    read_dates,
    read_expr,
    read_limit,
    timeline_for_dates,
)
from footfall.shared.errors import ParamError
from footfall.shared.expr.typed import TNode
from footfall.shared.saved import LENGTH_UNITS, MAX_WINDOW_SECONDS, FunnelDefinition, SavedFunnel

__all__ = ["BUCKET_UNITS", "DEFAULT_LIMIT", "FunnelsRequest", "parse_request"]

BUCKET_UNITS = ("day", "week", "month")
DEFAULT_LIMIT = 255
MAX_INTERVAL = 36_600


@dataclass(frozen=True)
class FunnelsRequest:
    """One `/funnels` computation. `timeline` carries the zone, the UTC range of the entry
    days and the bucket keys; `window_ms` is the conversion window."""

    project_id: int
    funnel: FunnelDefinition
    timeline: Timeline
    window_ms: int
    where: TNode | None = None
    on: TNode | None = None
    limit: int = DEFAULT_LIMIT
    selectors: tuple[TNode | None, ...] = ()  # per step, checked

    @property
    def timezone(self) -> str:
        return self.timeline.tz


def parse_request(p: Params, saved: SavedFunnel, project_id: int, timezone: str) -> FunnelsRequest:
    from_date, to_date = read_dates(p)
    funnel = saved.definition
    length = p.integer("length", funnel.length, minimum=1)
    length_unit = p.choice("length_unit", tuple(LENGTH_UNITS), funnel.length_unit)
    if length * LENGTH_UNITS[length_unit] > MAX_WINDOW_SECONDS:
        raise ParamError("Error in length: the conversion window may be at most 90 days")
    unit = p.choice("unit", BUCKET_UNITS)
    interval = p.integer("interval", 1, minimum=1, maximum=MAX_INTERVAL)
    if unit is not None:
        timeline = timeline_for_dates(from_date, to_date, timezone, unit)
    else:
        timeline = timeline_for_dates(from_date, to_date, timezone, "day", interval if interval > 1 else None)
    return FunnelsRequest(
        project_id=project_id,
        funnel=funnel,
        timeline=timeline,
        window_ms=length * LENGTH_UNITS[length_unit] * 1000,
        where=read_expr(p, "where"),
        on=read_expr(p, "on"),
        limit=read_limit(p, DEFAULT_LIMIT),
        selectors=tuple(
            check_text(step.selector, f"the saved funnel's step {k} selector") for k, step in enumerate(funnel.steps)
        ),
    )
