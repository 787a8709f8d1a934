"""Data deletion (GDPR/CCPA): `POST /api/app/data-deletions/v3.0/?project_id=N` and
`GET /api/app/data-deletions/v3.0/{task_id}?project_id=N`, modelled on Mixpanel's GDPR API v3.

    POST {"distinct_ids": [...], "compliance_type": "GDPR" | "CCPA"}
         → 200 {"status": "ok", "results": {"task_id": "<uuid>"}}
    GET  → 200 {"status": "ok", "results": {"status": "PENDING" | "STARTED" | "SUCCESS" | "FAILURE",
                "distinct_ids", "compliance_type", "created", "finished"}}

Who: a service account with role owner or admin in the project (`Action.DATA_DELETION`).
Errors are the management shape: 400 (body not a JSON object, `distinct_ids` missing, empty, not
strings, an empty id, more than `MAX_IDS` (Mixpanel's 2000), `compliance_type` not GDPR/CCPA —
missing means GDPR, Mixpanel's default), 401, 403, 404 (no such task in the project).

A task is stored PENDING (table `data_deletions`, m0011) and run by the process's
`DeletionRunner` in the background: STARTED, then `erase()`, then SUCCESS (or FAILURE with the
warehouse's error kept in the table, not shown). A process that stops mid-task picks its unfinished
tasks up again when it starts (every step of `erase` can run twice). `created` and `finished` are
ISO 8601 UTC (`YYYY-MM-DDTHH:MM:SSZ`; `finished` null until the task ends).

What goes (`erase`), for the ids in the project: their events (`events`); the per-quarter-hour
counts those events were part of (`event_counts_15m` rows of every (event, quarter hour) they
touched are deleted and rebuilt from the remaining events: the aggregate states are distinct sets
that cannot be subtracted from); their `known_ids` rows (the cohort universe); their user profiles
(`profiles`), the log the profile state is rebuilt from (`profile_updates`) and its heads
(`profile_heads`), so a replay cannot bring a profile back; and their places in `/engage` paging
snapshots (a later page of a session opened before the deletion skips them). Group profiles are keyed by group, not by
user: a user's group membership lives in their events and goes with them.

Mechanism: ClickHouse's lightweight `DELETE FROM … WHERE`, then `ALTER TABLE … APPLY DELETED MASK`.
The lightweight delete masks the rows at once for every reader (FINAL and raw scans alike, so no
older copy of a ReplacingMergeTree duplicate can resurface: every copy carries the same
`distinct_id`, which is in the sorting key) and costs a rewrite of one small mask column; applying
the mask then rewrites the affected parts without the rows, so the data is physically gone when the
task says SUCCESS (a plain `ALTER TABLE … DELETE` would also erase, but readers would see the rows
until the whole mutation finished). Not covered: events still in flight (accepted before the task
and stored after it) and static cohort definitions that list the ids (user-supplied definitions).
An id deleted here and sent again later is new data and is stored, except that the distributed
worker drops an identical copy of a deleted event within its Redis dedup window
(`FOOTFALL_DEDUP_TTL_SECONDS`: it takes it for a retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
import structlog
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.shared.auth import Authenticator
from footfall.shared.errors import NotFoundError, ParamError
from footfall.shared.permissions import Action
from footfall.shared.profiles.cache import forget_profiles
from footfall.shared.schema.catalog import (
    DATA_DELETIONS,
    ENGAGE_SESSIONS,
    EVENT_COUNTS_15M,
    EVENTS,
    KNOWN_IDS,
    PROFILE_HEADS,
    PROFILE_UPDATES,
    PROFILES,
    Table,
)
from footfall.shared.sql import Params, Scope, Sql, render, source, sql
from footfall.shared.sql.ident import insert_into
from footfall.shared.warehouse.client import Warehouse
from footfall.shared.web import json_response, read_body

__all__ = [
    "MAX_IDS",
    "DeletionRunner",
    "DeletionStore",
    "DeletionTask",
    "MemoryDeletionStore",
    "WarehouseDeletionStore",
    "data_deletion_routes",
    "data_deletions",
    "erase",
]

log = structlog.get_logger(__name__)

MAX_IDS = 2000
MAX_BODY = 2 * 1024 * 1024
COMPLIANCE_TYPES = ("GDPR", "CCPA")
PENDING, STARTED, SUCCESS, FAILURE = "PENDING", "STARTED", "SUCCESS", "FAILURE"
_ISO = "%Y-%m-%dT%H:%M:%SZ"
# The time range of a deletion's guarded DELETE. A mutation keeps its bound DateTime64 values as
# epoch-second text and parses them again when it runs; ClickHouse 26.9 reads back only 10-digit
# values (2001-09-09T01:46:40Z .. 2286-11-20T17:46:39Z), so the guard stays inside them. The ids'
# events before 2001-09-09 (/import takes 1971 on) are found by a guarded SELECT (no mutation) and
# deleted by their dedup hashes, which include the project; their quarter-hour counts (hashed
# sets, no ids) are not rebuilt.
_MUTABLE = (datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC), datetime(2286, 11, 20, 17, 46, 39, tzinfo=UTC))
_OLD = (datetime(1970, 1, 1, tzinfo=UTC), _MUTABLE[0])


@dataclass(frozen=True)
class DeletionTask:
    task_id: str
    project_id: int
    distinct_ids: tuple[str, ...]
    compliance_type: str
    status: str
    created_at: datetime
    updated_at: datetime
    requested_by: int | None = None
    finished_at: datetime | None = None
    error: str = ""

    def results(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "distinct_ids": list(self.distinct_ids),
            "compliance_type": self.compliance_type,
            "created": self.created_at.astimezone(UTC).strftime(_ISO),
            "finished": None if self.finished_at is None else self.finished_at.astimezone(UTC).strftime(_ISO),
        }

    def moved(self, status: str, *, error: str = "") -> DeletionTask:
        at = max(datetime.now(UTC), self.updated_at + timedelta(microseconds=1))  # versions strictly increase
        finished = at if status in (SUCCESS, FAILURE) else None
        return replace(self, status=status, updated_at=at, finished_at=finished, error=error)


class DeletionStore(Protocol):
    def put(self, task: DeletionTask) -> None: ...

    def get(self, project_id: int, task_id: str) -> DeletionTask | None: ...

    def unfinished(self, project_id: int) -> list[DeletionTask]: ...


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class WarehouseDeletionStore:
    """Tasks in the warehouse table `data_deletions` (read with FINAL, project-scoped)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def put(self, task: DeletionTask) -> None:
        t = task
        row = [
            t.project_id,
            t.task_id,
            orjson.dumps(list(t.distinct_ids)).decode(),
            t.compliance_type,
            t.status,
            t.requested_by,
            t.error,
            t.created_at,
            t.finished_at,
            t.updated_at,
        ]
        self.warehouse.insert(DATA_DELETIONS.name, DATA_DELETIONS.column_names, [row])

    def _read(self, project_id: int, task_id: str | None, *, unfinished: bool) -> list[DeletionTask]:
        binds = Params()
        keys = sql("task_id = {}", binds.add(task_id, "String")) if task_id is not None else None
        where = sql("status IN {}", binds.add([PENDING, STARTED], "Array(String)")) if unfinished else None
        rows = source(DATA_DELETIONS, Scope(project_id), binds, final=True, keys=keys, where=where)
        text = sql(
            "SELECT task_id, project_id, distinct_ids, compliance_type, status, created_at, updated_at,"
            " requested_by, finished_at, error FROM {} ORDER BY created_at",
            rows,
        )
        return [
            DeletionTask(
                str(r[0]),
                int(r[1]),
                tuple(orjson.loads(r[2])),
                str(r[3]),
                str(r[4]),
                _utc(r[5]),
                _utc(r[6]),
                None if r[7] is None else int(r[7]),
                None if r[8] is None else _utc(r[8]),
                str(r[9]),
            )
            for r in self.warehouse.query(render(text), binds.values)
        ]

    def get(self, project_id: int, task_id: str) -> DeletionTask | None:
        found = self._read(project_id, task_id, unfinished=False)
        return found[0] if found else None

    def unfinished(self, project_id: int) -> list[DeletionTask]:
        return self._read(project_id, None, unfinished=True)


