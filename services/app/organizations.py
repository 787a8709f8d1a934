"""Organizations, projects and service accounts over HTTP: `/api/app/…` (semantics-2 §17).

    GET    /api/app/me                                                    the caller, its organization and roles
    GET    /api/app/organizations/{org}/projects                          projects the caller belongs to
    POST   /api/app/organizations/{org}/projects                          201 {"name", "timezone"}: token, secret once
    GET    /api/app/projects/{project_id}                                 any member
    PATCH  /api/app/projects/{project_id}                                 {"name"?, "timezone"?}: Owner or Admin
    POST   /api/app/projects/{project_id}/rotate-secret | rotate-token    Owner: the new value, shown once
    GET    /api/app/organizations/{org}/service-accounts                  list
    POST   /api/app/organizations/{org}/service-accounts                  201 create: the secret (`token`) once
    GET    /api/app/organizations/{org}/service-accounts/{id}             the bare ServiceAccountRead
    DELETE /api/app/organizations/{org}/service-accounts/{id}             {"status": "ok"}
    POST   /api/app/organizations/{org}/service-accounts/add-to-project
    POST   /api/app/organizations/{org}/service-accounts/remove-from-project
    GET    /api/app/projects/{project_id}/service-accounts                members with their role

Authentication: a service account (HTTP Basic). Who may do what is
`footfall.shared.permissions`; the operations are `footfall.services.app.operations`. After
each change the process reloads its credential directory at once (`changed`), so a deleted
account or a rotated secret stops working here immediately and at the gateways with the next
directory snapshot (within seconds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.app.operations import Management
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import ServiceAccount
from footfall.shared.web import json_response, read_json_object

__all__ = ["organization_routes"]

T = TypeVar("T")
Runner = Callable[..., Awaitable[Any]]
Changed = Callable[[], Awaitable[None]]
MAX_BODY = 64 * 1024


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(fn, *args)


async def _nothing() -> None:
    return None


def _ok(results: Any = None, status: int = 200) -> Response:
    body: dict[str, Any] = {"status": "ok"}
    if results is not None:
        body["results"] = results
    return json_response(body, status)


def _path_int(request: Request, name: str) -> int:
    value = request.path_params[name]
    if not isinstance(value, int):
        raise AssertionError("invariant: an int path parameter")
    return value


def organization_routes(
    authenticator: Authenticator,
    management: Management,
    *,
    run: Runner = _in_thread,
    changed: Changed = _nothing,
) -> list[Route]:
    """The routes; `run` calls a blocking operation off the event loop (the warehouse's
    runner), `changed` reloads the credential directory after a change."""

    async def caller(request: Request) -> ServiceAccount:
        client = request.client.host if request.client is not None else None
        return await authenticator.account_async(request.headers.get("authorization"), client=client)

    async def write(fn: Callable[..., T], *args: Any) -> T:
        result: T = await run(fn, *args)
        await changed()
        return result

    async def me(request: Request) -> Response:
        account = await caller(request)
        return _ok(await run(management.me, account))

    async def projects(request: Request) -> Response:
        account = await caller(request)
        org = _path_int(request, "org")
        if request.method == "POST":
            body = await read_json_object(request, MAX_BODY, empty_is_object=True)
            return _ok(await write(management.create_project, account, org, body), 201)
        return _ok(await run(management.list_projects, account, org))

    async def project(request: Request) -> Response:
        account = await caller(request)
        pid = _path_int(request, "project_id")
        if request.method == "PATCH":
            body = await read_json_object(request, MAX_BODY, empty_is_object=True)
            return _ok(await write(management.update_project, account, pid, body))
        return _ok(await run(management.get_project, account, pid))

    def rotation(kind: str) -> Callable[[Request], Awaitable[Response]]:
        async def rotate(request: Request) -> Response:
            account = await caller(request)
            return _ok(await write(management.rotate, account, _path_int(request, "project_id"), kind))

        return rotate

    async def accounts(request: Request) -> Response:
        account = await caller(request)
        org = _path_int(request, "org")
        if request.method == "POST":
            body = await read_json_object(request, MAX_BODY, empty_is_object=True)
            return _ok(await write(management.create_account, account, org, body), 201)
        return _ok(await run(management.list_accounts, account, org))

    async def one_account(request: Request) -> Response:
        account = await caller(request)
        org, sa_id = _path_int(request, "org"), _path_int(request, "sa_id")
        if request.method == "DELETE":
            await write(management.delete_account, account, org, sa_id)
            return _ok()
        return json_response(await run(management.get_account, account, org, sa_id))  # no envelope (§17.2)

    async def add_to_project(request: Request) -> Response:
        account = await caller(request)
        body = await read_json_object(request, MAX_BODY, empty_is_object=True)
        await write(management.add_to_project, account, _path_int(request, "org"), body)
        return _ok()

    async def remove_from_project(request: Request) -> Response:
        account = await caller(request)
        body = await read_json_object(request, MAX_BODY, empty_is_object=True)
        await write(management.remove_from_project, account, _path_int(request, "org"), body)
        return _ok()

    async def project_accounts(request: Request) -> Response:
        account = await caller(request)
        return _ok(await run(management.project_accounts, account, _path_int(request, "project_id")))

    org = "/api/app/organizations/{org:int}"
    return [
        Route("/api/app/me", me, methods=["GET"]),
        Route(f"{org}/projects", projects, methods=["GET", "POST"]),
        Route("/api/app/projects/{project_id:int}", project, methods=["GET", "PATCH"]),
        Route("/api/app/projects/{project_id:int}/rotate-secret", rotation("secret"), methods=["POST"]),
        Route("/api/app/projects/{project_id:int}/rotate-token", rotation("token"), methods=["POST"]),
        Route("/api/app/projects/{project_id:int}/service-accounts", project_accounts, methods=["GET"]),
        Route(f"{org}/service-accounts", accounts, methods=["GET", "POST"]),
        Route(f"{org}/service-accounts/add-to-project", add_to_project, methods=["POST"]),
        Route(f"{org}/service-accounts/remove-from-project", remove_from_project, methods=["POST"]),
        Route(f"{org}/service-accounts/{{sa_id:int}}", one_account, methods=["GET", "DELETE"]),
    ]
