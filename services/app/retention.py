"""`/api/app/projects/{project_id}/retention`: how many days of events a project keeps.

`GET` (any member) answers `{"status": "ok", "results": {"project_id", "days", "applying"}}`,
days 0 meaning keep everything and `applying` (`{"mutations", "parts_to_do"}`) how far the last
change is from being applied to the stored data; `PUT` (or `PATCH`) with `{"days": N}` (Owner or Admin, as for
renaming the project) stores the period and re-renders the tables' TTL rules
(`footfall.shared.retention`): expired events leave reports within hours, and a shorter period
applies to the data already stored.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.app.operations import Management
from footfall.shared.auth import Authenticator
from footfall.shared.errors import ParamError
from footfall.shared.permissions import Action
from footfall.shared.retention import RetentionError, applying, check_days, load_periods, set_period
from footfall.shared.warehouse import Warehouse
from footfall.shared.web import json_response, read_json_object

__all__ = ["retention_routes"]


def _answer(project_id: int, days: int, progress: dict[str, int]) -> Response:
    results = {"project_id": project_id, "days": days, "applying": progress}
    return json_response({"status": "ok", "results": results})


def retention_routes(authenticator: Authenticator, management: Management, warehouse: Warehouse) -> list[Route]:
    async def retention(request: Request) -> Response:
        client = request.client.host if request.client is not None else None
        account = await authenticator.account_async(request.headers.get("authorization"), client=client)
        project_id = int(request.path_params["project_id"])
        if request.method == "GET":
            await warehouse.run(management.authorize, account, project_id, Action.PROJECT_READ)
            periods = await warehouse.run(load_periods, warehouse)
            return _answer(project_id, periods.get(project_id, 0), await warehouse.run(applying, warehouse))
        await warehouse.run(management.authorize, account, project_id, Action.PROJECT_UPDATE)
        days = _days(await read_json_object(request, 1024))
        periods = await warehouse.run(set_period, warehouse, project_id, days)
        return _answer(project_id, periods.get(project_id, 0), await warehouse.run(applying, warehouse))

    path = "/api/app/projects/{project_id:int}/retention"
    return [Route(path, retention, methods=["GET", "PUT", "PATCH"])]


def _days(body: dict[str, Any]) -> int:
    if set(body) != {"days"}:
        raise ParamError('the body must be {"days": N} (0 keeps everything)')
    try:
        return check_days(body["days"])
    except RetentionError as exc:
        raise ParamError(str(exc)) from None
