"""The experiments API (semantics-2.md §16): `/api/app/workspaces/{workspace_id}/experiments…`
and the alias `/api/app/projects/{project_id}/experiments…` (workspace id = project id).

    GET    /api/app/projects/{project_id}/workspaces[/public]   [workspace]  (the project's one workspace)
    GET    /api/app/workspaces/{workspace_id}                   workspace
    GET    …/experiments[?include_archived=true]   list          200 {"status": "ok", "results": [record]}
    POST   …/experiments                           create        201 {"status": "ok", "results": record}
    GET    …/experiments/{id}                      get           200
    PATCH  …/experiments/{id}                      update        200
    DELETE …/experiments/{id}                      delete (soft) 200 {"status": "ok", "results": {}}
    POST   …/experiments/{id}/archive              archive       200 {"status": "ok", "results": {}}
    DELETE …/experiments/{id}/archive              unarchive     200 record
    PUT    …/experiments/{id}/launch               launch        200 record
    PUT    …/experiments/{id}/force_conclude       conclude      200 record (POST accepted too)
    PATCH  …/experiments/{id}/decide               decide        200 record

Lifecycle (§16.3): draft → launch → active → force_conclude → concluded → decide → success | fail;
force_conclude of a concluded experiment recomputes (a given `end_date` replaces the old one);
PATCH `status: "concluded"` undoes a decision, and a PATCH of the dates or of the analysis
(variants, metrics, analysis settings) reopens a decided experiment to `concluded` and recomputes
its frozen results. Anything else is 400 `invalid_state`. Launching needs two or more variants.

Who: a service account of the project; every role reads, owner/admin/analyst write, owner/admin
delete (§16.1, `footfall.shared.permissions`). Errors: `{"status": "error", "type", "error"}`
with `validation_error` (400), `invalid_state` (400), `not_found` (404, also for an unknown
workspace once the caller is authenticated); 401/403 in the plain management shape.

Writes (load, change, store a new version) are serialised within the process; two processes that
change one experiment at the same instant both succeed and the later version wins.

Caches (§16.6): a draft has empty `exposures_cache` and `results_cache`; an active experiment's
are computed on read over [start_date, min(end_date, now)] and kept at most `CACHE_SECONDS` per
version; at conclusion they are computed once for `end_date` and stored with the experiment.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.app.experiments.definitions import (
    ANALYSIS_SETTINGS,
    effective_settings,
    parse_create,
    parse_date,
    parse_patch,
)
from footfall.services.app.experiments.model import (
    ACTIVE,
    CONCLUDED,
    DECIDED,
    DRAFT,
    FAIL,
    SUCCESS,
    Experiment,
    ExperimentNotFoundError,
    InvalidStateError,
    ValidationError,
    iso,
)
from footfall.services.app.experiments.results import Analysis, VariantSums, compute, metric_results
from footfall.services.app.experiments.store import ExperimentStore, later, now
from footfall.shared.auth import Authenticator, Principal
from footfall.shared.errors import AuthError
from footfall.shared.permissions import MANAGERS, Action, allowed
from footfall.shared.warehouse.client import Warehouse
from footfall.shared.web import json_response, read_body

__all__ = ["CACHE_SECONDS", "Results", "experiment_routes", "record", "warehouse_results"]

MAX_BODY = 256 * 1024
CACHE_SECONDS = 60.0

# The sums per variant for an analysis (the warehouse statement, or a test's stand-in).
Results = Callable[[Analysis], Awaitable[dict[str, VariantSums]]]

# A write reads the current version and stores the next: one write at a time per process.
_WRITES = threading.Lock()


def warehouse_results(warehouse: Warehouse) -> Results:
    async def results(analysis: Analysis) -> dict[str, VariantSums]:
        return await warehouse.run(compute, warehouse, analysis)

    return results


def record(e: Experiment, role: str | None, caches: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    """The interface's experiment object (§16.4)."""
    may_write = allowed(role, Action.EXPERIMENTS_WRITE)
    return {
        "id": e.id,
        "name": e.name,
        "content_type": "experiment",
        "description": e.description,
        "created": iso(e.created_at),
        "creator_id": e.creator_id,
        "creator_name": e.creator_name,
        "creator_email": None,
        "modified": iso(e.updated_at),
        "deleted": iso(e.deleted_at),
        "is_favorited": False,
        "pinned_date": None,
        "tags": list(e.tags),
        "last_modified_by_id": e.modifier_id,
        "last_modified_by_name": e.modifier_name,
        # no `last_modified_by_email`: a service account has none, and the schema has no null
        "can_view": True,
        "can_update_basic": may_write,
        "can_update_restricted": may_write,
        "can_update_visibility": may_write,
        "is_superadmin": False,
        "allow_staff_override": False,
        "can_share": may_write,
        "is_shared_with_project": True,
        "hypothesis": e.hypothesis,
        "status": e.status,
        "variants": list(e.variants),
        "metrics": list(e.metrics),
        "settings": effective_settings(e),
        "exposures_cache": caches[0],
        "results_cache": caches[1],
        "start_date": iso(e.start_date),
        "end_date": iso(e.end_date),
        "feature_flag": None,
    }


