"""Management of saved funnels and saved reports: `/api/app/projects/{project_id}/funnels|bookmarks`.

    GET    .../funnels              {"status": "ok", "results": [funnel, ...]}
    POST   .../funnels              201 {"status": "ok", "results": funnel}
    GET    .../funnels/{id}         {"status": "ok", "results": funnel}
    PUT    .../funnels/{id}         replace the whole definition (same body as POST)
    PATCH  .../funnels/{id}         replace only the given top-level members, then validate the result
    DELETE .../funnels/{id}         {"status": "ok"}

and the same under `.../bookmarks` (members `name`, `params`; see `footfall.shared.saved` for
both schemas). Bodies are JSON objects. Authentication is a service account (HTTP Basic)
that is a member of the project in the path: every role may read; writing needs Owner
or Admin. Errors are `{"error": "...", "status": "error"}` with 400 (bad JSON, invalid
definition — expression errors keep their position), 401 (missing/invalid credentials,
or credentials that are not a service account), 403 (not a member, role too low) and
404 (no such funnel/report in the project).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.shared.auth import Authenticator, Principal
from footfall.shared.credentials import Role
from footfall.shared.errors import FootfallError, NotFoundError
from footfall.shared.expr import check_expr, parse_expr
from footfall.shared.saved import SavedStore, parse_bookmark, parse_funnel
from footfall.shared.web import Interface, json_response, plain_error, read_json_object

__all__ = ["ERROR_TYPE_HEADER", "MANAGEMENT", "WRITE_ROLES", "check_expression", "management_error", "saved_routes"]

WRITE_ROLES = (Role.OWNER, Role.ADMIN)
MAX_BODY = 256 * 1024

# An error that names its kind (the experiments API's `type`, semantics-2 §16.3) carries it in
# this header entry; the renderer moves it into the body and does not send the header.
ERROR_TYPE_HEADER = "X-Footfall-Error-Type"


def management_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    """`{"error", "status": "error"}`, plus `"type"` when the error names its kind."""
    kind = headers.get(ERROR_TYPE_HEADER)
    if kind is None:
        return plain_error(request, status, message, headers)
    rest = {k: v for k, v in headers.items() if k != ERROR_TYPE_HEADER}
    return json_response({"status": "error", "type": kind, "error": message}, status, rest)


# The management interface's error shape: `{"error": "...", "status": "error"}`.
MANAGEMENT = Interface("management", ("/api/app/",), management_error)


def check_expression(text: str) -> None:
    """Parse and check an event expression; raises `ExprError` (with `.position`) when invalid."""
    check_expr(parse_expr(text))


def _item_id(request: Request, name: str) -> int:
    value = request.path_params[name]
    if not isinstance(value, int):
        raise AssertionError("invariant: isinstance(value, int)")
    return value


class _Kind:
    """What differs between funnels and bookmarks: the members, the parser and the store methods."""

    def __init__(self, label: str, store: SavedStore) -> None:
        self.label = label
        self.store = store

    def members(self, record: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def validate(self, body: dict[str, Any]) -> tuple[str, Any]:
        raise NotImplementedError

    def list(self, project_id: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get(self, project_id: int, item_id: int) -> dict[str, Any] | None:
        raise NotImplementedError

    def create(self, project_id: int, name: str, value: Any) -> dict[str, Any]:
        raise NotImplementedError

    def update(self, project_id: int, item_id: int, name: str, value: Any) -> dict[str, Any] | None:
        raise NotImplementedError

    def delete(self, project_id: int, item_id: int) -> bool:
        raise NotImplementedError


class _Funnels(_Kind):
    def members(self, record: dict[str, Any]) -> dict[str, Any]:
        return {k: record[k] for k in ("name", "steps", "length", "length_unit")}

    def validate(self, body: dict[str, Any]) -> tuple[str, Any]:
        return parse_funnel(body, check=check_expression)

    def list(self, project_id: int) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.store.list_funnels(project_id)]

    def get(self, project_id: int, item_id: int) -> dict[str, Any] | None:
        found = self.store.get_funnel(project_id, item_id)
        return found.to_json() if found else None

    def create(self, project_id: int, name: str, value: Any) -> dict[str, Any]:
        return self.store.create_funnel(project_id, name, value).to_json()

    def update(self, project_id: int, item_id: int, name: str, value: Any) -> dict[str, Any] | None:
        found = self.store.update_funnel(project_id, item_id, name, value)
        return found.to_json() if found else None

    def delete(self, project_id: int, item_id: int) -> bool:
        return self.store.delete_funnel(project_id, item_id)


class _Bookmarks(_Kind):
    def members(self, record: dict[str, Any]) -> dict[str, Any]:
        return {"name": record["name"], "params": record["params"]}

    def validate(self, body: dict[str, Any]) -> tuple[str, Any]:
        return parse_bookmark(body, check=check_expression)

    def list(self, project_id: int) -> list[dict[str, Any]]:
        return [b.to_json() for b in self.store.list_bookmarks(project_id)]

    def get(self, project_id: int, item_id: int) -> dict[str, Any] | None:
        found = self.store.get_bookmark(project_id, item_id)
        return found.to_json() if found else None

    def create(self, project_id: int, name: str, value: Any) -> dict[str, Any]:
        return self.store.create_bookmark(project_id, name, value).to_json()

    def update(self, project_id: int, item_id: int, name: str, value: Any) -> dict[str, Any] | None:
        found = self.store.update_bookmark(project_id, item_id, name, value)
        return found.to_json() if found else None

    def delete(self, project_id: int, item_id: int) -> bool:
        return self.store.delete_bookmark(project_id, item_id)


Endpoint = Callable[[Request], Awaitable[Response]]
Action = Callable[[Request, Principal], Awaitable[Response]]


class _Resource:
    def __init__(self, kind: _Kind, authenticator: Authenticator) -> None:
        self.kind = kind
        self.authenticator = authenticator

    def endpoint(self, action: Action, *, write: bool) -> Endpoint:
        """Authenticate (off the event loop) a service account of the path's project, with a
        writing role for changes; errors are raised and rendered by `MANAGEMENT`."""

        async def handle(request: Request) -> Response:
            principal = await self.authenticator.for_management_async(
                request.headers.get("authorization"),
                str(request.path_params["project_id"]),
                client=request.client.host if request.client is not None else None,
                write_roles=WRITE_ROLES if write else (),
                action=f"changing saved {self.kind.label}s",
            )
            return await action(request, principal)

        return handle

    def _missing(self, item_id: int) -> FootfallError:
        return NotFoundError(f"{self.kind.label} {item_id} not found in this project")

    async def index(self, request: Request, principal: Principal) -> Response:
        items = await run_in_threadpool(self.kind.list, principal.project_id)
        return json_response({"status": "ok", "results": items})

    async def create(self, request: Request, principal: Principal) -> Response:
        name, value = self.kind.validate(await read_json_object(request, MAX_BODY))
        item = await run_in_threadpool(self.kind.create, principal.project_id, name, value)
        return json_response({"status": "ok", "results": item}, 201)

    async def get(self, request: Request, principal: Principal) -> Response:
        item_id = _item_id(request, "item_id")
        item = await run_in_threadpool(self.kind.get, principal.project_id, item_id)
        if item is None:
            raise self._missing(item_id)
        return json_response({"status": "ok", "results": item})

    async def put(self, request: Request, principal: Principal) -> Response:
        item_id = _item_id(request, "item_id")
        name, value = self.kind.validate(await read_json_object(request, MAX_BODY))
        return await self._write(principal, item_id, name, value)

    async def patch(self, request: Request, principal: Principal) -> Response:
        item_id = _item_id(request, "item_id")
        changes = await read_json_object(request, MAX_BODY)
        current = await run_in_threadpool(self.kind.get, principal.project_id, item_id)
        if current is None:
            raise self._missing(item_id)
        name, value = self.kind.validate({**self.kind.members(current), **changes})
        return await self._write(principal, item_id, name, value)

    async def _write(self, principal: Principal, item_id: int, name: str, value: Any) -> Response:
        item = await run_in_threadpool(self.kind.update, principal.project_id, item_id, name, value)
        if item is None:
            raise self._missing(item_id)
        return json_response({"status": "ok", "results": item})

    async def delete(self, request: Request, principal: Principal) -> Response:
        item_id = _item_id(request, "item_id")
        if not await run_in_threadpool(self.kind.delete, principal.project_id, item_id):
            raise self._missing(item_id)
        return json_response({"status": "ok"})

    def routes(self, collection: str) -> list[Route]:
        base = f"/api/app/projects/{{project_id:int}}/{collection}"
        one = base + "/{item_id:int}"
        routes = []
        for path in (base, base + "/"):
            routes.append(Route(path, self.endpoint(self.index, write=False), methods=["GET"]))
            routes.append(Route(path, self.endpoint(self.create, write=True), methods=["POST"]))
        for path in (one, one + "/"):
            routes.append(Route(path, self.endpoint(self.get, write=False), methods=["GET"]))
            routes.append(Route(path, self.endpoint(self.put, write=True), methods=["PUT"]))
            routes.append(Route(path, self.endpoint(self.patch, write=True), methods=["PATCH"]))
            routes.append(Route(path, self.endpoint(self.delete, write=True), methods=["DELETE"]))
        return routes


def saved_routes(authenticator: Authenticator, store: SavedStore) -> list[Route]:
    """The management routes of saved funnels and saved reports."""
    return _Resource(_Funnels("funnel", store), authenticator).routes("funnels") + _Resource(
        _Bookmarks("bookmark", store), authenticator
    ).routes("bookmarks")