class MemoryDeletionStore:
    """The in-memory twin (unit tests)."""

    def __init__(self) -> None:
        self._data: dict[tuple[int, str], DeletionTask] = {}
        self._lock = threading.Lock()

    def put(self, task: DeletionTask) -> None:
        with self._lock:
            self._data[(task.project_id, task.task_id)] = task

    def get(self, project_id: int, task_id: str) -> DeletionTask | None:
        with self._lock:
            return self._data.get((project_id, task_id))

    def unfinished(self, project_id: int) -> list[DeletionTask]:
        with self._lock:
            return [t for (p, _), t in self._data.items() if p == project_id and t.status in (PENDING, STARTED)]


# ------------------------------------------------------------------------------------------ erasure
def _delete(table: Table, scope: Scope, binds: Params, keys: Sql) -> str:
    return render(sql("DELETE FROM {}", source(table, scope, binds, keys=keys)))


def erase(warehouse: Warehouse, project_id: int, distinct_ids: tuple[str, ...]) -> None:
    """Delete the ids' events, counts, known ids and user profiles (blocking; see the module notes).
    Every step may run again after a crash with the same outcome."""
    ids = sorted(set(distinct_ids))
    if not ids:
        return
    # The (event, quarter hour) cells the ids' events count in: rebuilt after the delete.
    binds = Params()
    keys = sql("distinct_id IN {}", binds.add(ids, "Array(String)"))
    cells_query = sql(
        "SELECT DISTINCT event, toString(toUnixTimestamp(toStartOfFifteenMinutes(time))), "
        "toStartOfFifteenMinutes(time) FROM {}",
        source(EVENTS, Scope(project_id, *_MUTABLE), binds, keys=keys),
    )
    cells = warehouse.query(render(cells_query), binds.values)
    binds = Params()
    keys = sql("distinct_id IN {}", binds.add(ids, "Array(String)"))
    old_query = sql(
        "SELECT DISTINCT hex(dedup_hash) FROM {}", source(EVENTS, Scope(project_id, *_OLD), binds, keys=keys)
    )
    old = sorted(str(r[0]) for r in warehouse.query(render(old_query), binds.values))

    binds = Params()
    keys = sql("distinct_id IN {}", binds.add(ids, "Array(String)"))
    warehouse.command(_delete(EVENTS, Scope(project_id, *_MUTABLE), binds, keys), binds.values)
    if old:
        # The dedup hash is of (project, event, time, distinct id, insert id): these rows are the
        # project's, every copy of them, whatever their time (see `_OLD`).
        binds = Params()
        by_hash = sql("DELETE FROM events WHERE hex(dedup_hash) IN {}", binds.add(old, "Array(String)"))
        warehouse.command(render(by_hash), binds.values)
    if cells:
        pairs = sorted({(str(c[0]), str(c[1])) for c in cells})
        first = min(_utc(c[2]) for c in cells)
        last = max(_utc(c[2]) for c in cells)
        quarters = Scope(project_id, first, min(last + timedelta(minutes=15), _MUTABLE[1]))
        binds = Params()
        cell_keys = sql(
            "(event, toString(toUnixTimestamp(quarter))) IN {}", binds.add(pairs, "Array(Tuple(String, String))")
        )
        warehouse.command(_delete(EVENT_COUNTS_15M, quarters, binds, cell_keys), binds.values)
        binds = Params()
        rebuilt = sql(
            "{} SELECT project_id, event, toStartOfFifteenMinutes(time) AS quarter,"
            " uniqExactState(dedup_hash), uniqExactStateIf(distinct_id, distinct_id != '') FROM {}"
            " GROUP BY project_id, event, quarter",
            insert_into(EVENT_COUNTS_15M, EVENT_COUNTS_15M.column_names),
            source(
                EVENTS,
                quarters,
                binds,
                keys=sql(
                    "(event, toString(toUnixTimestamp(toStartOfFifteenMinutes(time)))) IN {}",
                    binds.add(pairs, "Array(Tuple(String, String))"),
                ),
            ),
        )
        warehouse.command(render(rebuilt), binds.values)
    scope = Scope(project_id)
    binds = Params()
    warehouse.command(
        _delete(KNOWN_IDS, scope, binds, sql("distinct_id IN {}", binds.add(ids, "Array(String)"))), binds.values
    )
    try:
        for table in (PROFILES, PROFILE_UPDATES, PROFILE_HEADS, ENGAGE_SESSIONS):
            binds = Params()
            user_profiles = sql("group_key = '' AND profile_id IN {}", binds.add(ids, "Array(String)"))
            warehouse.command(_delete(table, scope, binds, user_profiles), binds.values)
    finally:
        forget_profiles(warehouse)  # the inline profile store's copies of current states (shared.profiles.cache)
    for statement in _APPLY_MASKS:  # physically drop the masked rows now, not at some later merge
        warehouse.command(render(statement))