async def _body(request: Request, *, optional: bool = False) -> dict[str, Any]:
    raw = await read_body(request, MAX_BODY)
    if optional and not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ValidationError("", "the request body must be a JSON object") from None
    if not isinstance(value, dict):
        raise ValidationError("", "the request body must be a JSON object")
    return value


def _analysis(e: Experiment, at: datetime) -> Analysis:
    s = effective_settings(e)
    if e.start_date is None:
        raise AssertionError("invariant: an analysed experiment has a start date")
    end = min(e.end_date, at) if e.end_date is not None else at
    return Analysis(
        project_id=e.project_id,
        exposure_event=s["exposure_event"],
        name_property=s["experiment_name_property"],
        variant_property=s["variant_name_property"],
        experiment_name=s["experiment_name"],
        variants=tuple(v["key"] for v in e.variants),
        metrics=e.metrics,
        start=e.start_date,
        end=end.replace(microsecond=0),
    )


class _Experiments:
    def __init__(self, authenticator: Authenticator, store: ExperimentStore, results: Results) -> None:
        self.authenticator = authenticator
        self.store = store
        self.results = results
        self._cache: dict[tuple[int, str, datetime], tuple[float, tuple[dict[str, Any], dict[str, Any]]]] = {}

    # -- plumbing
    def endpoint(
        self, action: Callable[[Request, Principal], Awaitable[Response]], permission: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            params = request.path_params
            raw = params["project_id"] if "project_id" in params else params["workspace_id"]
            try:
                principal = await self.authenticator.for_management_async(
                    request.headers.get("authorization"),
                    str(raw),
                    client=request.client.host if request.client is not None else None,
                    permission=permission,
                )
            except AuthError as exc:
                # Authenticated, but the workspace does not exist: §16.1's 404.
                if exc.status == 403 and raw not in self.authenticator.directory.projects:
                    raise ExperimentNotFoundError(f"workspace {raw} not found") from None
                raise
            return await action(request, principal)

        return handle

    async def caches(self, e: Experiment) -> tuple[dict[str, Any], dict[str, Any]]:
        if e.status == DRAFT or e.start_date is None:
            return {}, {}
        if e.status != ACTIVE and e.exposures_cache is not None and e.results_cache is not None:
            return e.exposures_cache, e.results_cache
        key = (e.project_id, e.id, e.updated_at)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        value = await self.compute(e, now())
        if len(self._cache) > 1000:
            self._cache.clear()
        self._cache[key] = (time.monotonic(), value)
        return value

    async def compute(self, e: Experiment, at: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
        sums = await self.results(_analysis(e, at))
        s = effective_settings(e)
        computed_at = iso(now())
        exposures = {
            "total": sum(v.exposures for v in sums.values()),
            "variants": {k: v.exposures for k, v in sums.items()},
            "computed_at": computed_at,
        }
        results: dict[str, Any] = {
            "computed_at": computed_at,
            "model": s["model"],
            "metrics": metric_results(e.metrics, e.control, sums, s["confidence"]),
        }
        if s["model"] != "frequentist":
            results["computed_as"] = "frequentist"
        return exposures, results

    async def frozen(self, e: Experiment) -> Experiment:
        """`e` (concluded or decided) with its caches computed for its end date."""
        if e.end_date is None:
            raise AssertionError("invariant: a concluded experiment has an end date")
        exposures, results = await self.compute(e, min(e.end_date, now()))
        return replace(e, exposures_cache=exposures, results_cache=results)

    async def answer(self, e: Experiment, principal: Principal, status: int = 200) -> Response:
        body = {"status": "ok", "results": record(e, principal.role, await self.caches(e))}
        return json_response(body, status)

    def load(self, principal: Principal, request: Request) -> Experiment:
        experiment_id = request.path_params["experiment_id"]
        found = self.store.get(principal.project_id, experiment_id)
        if found is None:
            raise ExperimentNotFoundError(f"experiment {experiment_id} not found")
        return found

    def touched(self, e: Experiment, principal: Principal, **changes: Any) -> Experiment:
        return replace(
            e, **changes, updated_at=later(e.updated_at), modifier_id=principal.sa_id, modifier_name=principal.username
        )

    async def write(
        self, request: Request, principal: Principal, change: Callable[[Experiment], Awaitable[Experiment]]
    ) -> Experiment:
        """Load, change (may compute results), store — one write at a time per process."""
        acquired = await run_in_threadpool(_WRITES.acquire)
        if not acquired:  # pragma: no cover - a blocking acquire always succeeds
            raise AssertionError("invariant: lock acquired")
        try:
            current = await run_in_threadpool(self.load, principal, request)
            updated = await change(current)
            await run_in_threadpool(self.store.put, updated)
            return updated
        finally:
            _WRITES.release()

    def timezone(self, principal: Principal) -> str:
        return principal.project.timezone

    # -- reads
    async def index(self, request: Request, principal: Principal) -> Response:
        archived = request.query_params.get("include_archived", "false").strip().lower()
        if archived not in ("true", "false", "1", "0", ""):
            raise ValidationError("include_archived", "must be true or false")
        found = await run_in_threadpool(self.store.list, principal.project_id)
        if archived not in ("true", "1"):
            found = [e for e in found if not e.archived]
        items = [record(e, principal.role, await self.caches(e)) for e in found]
        return json_response({"status": "ok", "results": items})

    async def get(self, request: Request, principal: Principal) -> Response:
        return await self.answer(await run_in_threadpool(self.load, principal, request), principal)

    # -- writes
    async def create(self, request: Request, principal: Principal) -> Response:
        members = parse_create(await _body(request))
        at = now()
        e = Experiment(
            id=str(uuid.uuid4()),
            project_id=principal.project_id,
            name=members.pop("name"),
            created_at=at,
            updated_at=at,
            creator_id=principal.sa_id,
            creator_name=principal.username,
            modifier_id=principal.sa_id,
            modifier_name=principal.username,
            **members,
        )
        await run_in_threadpool(self.store.put, e)
        return await self.answer(e, principal, 201)

    async def patch(self, request: Request, principal: Principal) -> Response:
        body = await _body(request)
        tz = self.timezone(principal)

        async def change(e: Experiment) -> Experiment:
            members = parse_patch(body, e, tz)
            status = members.pop("status", e.status)
            settings = members.get("settings", e.settings)
            reanalyse = (
                any(
                    members.get(k, getattr(e, k)) != getattr(e, k)
                    for k in ("variants", "metrics", "start_date", "end_date")
                )
                or (members.get("name", e.name) != e.name and "experiment_name" not in settings)
                or any(settings.get(k) != e.settings.get(k) for k in ANALYSIS_SETTINGS)
            )
            if status != e.status:
                if not (status == CONCLUDED and e.status in DECIDED):
                    raise InvalidStateError(f"set status {status!r} on", e.status)
            elif status in DECIDED and reanalyse:
                status = CONCLUDED  # Mixpanel reopens a decided experiment when its analysis changes
            if status == CONCLUDED and e.status in DECIDED:
                settings = {k: v for k, v in settings.items() if k != "decision"}
            updated = self.touched(e, principal, **{**members, "settings": settings, "status": status})
            _check_dates(updated)
            if status in (CONCLUDED, *DECIDED) and (reanalyse or updated.results_cache is None):
                updated = await self.frozen(updated)
            return updated

        return await self.answer(await self.write(request, principal, change), principal)

    async def delete(self, request: Request, principal: Principal) -> Response:
        if principal.role not in MANAGERS:
            raise AuthError(
                403,
                "deleting experiments requires a service account with role Owner or Admin"
                f" in project {principal.project_id}",
            )

        async def change(e: Experiment) -> Experiment:
            return self.touched(e, principal, deleted_at=now())

        await self.write(request, principal, change)
        return json_response({"status": "ok", "results": {}})

    async def archive(self, request: Request, principal: Principal) -> Response:
        async def change(e: Experiment) -> Experiment:
            return self.touched(e, principal, archived=True)

        await self.write(request, principal, change)
        return json_response({"status": "ok", "results": {}})

    async def unarchive(self, request: Request, principal: Principal) -> Response:
        async def change(e: Experiment) -> Experiment:
            return self.touched(e, principal, archived=False)

        return await self.answer(await self.write(request, principal, change), principal)

    async def launch(self, request: Request, principal: Principal) -> Response:
        body = await _body(request, optional=True)
        if body:
            raise ValidationError(next(iter(body)), "unknown member (launch takes an empty body)")

        async def change(e: Experiment) -> Experiment:
            if e.status != DRAFT:
                raise InvalidStateError("launch", e.status)
            if len(e.variants) < 2:
                raise ValidationError("variants", "launching needs at least two variants (one of them the control)")
            updated = self.touched(e, principal, status=ACTIVE, start_date=e.start_date or now().replace(microsecond=0))
            _check_dates(updated)
            return updated

        return await self.answer(await self.write(request, principal, change), principal)

    async def force_conclude(self, request: Request, principal: Principal) -> Response:
        body = await _body(request, optional=True)
        unknown = [k for k in body if k != "end_date"]
        if unknown:
            raise ValidationError(unknown[0], "unknown member (force_conclude takes end_date)")
        end = parse_date(body.get("end_date"), "end_date", self.timezone(principal), end=True)

        async def change(e: Experiment) -> Experiment:
            if e.status not in (ACTIVE, CONCLUDED):
                raise InvalidStateError("force conclude", e.status)
            end_date = end or (e.end_date if e.status == CONCLUDED else None) or now().replace(microsecond=0)
            updated = self.touched(e, principal, status=CONCLUDED, end_date=end_date)
            _check_dates(updated)
            return await self.frozen(updated)

        return await self.answer(await self.write(request, principal, change), principal)

    async def decide(self, request: Request, principal: Principal) -> Response:
        body = await _body(request)
        unknown = [k for k in body if k not in ("success", "variant", "message")]
        if unknown:
            raise ValidationError(unknown[0], "unknown member (decide takes success, variant, message)")
        success = body.get("success")
        if not isinstance(success, bool):
            raise ValidationError("success", "required, true or false")
        variant, message = body.get("variant"), body.get("message")
        if variant is not None and not isinstance(variant, str):
            raise ValidationError("variant", "must be a variant key")
        if message is not None and (not isinstance(message, str) or len(message) > 4000):
            raise ValidationError("message", "must be a string of at most 4000 characters")

        async def change(e: Experiment) -> Experiment:
            if e.status != CONCLUDED:
                raise InvalidStateError("decide", e.status)
            if variant is not None and variant not in {v["key"] for v in e.variants}:
                raise ValidationError("variant", f"not a variant of this experiment: {variant!r}")
            decision = {"success": success, "variant": variant, "message": message, "decided_at": iso(now())}
            return self.touched(
                e, principal, status=SUCCESS if success else FAIL, settings={**e.settings, "decision": decision}
            )

        return await self.answer(await self.write(request, principal, change), principal)

    async def workspaces(self, request: Request, principal: Principal) -> Response:
        return json_response({"status": "ok", "results": [workspace(principal)]})

    async def workspace_one(self, request: Request, principal: Principal) -> Response:
        return json_response({"status": "ok", "results": workspace(principal)})

    def routes(self) -> list[Route]:
        read, write = Action.EXPERIMENTS_READ, Action.EXPERIMENTS_WRITE
        routes = []
        # The project's one workspace (§16.1): listed, and readable by its id.
        for path, action in (
            ("/api/app/projects/{project_id:int}/workspaces", self.workspaces),
            ("/api/app/projects/{project_id:int}/workspaces/public", self.workspaces),
            ("/api/app/workspaces/{workspace_id:int}", self.workspace_one),
        ):
            handler = self.endpoint(action, Action.PROJECT_READ)
            routes += [Route(p, handler, methods=["GET"]) for p in (path, path + "/")]
        for owner in ("workspaces/{workspace_id:int}", "projects/{project_id:int}"):
            base = f"/api/app/{owner}/experiments"
            one = base + "/{experiment_id:str}"
            table: list[tuple[str, str, Callable[[Request, Principal], Awaitable[Response]], str]] = [
                (base, "GET", self.index, read),
                (base, "POST", self.create, write),
                (one, "GET", self.get, read),
                (one, "PATCH", self.patch, write),
                (one, "DELETE", self.delete, write),
                (one + "/archive", "POST", self.archive, write),
                (one + "/archive", "DELETE", self.unarchive, write),
                (one + "/launch", "PUT", self.launch, write),
                (one + "/force_conclude", "PUT", self.force_conclude, write),
                (one + "/force_conclude", "POST", self.force_conclude, write),
                (one + "/decide", "PATCH", self.decide, write),
            ]
            for path, method, act, permission in table:
                handler = self.endpoint(act, permission)
                routes += [Route(p, handler, methods=[method]) for p in (path, path + "/")]
        return routes


def workspace(principal: Principal) -> dict[str, Any]:
    """The project's one workspace (Decision: its id is the project id; it is the global view)."""
    project = principal.project
    return {
        "id": project.project_id,
        "name": "All Project Data",
        "project_id": project.project_id,
        "is_global": True,
        "is_default": True,
        "is_restricted": False,
        "is_visible": True,
    }


def _check_dates(e: Experiment) -> None:
    if e.status in (ACTIVE, CONCLUDED, *DECIDED) and e.start_date is None:
        raise ValidationError("start_date", f"an experiment in state {e.status} needs a start date")
    if e.status in (CONCLUDED, *DECIDED) and e.end_date is None:
        raise ValidationError("end_date", f"an experiment in state {e.status} needs an end date")
    if e.start_date is not None and e.end_date is not None and e.end_date < e.start_date:
        raise ValidationError("end_date", "must not be before start_date")


def experiment_routes(authenticator: Authenticator, store: ExperimentStore, results: Results) -> list[Route]:
    """The experiments routes; `results(analysis)` gives the sums per variant
    (`warehouse_results(warehouse)` in a deployment)."""
    return _Experiments(authenticator, store, results).routes()
