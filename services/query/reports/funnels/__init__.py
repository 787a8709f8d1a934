"""`/funnels` and `/funnels/list` (semantics §1.2, §1.3, §2.1).

request.py  FunnelsRequest, parse_request (parameters + the saved funnel)
query.py    build(req) -> Query: the exact conversion query (no windowFunnel; see its docstring)
shape.py    shape(rows, req) -> the interface's JSON
"""

from __future__ import annotations

from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports.funnels.query import Query, build
from footfall.services.query.reports.funnels.request import FunnelsRequest, parse_request
from footfall.services.query.reports.funnels.shape import shape
from footfall.shared.errors import NotFoundError, ParamError
from footfall.shared.saved import WarehouseSavedStore

__all__ = ["FunnelsRequest", "Query", "build", "funnels", "funnels_list", "parse_request", "shape"]


async def funnels(ctx: QueryContext) -> dict[str, Any]:
    funnel_id = ctx.params.integer("funnel_id", minimum=1)
    if funnel_id is None:
        raise ParamError("Missing required parameter: funnel_id")
    store = WarehouseSavedStore(ctx.warehouse)
    saved = await ctx.warehouse.run(store.get_funnel, ctx.project_id, funnel_id)
    if saved is None:
        raise NotFoundError(f"Error in funnel_id: no funnel {funnel_id} in this project")
    req = parse_request(ctx.params, saved, ctx.project_id, ctx.timezone)
    rows = await build(req).run(ctx)
    return shape(rows, req)


async def funnels_list(ctx: QueryContext) -> list[dict[str, Any]]:
    store = WarehouseSavedStore(ctx.warehouse)
    saved = await ctx.warehouse.run(store.list_funnels, ctx.project_id)
    return [{"funnel_id": f.funnel_id, "name": f.name} for f in saved]
