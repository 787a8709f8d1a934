"""`/cohorts/list` (semantics-2.md §13.5): every cohort of the project, visible or not, dynamic
or static, by ascending id, each with exactly the interface's seven fields. `count` is the
number of members now (ids without a profile included), from `CohortCounter`: the dynamic
cohorts not in its cache are counted by one statement, a static one by its list."""

from __future__ import annotations

from typing import Any

from footfall.services.query.endpoints import Handler, QueryContext
from footfall.shared.cohorts.counts import CohortCounter

__all__ = ["cohorts_list"]


def cohorts_list(counter: CohortCounter) -> Handler:
    async def handler(ctx: QueryContext) -> list[dict[str, Any]]:
        listed = await ctx.warehouse.run(counter.store.list, ctx.project_id)
        cohorts = {c.id: c for c in listed}
        counts = await ctx.warehouse.run(counter.counts_of, ctx.project_id, ctx.timezone, cohorts)
        return [
            {
                "count": counts[c.id],
                "is_visible": c.definition.is_visible,
                "description": c.definition.description,
                "created": c.created,
                "project_id": c.project_id,
                "id": c.id,
                "name": c.name,
            }
            for c in listed
        ]

    return handler
