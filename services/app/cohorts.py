"""Management of cohorts (semantics-2.md §13.7): `/api/app/projects/{project_id}/cohorts…`.

    GET    .../cohorts[?ids=1,2,3]       {"status": "ok", "results": [cohort, ...]}   (no distinct_ids)
    POST   .../cohorts                   201 {"status": "ok", "results": cohort}
    GET    .../cohorts/{id}              {"status": "ok", "results": cohort}
    PATCH  .../cohorts/{id}              {"status": "ok", "results": cohort}
    DELETE .../cohorts/{id}              {"status": "ok"}
    POST   .../cohorts/bulk-delete       {"cohort_ids": [..]}                  -> {"status": "ok"}
    POST   .../cohorts/bulk-update       {"cohorts": [{"id": .., ..PATCH members..}]} -> {"status": "ok"}

and the same under the alias `/api/app/workspaces/{workspace_id}/cohorts…` (workspace id =
project id). Definitions, PATCH rules and the canonical form are `footfall.shared.cohorts`'s.
A cohort object holds the §13.1 fields (`id, project_id, name, description, created` (UTC
`YYYY-MM-DD HH:MM:SS`), `is_visible, count, data_group_id: null`), `is_static` and the
definition (`selector` + `behaviors`, or `distinct_ids`).

Authentication: a service account (HTTP Basic) that is a member of the project; every role reads
and writes (§13.7). Errors are `{"error": "...", "status": "error"}`: 400 (bad JSON, invalid
definition naming the member and, for expressions, the position; deleting a cohort that another
cohort references, naming the referrers), 401, 403 (not a member), 404 (no such cohort in the
project), 413 (body over `MAX_BODY`).

Decisions: `ids=` takes comma-separated ids (or a JSON array); unknown ids are left out and an
empty value lists everything. The bulk operations are all or nothing: every item is validated
(bulk-update items in order, each seeing the items before it, errors prefixed `cohorts[i].`)
before anything is written; an unknown id is a 404 and nothing changes. Writes are serialised
within the process (validation reads the project's cohorts, so two concurrent requests cannot
build a cycle between them); see `footfall.shared.cohorts.store` for the multi-process caveat.

`count` comes from `count_of(project, cohorts) -> {cohort_id: count}`, which the composition root
passes in: the process's `CohortCounter.count_of` (`footfall.shared.cohorts.counts`: membership
computed by the warehouse, cached at most 60 s and dropped on edits).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.shared.auth import Authenticator, Principal
from footfall.shared.cohorts import (
    Cohort,
    CohortDefinition,
    CohortDefinitionError,
    CohortStore,
    apply_patch,
    check_delete,
    parse_cohort,
)
from footfall.shared.errors import NotFoundError, ParamError
from footfall.shared.metadata import Project
from footfall.shared.web import json_response, read_json_object

__all__ = ["MAX_BODY", "CountOf", "cohort_object", "cohort_routes"]

# Static cohorts copied from another system can list many ids (about 40 bytes each).
MAX_BODY = 16 * 1024 * 1024
MAX_ID = 2**63 - 1  # larger ids cannot name a stored cohort

CountOf = Callable[[Project, list[Cohort]], Awaitable[dict[int, int]]]

# Validation reads the project's cohorts and the write must follow before another write reads
# them: one write at a time per process.
_WRITES = threading.Lock()


def cohort_object(cohort: Cohort, count: int, *, in_list: bool = False) -> dict[str, Any]:
    """The App API cohort object: §13.1 fields, `is_static` and the definition (lists omit `distinct_ids`)."""
    d = cohort.definition
    out: dict[str, Any] = {
        "id": cohort.id,
        "project_id": cohort.project_id,
        "name": d.name,
        "description": d.description,
        "created": cohort.created,
        "is_visible": d.is_visible,
        "count": count,
        "data_group_id": None,
        "is_static": d.is_static,
        **d.definition(),
    }
    if in_list:
        out.pop("distinct_ids", None)
    return out


def _missing(cohort_ids: list[int]) -> NotFoundError:
    if len(cohort_ids) == 1:
        return NotFoundError(f"cohort {cohort_ids[0]} not found in this project")
    return NotFoundError(f"cohorts {', '.join(map(str, cohort_ids))} not found in this project")


def _path_id(request: Request) -> int:
    value = request.path_params["cohort_id"]
    if not isinstance(value, int):
        raise AssertionError("invariant: isinstance(value, int)")
    if value > MAX_ID:
        raise _missing([value])
    return value


def _ids_param(raw: str) -> list[int] | None:
    """`ids=1,2,3` (or a JSON array); None when empty (no filter)."""
    text = raw.strip()
    if not text:
        return None
    if text.startswith("["):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        items = parsed if isinstance(parsed, list) else [None]
    else:
        items = [part.strip() for part in text.split(",")]
    out = []
    for item in items:
        if isinstance(item, str) and item.isascii() and item.isdigit():
            item = int(item)
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise ParamError(f"ids: must be comma-separated cohort ids, got {raw!r}")
        out.append(item)
    return [i for i in out if i <= MAX_ID]


def _id_list(value: object, member: str) -> list[int]:
    if not isinstance(value, list):
        raise ParamError(f"{member}: must be a JSON array of cohort ids")
    for i, item in enumerate(value):
        if not isinstance(item, int) or isinstance(item, bool):
            raise ParamError(f"{member}[{i}]: a cohort id is an integer, got {item!r}")
    return list(dict.fromkeys(value))


class _Cohorts:
    def __init__(self, authenticator: Authenticator, store: CohortStore, count_of: CountOf) -> None:
        self.authenticator = authenticator
        self.store = store
        self.count_of = count_of

    # -- plumbing
    def endpoint(
        self, action: Callable[[Request, int], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """Authenticate (off the event loop) a service account of the path's project (any role)."""

        async def handle(request: Request) -> Response:
            params = request.path_params
            raw = params["project_id"] if "project_id" in params else params["workspace_id"]
            principal: Principal = await self.authenticator.for_management_async(
                request.headers.get("authorization"),
                str(raw),
                client=request.client.host if request.client is not None else None,
            )
            return await action(request, principal.project_id)

        return handle

    async def _objects(self, project_id: int, cohorts: list[Cohort], *, in_list: bool) -> list[dict[str, Any]]:
        project = self.authenticator.directory.projects[project_id]  # authenticated: it exists
        counts = await self.count_of(project, cohorts) if cohorts else {}
        return [cohort_object(c, counts.get(c.id, 0), in_list=in_list) for c in cohorts]

    async def _one(self, project_id: int, cohort: Cohort, status: int = 200) -> Response:
        (item,) = await self._objects(project_id, [cohort], in_list=False)
        return json_response({"status": "ok", "results": item}, status)

    def _definitions(self, project_id: int) -> dict[int, CohortDefinition]:
        return {c.id: c.definition for c in self.store.list(project_id)}

    # -- reads
    async def index(self, request: Request, project_id: int) -> Response:
        ids = _ids_param(request.query_params.get("ids", ""))
        cohorts = await run_in_threadpool(self.store.list, project_id, ids)
        items = await self._objects(project_id, cohorts, in_list=True)
        return json_response({"status": "ok", "results": items})

    async def get(self, request: Request, project_id: int) -> Response:
        cohort_id = _path_id(request)
        cohort = await run_in_threadpool(self.store.get, project_id, cohort_id)
        if cohort is None:
            raise _missing([cohort_id])
        return await self._one(project_id, cohort)

    # -- writes
    async def create(self, request: Request, project_id: int) -> Response:
        body = await read_json_object(request, MAX_BODY)

        def work() -> Cohort:
            with _WRITES:
                definition = parse_cohort(body, existing=self._definitions(project_id))
                return self.store.create(project_id, definition)

        return await self._one(project_id, await run_in_threadpool(work), 201)

    async def patch(self, request: Request, project_id: int) -> Response:
        cohort_id = _path_id(request)
        body = await read_json_object(request, MAX_BODY)

        def work() -> Cohort:
            with _WRITES:
                existing = self._definitions(project_id)
                if cohort_id not in existing:
                    raise _missing([cohort_id])
                definition = apply_patch(existing[cohort_id], body, existing=existing, cohort_id=cohort_id)
                updated = self.store.update(project_id, cohort_id, definition)
                if updated is None:
                    raise _missing([cohort_id])
                return updated

        return await self._one(project_id, await run_in_threadpool(work))

    async def delete(self, request: Request, project_id: int) -> Response:
        cohort_id = _path_id(request)
        await run_in_threadpool(self._delete_all, project_id, [cohort_id])
        return json_response({"status": "ok"})

    def _delete_all(self, project_id: int, cohort_ids: list[int]) -> None:
        with _WRITES:
            existing = self._definitions(project_id)
            unknown = [i for i in cohort_ids if i not in existing]
            if unknown:
                raise _missing(unknown)
            check_delete(cohort_ids, existing)
            for cohort_id in cohort_ids:
                self.store.delete(project_id, cohort_id)

    async def bulk_delete(self, request: Request, project_id: int) -> Response:
        body = await read_json_object(request, MAX_BODY)
        if "cohort_ids" not in body:
            raise ParamError("cohort_ids: required")
        cohort_ids = _id_list(body["cohort_ids"], "cohort_ids")
        if cohort_ids:
            await run_in_threadpool(self._delete_all, project_id, cohort_ids)
        return json_response({"status": "ok"})

    async def bulk_update(self, request: Request, project_id: int) -> Response:
        body = await read_json_object(request, MAX_BODY)
        items = body.get("cohorts")
        if not isinstance(items, list):
            raise ParamError("cohorts: must be a JSON array of {id, ...PATCH members}")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ParamError(f"cohorts[{i}]: must be a JSON object {{id, ...PATCH members}}")
            if not isinstance(item.get("id"), int) or isinstance(item.get("id"), bool):
                raise ParamError(f"cohorts[{i}].id: a cohort id (integer) is required")

        def work() -> None:
            with _WRITES:
                existing = self._definitions(project_id)
                unknown = list(dict.fromkeys(item["id"] for item in items if item["id"] not in existing))
                if unknown:
                    raise _missing(unknown)
                changed: dict[int, CohortDefinition] = {}
                for i, item in enumerate(items):
                    cohort_id = item["id"]
                    try:
                        updated = apply_patch(existing[cohort_id], item, existing=existing, cohort_id=cohort_id)
                    except CohortDefinitionError as exc:
                        raise exc.within(f"cohorts[{i}]") from None
                    existing[cohort_id] = changed[cohort_id] = updated
                for cohort_id, definition in changed.items():
                    self.store.update(project_id, cohort_id, definition)

        await run_in_threadpool(work)
        return json_response({"status": "ok"})

    def routes(self) -> list[Route]:
        routes = []
        for owner in ("projects/{project_id:int}", "workspaces/{workspace_id:int}"):
            base = f"/api/app/{owner}/cohorts"
            for path in (base, base + "/"):
                routes.append(Route(path, self.endpoint(self.index), methods=["GET"]))
                routes.append(Route(path, self.endpoint(self.create), methods=["POST"]))
            for name, action in (("bulk-delete", self.bulk_delete), ("bulk-update", self.bulk_update)):
                for path in (f"{base}/{name}", f"{base}/{name}/"):
                    routes.append(Route(path, self.endpoint(action), methods=["POST"]))
            one = base + "/{cohort_id:int}"
            for path in (one, one + "/"):
                routes.append(Route(path, self.endpoint(self.get), methods=["GET"]))
                routes.append(Route(path, self.endpoint(self.patch), methods=["PATCH"]))
                routes.append(Route(path, self.endpoint(self.delete), methods=["DELETE"]))
        return routes


def cohort_routes(authenticator: Authenticator, store: CohortStore, count_of: CountOf) -> list[Route]:
    """The management routes of cohorts. `count_of(project, cohorts)` gives each cohort's `count`."""
    return _Cohorts(authenticator, store, count_of).routes()
