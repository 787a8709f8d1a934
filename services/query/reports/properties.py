"""`/events/properties`, `/events/properties/top`, `/events/properties/values`.

Semantics (semantics.md §1.16–1.18, §2.8; decisions.md) and gaps decided here:

* `/events/properties`: the breakdown of one event by the value of property `name`,
  segments exactly as `on=properties["<name>"]` gives them (the `string()` form; a
  list counts once per distinct element; undefined and null have no segment).
  `values` (a JSON array) keeps only the listed values (compared as `string()` of
  each listed value). Top `limit` (default 255) by the `type` total over the range,
  zero-filled. Range, `unit` and `interval` as for `/events`.
* `/events/properties/top` [gap: window]: events named `event` in the last 31 days,
  property names ranked by the number of events carrying them (any value, null
  included), ties by name; top `limit` (default 10), in that order.
* `/events/properties/values`: the same 31 days; without `event`, every event is
  searched (mixpanel_data omits it). Values (segment keys as above) ranked by the
  number of events carrying them, ties by value; top `limit` (default 255).

Everything reads properties, so it runs on `events FINAL` (the latest copy of a
duplicate decides).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports import _common
from footfall.services.query.reports._common import (
    UNITS,
    Binds,
    Query,
    Scope,
    Timeline,
    final_events,
    one_event,
    read_format,
    read_limit,
    read_timeline,
    read_type,
    read_unit,
    scope_of,
    segment_expr,
    segmented,
    segmented_values,
    series_body,
    series_response,
)
from footfall.services.query.reports.events import last_31_days
from footfall.shared.expr import compile_on
from footfall.shared.expr.ast import Span
from footfall.shared.expr.typed import Prop
from footfall.shared.sql import column, sql

__all__ = ["PropertiesRequest", "build", "properties", "shape", "top", "values"]


def _property(name: str) -> Prop:
    """`properties["<name>"]` as a checked tree, without going through text."""
    return Prop(name, Span(0, 0))


def _string_form(value: Any) -> str | None:
    """`string()` of a listed value: strings as they are, numbers JS-style, booleans
    as true/false; null, lists and objects match nothing."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    return None


# -- /events/properties ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PropertiesRequest:
    project_id: int
    event: str
    name: str
    values: tuple[str, ...] | None
    type: str
    timeline: Timeline
    limit: int
    format: str

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> PropertiesRequest:
        p = ctx.params
        listed = p.json_list("values")
        allowed = None
        if listed is not None:
            allowed = tuple(dict.fromkeys(s for s in map(_string_form, listed) if s is not None))
        timeline = read_timeline(p, ctx.timezone, now, unit=read_unit(p, UNITS))
        return cls(
            ctx.project_id,
            p.required("event"),
            p.required("name"),
            allowed,
            read_type(p),
            timeline,
            read_limit(p, 255),
            read_format(p),
        )


def build(req: PropertiesRequest) -> Query:
    binds = Binds()
    on = compile_on(_property(req.name), binds)
    text = segmented(
        scope_of(req.project_id, req.timeline),
        [req.event],
        req.timeline,
        on,
        None,
        req.values,
        req.type == "unique",
        req.limit,
        binds,
        kind=req.type,
    )
    return Query(text, binds)


def shape(rows: list[tuple[Any, ...]], req: PropertiesRequest) -> dict[str, Any]:
    values = segmented_values(rows, req.type, req.timeline.series)
    return series_body(req.timeline.series, values)


async def properties(ctx: QueryContext) -> Any:
    req = PropertiesRequest.parse(ctx, _common.utc_now())
    ctx.check_cells(len(req.timeline.series), req.limit, "from_date/to_date, unit or limit")
    body = await ctx.shape(shape, await build(req).run(ctx), req)
    return series_response(body, req.format)


# -- /events/properties/top ------------------------------------------------------------------------
@dataclass(frozen=True)
class TopRequest:
    event: str
    limit: int
    window: Scope

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> TopRequest:
        p = ctx.params
        return cls(p.required("event"), read_limit(p, 10), last_31_days(ctx.project_id, ctx.timezone, now))


def build_top(req: TopRequest) -> Query:
    """Property names per event. Knows the storage (JSON text), like `property_value`."""
    binds = Binds()
    return Query(
        sql(
            "SELECT key, count() AS n FROM (SELECT JSONExtractKeys({}) AS keys FROM {}) ARRAY JOIN keys AS key "
            "GROUP BY key ORDER BY n DESC, key ASC LIMIT {}",
            column("properties"),
            final_events(req.window, [req.event], None, binds),
            binds.add(req.limit, "UInt32"),
        ),
        binds,
    )


async def top(ctx: QueryContext) -> Any:
    req = TopRequest.parse(ctx, _common.utc_now())
    return {key: {"count": n} for key, n in await build_top(req).run(ctx)}


# -- /events/properties/values ---------------------------------------------------------------------
@dataclass(frozen=True)
class ValuesRequest:
    event: str | None
    name: str
    limit: int
    window: Scope

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> ValuesRequest:
        p = ctx.params
        return cls(
            p.get("event"), p.required("name"), read_limit(p, 255), last_31_days(ctx.project_id, ctx.timezone, now)
        )


def build_values(req: ValuesRequest) -> Query:
    binds = Binds()
    on = compile_on(_property(req.name), binds)
    return Query(
        sql(
            "SELECT assumeNotNull(seg) AS value, count() AS n "
            "FROM (SELECT {} AS seg FROM {}) "
            "WHERE isNotNull(seg) GROUP BY seg ORDER BY n DESC, value ASC LIMIT {}",
            segment_expr(on),
            final_events(req.window, one_event(req.event), None, binds),
            binds.add(req.limit, "UInt32"),
        ),
        binds,
    )


async def values(ctx: QueryContext) -> Any:
    req = ValuesRequest.parse(ctx, _common.utc_now())
    return [value for value, _ in await build_values(req).run(ctx)]