_APPLY_MASKS = (
    sql("ALTER TABLE events APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE event_counts_15m APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE known_ids APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE profiles APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE profile_updates APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE profile_heads APPLY DELETED MASK SETTINGS mutations_sync = 2"),
    sql("ALTER TABLE engage_sessions APPLY DELETED MASK SETTINGS mutations_sync = 2"),
)


# ------------------------------------------------------------------------------------------- runner
Erase = Callable[[int, tuple[str, ...]], Awaitable[None]]


class DeletionRunner:
    """Runs the tasks of this process in the background, one at a time (a `Background`)."""

    def __init__(self, store: DeletionStore, erase_ids: Erase, projects: Callable[[], list[int]]) -> None:
        self.store = store
        self.erase_ids = erase_ids
        self.projects = projects
        self._queue: asyncio.Queue[DeletionTask] = asyncio.Queue()  # bound to a loop on first use
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._worker = asyncio.create_task(self._run())
        for project_id in self.projects():
            for task in await run_in_threadpool(self.store.unfinished, project_id):
                self._queue.put_nowait(task)

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    def submit(self, task: DeletionTask) -> None:
        """Queue a stored PENDING task (run once the runner has started)."""
        self._queue.put_nowait(task)

    async def _run(self) -> None:
        while True:
            task = await self._queue.get()
            await self.run_one(task)

    async def run_one(self, task: DeletionTask) -> DeletionTask:
        started = task.moved(STARTED)
        await run_in_threadpool(self.store.put, started)
        try:
            await self.erase_ids(task.project_id, task.distinct_ids)
        except Exception as exc:  # the task records the failure; the runner goes on
            log.error("data_deletion_failed", task_id=task.task_id, project_id=task.project_id, error=str(exc)[:2000])
            done = started.moved(FAILURE, error=str(exc)[:2000])
        else:
            done = started.moved(SUCCESS)
            log.info("data_deletion_done", task_id=task.task_id, project_id=task.project_id, ids=len(task.distinct_ids))
        await run_in_threadpool(self.store.put, done)
        return done


