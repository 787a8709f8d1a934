"""`GET /api/app/projects/{project_id}/data-groups`: the group keys of a project and their ids.

Group keys are not registered: a key exists once a group update under it was stored. Its
`data_group_id` (what `/engage` takes to query that key's group profiles) is derived from
the key itself (`footfall.shared.profiles.groups`), so it is the same in every process.
Every role of the project may read; the answer is `{"status": "ok", "results":
[{"data_group_id", "property_name"}, ...]}` ordered by property name.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.shared.auth import Authenticator
from footfall.shared.profiles.groups import data_group_id
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse import Warehouse
from footfall.shared.web import json_response

__all__ = ["data_group_routes", "group_keys"]


def group_keys(warehouse: Warehouse, project_id: int) -> list[str]:
    """The group keys with at least one stored group profile (live or deleted)."""
    binds = Params()
    text = sql(
        "SELECT DISTINCT group_key FROM {} ORDER BY group_key",
        source(PROFILES, Scope(project_id), binds, keys=sql("group_key != ''")),
    )
    return [str(row[0]) for row in warehouse.query(render(text), binds.values)]


def data_group_routes(authenticator: Authenticator, warehouse: Warehouse) -> list[Route]:
    async def data_groups(request: Request) -> Response:
        principal = await authenticator.for_management_async(
            request.headers.get("authorization"),
            str(request.path_params["project_id"]),
            client=request.client.host if request.client is not None else None,
        )
        keys = await warehouse.run(group_keys, warehouse, principal.project_id)
        results: list[dict[str, Any]] = [{"data_group_id": data_group_id(k), "property_name": k} for k in keys]
        return json_response({"status": "ok", "results": results})

    base = "/api/app/projects/{project_id:int}/data-groups"
    return [Route(path, data_groups, methods=["GET"]) for path in (base, base + "/")]
