"""The migration service's routes (§14.1, §14.2): `POST /migrate/{amplitude|mixpanel}`,
`GET /migrate/jobs/{id}`, `POST /migrate/jobs/{id}/cancel`, answered in the App shape."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.migrate.request import parse_request
from footfall.services.migrate.runner import Jobs
from footfall.shared.auth import Authenticator, parse_basic
from footfall.shared.errors import AuthError
from footfall.shared.web import Interface, json_response, plain_error, read_body

__all__ = ["MIGRATE", "migrate_routes"]

MIGRATE = Interface("migrate", ("/migrate/",), plain_error)
MAX_BODY = 64 * 1024


def _client(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


def migrate_routes(
    authenticator: Authenticator,
    runner: Jobs,
    *,
    today: Callable[[], date] = lambda: datetime.now(UTC).date(),
) -> list[Route]:
    async def start(request: Request) -> Response:
        body = await read_body(request, MAX_BODY)
        req = parse_request(
            str(request.path_params["tool"]), body, today=today(), allowlist=runner.settings.source_allowlist
        )
        project = authenticator.project_for_token(req.token)
        if project is None:
            raise AuthError(401, "MIXPANEL_TOKEN is not the token of a project of this deployment")
        job = await runner.submit(req, project.project_id)
        return json_response({"status": "ok", "results": job.public()}, 202)

    async def principal_project(request: Request) -> int:
        """§14.2: the destination token or the project secret as Basic username, or a service
        account of the project (any role) with `project_id`."""
        header, project_id = request.headers.get("authorization"), request.query_params.get("project_id")
        creds = parse_basic(header)
        if creds is not None and not creds[1]:  # a token or a secret: no role to check
            principal = await authenticator.for_import_async(header, project_id, client=_client(request))
        else:
            principal = await authenticator.for_query_async(header, project_id, client=_client(request))
        return principal.project_id

    async def status(request: Request) -> Response:
        project_id = await principal_project(request)
        job = await runner.get(project_id, str(request.path_params["job_id"]))
        return json_response({"status": "ok", "results": job.public()})

    async def cancel(request: Request) -> Response:
        project_id = await principal_project(request)
        job = await runner.cancel(project_id, str(request.path_params["job_id"]))
        return json_response({"status": "ok", "results": job.public()})

    return [
        Route("/migrate/jobs/{job_id}", status, methods=["GET"]),
        Route("/migrate/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Route("/migrate/{tool}", start, methods=["POST"]),
    ]