# ------------------------------------------------------------------------------------------- routes
def parse_request(body: object) -> tuple[tuple[str, ...], str]:
    if not isinstance(body, dict):
        raise ParamError("the request body must be a JSON object")
    unknown = [k for k in body if k not in ("distinct_ids", "compliance_type")]
    if unknown:
        raise ParamError(f"{unknown[0]}: unknown member (distinct_ids, compliance_type)")
    ids = body.get("distinct_ids")
    if not isinstance(ids, list) or not ids:
        raise ParamError("distinct_ids: required, a non-empty JSON array of strings")
    if len(ids) > MAX_IDS:
        raise ParamError(f"distinct_ids: at most {MAX_IDS} ids per request, got {len(ids)}")
    for i, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise ParamError(f"distinct_ids[{i}]: must be a non-empty string")
        if len(item) > 255:
            raise ParamError(f"distinct_ids[{i}]: at most 255 characters (longer ids are stored truncated)")
    compliance = body.get("compliance_type", "GDPR")
    if compliance not in COMPLIANCE_TYPES:
        raise ParamError(f"compliance_type: must be GDPR or CCPA, got {compliance!r}")
    return tuple(dict.fromkeys(ids)), str(compliance)


class _Deletions:
    def __init__(self, authenticator: Authenticator, store: DeletionStore, runner: DeletionRunner) -> None:
        self.authenticator = authenticator
        self.store = store
        self.runner = runner

    async def _principal(self, request: Request) -> Any:
        return await self.authenticator.for_management_async(
            request.headers.get("authorization"),
            request.query_params.get("project_id"),
            client=request.client.host if request.client is not None else None,
            permission=Action.DATA_DELETION,
        )

    async def create(self, request: Request) -> Response:
        principal = await self._principal(request)
        raw = await read_body(request, MAX_BODY)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ParamError("the request body must be a JSON object") from None
        ids, compliance = parse_request(body)
        at = datetime.now(UTC)
        task = DeletionTask(str(uuid.uuid4()), principal.project_id, ids, compliance, PENDING, at, at, principal.sa_id)
        await run_in_threadpool(self.store.put, task)
        self.runner.submit(task)
        return json_response({"status": "ok", "results": {"task_id": task.task_id}})

    async def get(self, request: Request) -> Response:
        principal = await self._principal(request)
        task_id = request.path_params["task_id"]
        task = await run_in_threadpool(self.store.get, principal.project_id, task_id)
        if task is None:
            raise NotFoundError(f"no data deletion task {task_id} in project {principal.project_id}")
        return json_response({"status": "ok", "results": task.results()})

    def routes(self) -> list[Route]:
        base = "/api/app/data-deletions/v3.0"
        return [
            Route(base, self.create, methods=["POST"]),
            Route(base + "/", self.create, methods=["POST"]),
            Route(base + "/{task_id:str}", self.get, methods=["GET"]),
            Route(base + "/{task_id:str}/", self.get, methods=["GET"]),
        ]


def data_deletion_routes(authenticator: Authenticator, store: DeletionStore, runner: DeletionRunner) -> list[Route]:
    """The routes; the composition root starts and stops `runner` with the process."""
    return _Deletions(authenticator, store, runner).routes()


def data_deletions(authenticator: Authenticator, warehouse: Warehouse) -> tuple[list[Route], DeletionRunner]:
    """The routes and the runner of a process with warehouse access (start and stop the runner
    with the process; it resumes the unfinished tasks of every project it knows)."""
    store = WarehouseDeletionStore(warehouse)

    async def erase_ids(project_id: int, distinct_ids: tuple[str, ...]) -> None:
        await warehouse.run(erase, warehouse, project_id, distinct_ids)

    runner = DeletionRunner(store, erase_ids, lambda: sorted(authenticator.directory.projects))
    return data_deletion_routes(authenticator, store, runner), runner
