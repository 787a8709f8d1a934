"""The job runner: starts, resumes, cancels and runs migration jobs in the background.

A job walks its window chunk by chunk (§14.2, §14.3): for each chunk the source answer is staged
to a file and read back off the event loop (Amplitude: inflated in a thread into line-aligned
blocks that the mapping worker processes decode, map and validate, `work.py`; Mixpanel: line by
line in a worker thread), published in batches through the ingestion sink (the same streams as
`/import` and `/engage`), and only then is the chunk committed: the job's row is
written with the cursor moved past it. A crash before the commit re-runs the chunk, which
imports nothing twice (every `$insert_id` is derived from the source record).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
import zipfile
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import IO, Any, Protocol, TypeVar, runtime_checkable

import httpx
import orjson
import structlog

from footfall.services.migrate import metrics
from footfall.services.migrate.download import (
    Fetched,
    InflationError,
    Retry,
    SourceError,
    amplitude_blocks,
    fetch,
    ndjson_lines,
)
from footfall.services.migrate.mapping import Malformed, mixpanel_event
from footfall.services.migrate.model import ACTIVE, Counts, Job, JobError, new_job
from footfall.services.migrate.request import MigrationRequest
from footfall.services.migrate.settings import MIXPANEL_HOSTS, MigrateSettings
from footfall.services.migrate.store import Cipher, JobStore
from footfall.services.migrate.work import (
    Block,
    BlockSpec,
    amplitude_block,
    candidate_update,
    decode_block,
    validate,
    watch_parent,
)
from footfall.shared.errors import FootfallError, NotFoundError, UnavailableError
from footfall.shared.events import Event
from footfall.shared.streams import EVENTS, USER_UPDATES, Intake, Locator, Stream
from footfall.shared.streams.stream import PackedRows

__all__ = ["Jobs", "Publisher", "RowsPublisher", "Runner"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
_TIMEOUT = httpx.Timeout(60.0, read=300.0)


class Publisher(Protocol):
    """The ingestion sink (`KafkaSink` or the embedded one): returns once items are durable."""

    async def publish(self, stream: Stream[T], items: list[T]) -> dict[int, str]: ...


@runtime_checkable
class RowsPublisher(Protocol):
    """A sink that also stores rows its stream's builder made elsewhere (the embedded one): the
    mapping workers then build and pack the events' rows, the job forwards them unopened, and
    the store's process opens and inserts them."""

    async def publish_rows(self, stream: Stream[Any], packed: PackedRows) -> None: ...

    async def hot_columns(self) -> tuple[tuple[str, str], ...]:
        """(property, column) of the store's hot columns in use, which the workers' fast path
        fills in the rows it builds (so that the store's engine need not)."""
        ...


RunBlocking = Callable[..., Awaitable[Any]]


class Jobs(Protocol):
    """What the routes ask of the jobs: the `Runner`, or `serve`'s job process in front of one."""

    settings: MigrateSettings

    async def submit(self, req: MigrationRequest, project_id: int) -> Job: ...

    async def get(self, project_id: int, job_id: str) -> Job: ...

    async def cancel(self, project_id: int, job_id: str) -> Job: ...


class _Cancelled(Exception):
    pass


@dataclass
class _Batch:
    """What a worker made of a batch (Mixpanel) or a block (Amplitude) of source lines."""

    events: list[Event] = field(default_factory=list)
    read: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    first_ms: int | None = None  # the earliest and latest valid event times
    last_ms: int | None = None
    valid: int = 0  # events that passed validation: `events`, or their table rows in `rows`
    rows: list[bytes] = field(default_factory=list)  # packed table rows, a blob per block
    row_count: int = 0  # rows in `rows`
    columns: tuple[str, ...] | None = None  # the blobs' columns (None: the table's)

    def bad(self, reason: str) -> None:
        self.invalid[reason] = self.invalid.get(reason, 0) + 1

    def add(self, other: _Batch | Block) -> None:
        """Gather another batch's events and counts into this one (in order)."""
        self.events += other.events
        self.valid += other.valid
        if isinstance(other, Block):
            if other.rows is not None:
                self.rows.append(other.rows)  # gathered unopened: the store inserts them as they are
                self.columns = other.columns
        elif other.rows:
            self.rows += other.rows
            self.columns = other.columns
        self.row_count += other.row_count
        self.read += other.read
        for reason, n in other.invalid.items():
            self.invalid[reason] = self.invalid.get(reason, 0) + n
        if other.first_ms is not None and other.last_ms is not None:
            self.first_ms = other.first_ms if self.first_ms is None else min(self.first_ms, other.first_ms)
            self.last_ms = other.last_ms if self.last_ms is None else max(self.last_ms, other.last_ms)


@dataclass
class _Chunk:
    """A Mixpanel chunk's reading state: its lines."""

    lines: Iterator[bytes]


def _keep_latest(latest: dict[str, bytes], found: dict[str, bytes]) -> None:
    """Keep each user's latest record over a chunk's blocks (§14.5; `profile_candidate`s, whose
    first 8 bytes compare as times): blocks arrive in line order, so on a tie of times the later
    block's record wins."""
    get = latest.get
    latest.update({uid: c for uid, c in found.items() if (seen := get(uid)) is None or c[:8] >= seen[:8]})


async def _settled(task: asyncio.Task[None] | None) -> None:
    """Wait for a pending chunk close, raising what it raised."""
    if task is not None:
        await task


def _day_hours(day: date) -> tuple[datetime, datetime]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + timedelta(hours=23)


def _hour_text(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H")


class Runner:
    def __init__(
        self,
        store: JobStore,
        run_blocking: RunBlocking,
        sink: Publisher,
        settings: MigrateSettings,
        cipher: Cipher,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        transport: httpx.AsyncBaseTransport | None = None,
        open_locator: Callable[[str], Locator] | None = None,
    ) -> None:
        self.store = store
        self.run_blocking = run_blocking
        self.sink = sink
        self.settings = settings
        self.cipher = cipher
        self.clock = clock
        self.transport = transport
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.live: dict[str, Job] = {}  # jobs this process runs, with their in-flight counts
        self.cancelling: set[str] = set()
        self.committed: dict[str, Counts] = {}  # per running job: the counts its cursor covers
        self.cursor: dict[str, tuple[int, int | None]] = {}  # per running job: its saved cursor
        # A sink that takes rows, and how its store locates addresses (a top-level function the
        # mapping workers call by name): then the workers build the events' rows.
        self.rows_sink = sink if isinstance(sink, RowsPublisher) and open_locator is not None else None
        self.open_locator = open_locator
        self._slots = asyncio.Semaphore(max(1, settings.max_running))
        self._pool: ProcessPoolExecutor | None = None  # the mapping workers (`settings.workers`), started on first use
        self._submit = asyncio.Lock()

    # ------------------------------------------------------------------------------ API
    async def submit(self, req: MigrationRequest, project_id: int) -> Job:
        async with self._submit:
            jobs: list[Job] = await self.run_blocking(self.store.of_project, project_id)
            if any(j.state in ACTIVE for j in jobs):
                raise FootfallError(409, "a migration job for this project is already queued or running")
            now = self.clock()
            job = next((j for j in jobs if self._resumes(j, req)), None)
            if job is not None:
                job.state, job.error, job.finished, job.updated = "queued", None, None, now
            else:
                job = new_job(
                    source_tool=req.source_tool,
                    project_id=project_id,
                    dry_run=req.dry_run,
                    region=req.region,
                    source_region=req.source_region,
                    region_explicit=req.region_explicit,
                    source_url=req.source_url,
                    start=req.start,
                    end=req.end,
                    now=now,
                )
            await self.run_blocking(self.store.save, job, self.cipher.seal(req.credentials))
            self._start(job, req.credentials)
            return job

    @staticmethod
    def _resumes(job: Job, req: MigrationRequest) -> bool:
        return (
            job.state in ("failed", "cancelled")
            and not job.dry_run
            and not req.dry_run
            and job.source_tool == req.source_tool
            and (job.start_date, job.end_date) == (req.start, req.end)
            and job.source_url == req.source_url  # another source is another migration
        )

    async def get(self, project_id: int, job_id: str) -> Job:
        live = self.live.get(job_id)
        if live is not None and live.project_id == project_id:
            return live
        found = await self.run_blocking(self.store.get, project_id, job_id)
        if found is None:
            raise NotFoundError(f"no migration job {job_id[:64]!r} in this project")
        job: Job = found[0]
        return job

    async def cancel(self, project_id: int, job_id: str) -> Job:
        job = await self.get(project_id, job_id)
        if job.state not in ACTIVE:
            return job
        task = self.tasks.get(job_id)
        if task is not None and job.state == "running":
            self.cancelling.add(job_id)  # stops at its next batch; what was published stays
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), timeout=30)
            return await self.get(project_id, job_id)
        if task is not None:  # queued behind the running-jobs cap: it never started
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        job.state, job.finished, job.updated = "cancelled", self.clock(), self.clock()
        await self.run_blocking(self.store.save, job, None)
        return job

    async def resume_all(self, project_ids: list[int]) -> int:
        """Restart the jobs a previous process left queued or running (same id, same cursor)."""
        started = 0
        for pid in project_ids:
            for job in await self.run_blocking(self.store.of_project, pid):
                if job.state not in ACTIVE or job.id in self.tasks:
                    continue
                found = await self.run_blocking(self.store.get, pid, job.id)
                creds = self.cipher.open(found[1]) if found else None
                if creds is None:
                    job.state, job.finished = "failed", self.clock()
                    job.error = JobError("source_credentials_rejected", "the stored source credentials are unreadable")
                    await self.run_blocking(self.store.save, job, None)
                    continue
                log.info("migrate_job_resumed", job_id=job.id, project_id=pid, next_day=job.next_day)
                self._start(job, creds)
                started += 1
        return started

    async def stop(self) -> None:
        """Process shutdown: running jobs stop where they are (they resume at the next start)."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)

    # ------------------------------------------------------------------------------ running
    def _start(self, job: Job, creds: dict[str, Any]) -> None:
        self.live[job.id] = job
        task = asyncio.create_task(self._run(job, creds), name=f"migrate-{job.id}")
        self.tasks[job.id] = task

        def done(_: asyncio.Task[None]) -> None:
            self.tasks.pop(job.id, None)
            self.live.pop(job.id, None)
            self.committed.pop(job.id, None)
            self.cursor.pop(job.id, None)

        task.add_done_callback(done)

    async def _save(self, job: Job, sealed: str | None = None) -> None:
        job.updated = self.clock()
        await self.run_blocking(self.store.save, job, sealed)

    async def _run(self, job: Job, creds: dict[str, Any]) -> None:
        async with self._slots:
            job.state = "running"
            await self._save(job)
            committed = replace(job.counts, events_invalid=dict(job.counts.events_invalid))
            self.committed[job.id] = committed
            self.cursor[job.id] = (job.next_day, job.next_hour)
            profiles: set[str] = set()
            try:
                async with httpx.AsyncClient(transport=self.transport, timeout=_TIMEOUT) as client:
                    if job.source_tool == "amplitude":
                        await self._amplitude(job, creds, client, profiles)
                    else:
                        await self._mixpanel(job, creds, client, profiles)
            except _Cancelled:
                await self._finish(job, "cancelled", None)
                return
            except SourceError as exc:
                await self._finish(job, "failed", JobError(exc.code, exc.message, self._chunk_label(job)))
                return
            except UnavailableError as exc:
                await self._finish(
                    job, "failed", JobError("destination_unavailable", exc.message, self._chunk_label(job))
                )
                return
            except asyncio.CancelledError:
                raise  # process shutdown: the row still says running, the next start resumes it
            except Exception as exc:
                log.error("migrate_job_crashed", job_id=job.id, exc_info=exc)
                error = JobError("source_unavailable", "internal error", self._chunk_label(job))
                await self._finish(job, "failed", error)
                return
            await self._finish(job, "succeeded", None)

    async def _finish(self, job: Job, state: str, error: JobError | None) -> None:
        if state != "succeeded":
            # What the saved cursor covers; a resume redoes the rest (a chunk whose events were
            # read but whose profiles and commit did not finish included).
            job.counts = self.committed[job.id]
            job.next_day, job.next_hour = self.cursor[job.id]
        job.state, job.error, job.finished = state, error, self.clock()
        self.cancelling.discard(job.id)
        # Credentials are erased once the job cannot run again (a success); a failed or cancelled
        # job keeps them (encrypted) so that the same request resumes it.
        await self._save(job, "" if state == "succeeded" else None)
        log.info("migrate_job_finished", job_id=job.id, state=state, error=error.code if error else None)

    def _chunk_label(self, job: Job) -> str | None:
        if job.next_day >= job.days:
            return None
        day = job.start_date + timedelta(days=job.next_day)
        if job.next_hour is not None:
            return _hour_text(_day_hours(day)[0] + timedelta(hours=job.next_hour))
        return day.isoformat()

    async def _save_cursor(self, job: Job) -> None:
        """Save the job's cursor between chunks (no chunk read and not committed)."""
        await self._save(job)
        self.cursor[job.id] = (job.next_day, job.next_hour)

    @staticmethod
    def _snapshot(job: Job) -> Job:
        """The job as it stands now (cursor and counts), to be saved by a later commit."""
        return replace(job, counts=replace(job.counts, events_invalid=dict(job.counts.events_invalid)))

    async def _commit(self, job: Job, source: str, saved: Job | None = None) -> None:
        """Save `saved` (a snapshot of the job taken when its chunk was read; default: the job
        now) with one more chunk done. The live job (what GET shows) counts the chunk only once
        its row is saved: a reader never sees a chunk done that a crash right now would make the
        resume redo."""
        saved = saved or self._snapshot(job)
        saved.counts.chunks_done += 1
        await self._save(saved)
        job.updated = saved.updated
        job.counts.chunks_done += 1
        metrics.CHUNKS_DONE.labels(source).inc()
        self.committed[job.id] = replace(saved.counts, events_invalid=dict(saved.counts.events_invalid))
        self.cursor[job.id] = (saved.next_day, saved.next_hour)

    def _retry(self, job: Job) -> Retry:
        return Retry(self.settings.retries, self.settings.backoff_base, self.settings.backoff_max)

    def _on_retry(self, job: Job) -> Callable[[], None]:
        def note() -> None:
            job.counts.source_retries += 1
            metrics.SOURCE_RETRIES.labels(job.source_tool).inc()

        return note

    # ------------------------------------------------------------------------------ Amplitude
    def _amplitude_host(self, region: str) -> str:
        return self.settings.amplitude_eu_url if region == "EU" else self.settings.amplitude_url

    async def _amplitude(self, job: Job, creds: dict[str, Any], client: httpx.AsyncClient, profiles: set[str]) -> None:
        last_hour = (self.clock() - timedelta(hours=self.settings.export_lag_hours)).replace(
            minute=0, second=0, microsecond=0
        ) - timedelta(hours=1)
        spans = []
        for i in range(job.days):
            first, last = _day_hours(job.start_date + timedelta(days=i))
            spans.append((first, min(last, last_hour)))
        if job.counts.chunks_total == 0:
            job.counts.chunks_total = sum(1 for first, last in spans if first <= last)
            self.committed[job.id].chunks_total = job.counts.chunks_total
        region = job.source_region
        host = self._amplitude_host(region)
        if job.source_host is not None:  # a resumed job stays on the host it started with
            urls = (self.settings.amplitude_url, self.settings.amplitude_eu_url)
            host = next((u for u in urls if httpx.URL(u).host == job.source_host), host)
        fallback = not job.region_explicit and job.source_host is None
        auth = (str(creds["api_key"]), str(creds["api_secret"]))

        async def get(first: datetime, last: datetime, *, day: bool) -> Fetched:
            nonlocal host, fallback
            while True:
                url = f"{host}/api/2/export"
                params = {"start": _hour_text(first), "end": _hour_text(last)}
                fetched = await fetch(
                    client,
                    "GET",
                    url,
                    retry=self._retry(job),
                    passthrough=frozenset({504}) if day else frozenset(),
                    on_retry=self._on_retry(job),
                    work_dir=self.settings.work_dir or None,
                    params=params,
                    auth=auth,
                )
                if fetched.status in (401, 403):
                    if fallback:
                        fallback = False
                        host = self._amplitude_host("US" if region == "EU" else "EU")
                        continue
                    raise SourceError("source_credentials_rejected", f"the source answered {fetched.status}")
                if job.source_host is None:
                    job.source_host = httpx.URL(host).host
                return fetched

        # A chunk's profile updates and its commit run while the next chunk's events are read
        # (`_close`); commits stay in order, and no other save happens while one is pending.
        closing: asyncio.Task[None] | None = None
        try:
            while job.next_day < job.days:
                self._check(job)
                first, last = spans[job.next_day]
                if first > last:
                    job.next_day += 1
                    continue
                if job.next_hour is None:
                    fetched = await get(first, last, day=True)
                    if fetched.status in (400, 504):
                        await _settled(closing)
                        closing = None
                        hours = int((last - first).total_seconds() // 3600) + 1
                        job.next_hour = 0
                        job.counts.chunks_total += hours - 1
                        self.committed[job.id].chunks_total = job.counts.chunks_total
                        await self._save_cursor(job)
                        continue
                    winners = await self._amplitude_chunk(job, fetched)
                    await _settled(closing)
                    closing = None
                    job.next_day += 1
                    closing = self._close(job, winners, profiles)
                    continue
                hour = first + timedelta(hours=job.next_hour)
                if hour > last:
                    await _settled(closing)
                    closing = None
                    job.next_day, job.next_hour = job.next_day + 1, None
                    await self._save_cursor(job)
                    continue
                fetched = await get(hour, hour, day=False)
                if fetched.status == 400:
                    raise SourceError("hour_too_large", f"the hour {_hour_text(hour)} is too large to export")
                winners = await self._amplitude_chunk(job, fetched)
                await _settled(closing)
                closing = None
                job.next_hour += 1
                if hour >= last:
                    job.next_day, job.next_hour = job.next_day + 1, None
                closing = self._close(job, winners, profiles)
            await _settled(closing)
            closing = None
        finally:
            if closing is not None:  # the job stops: the chunk read before still closes (or fails)
                with contextlib.suppress(BaseException):
                    await closing

    def _close(self, job: Job, winners: list[tuple[str, bytes]], seen: set[str]) -> asyncio.Task[None]:
        """Publish a read chunk's profile updates (each user's latest record), then commit the
        chunk with the cursor and counts it had when its events were read."""
        saved = self._snapshot(job)

        async def close() -> None:
            # As many updates per publish as events: the profile store's two inserts per commit
            # cost less per update in larger batches, as the events' insert does.
            size = self.settings.publish_events
            for i in range(0, len(winners), size):  # unpacked a batch at a time
                updates = [candidate_update(uid, c) for uid, c in winners[i : i + size]]
                await self._profiles(job, updates, seen, also=saved.counts, size=size)
            await self._commit(job, "amplitude", saved)

        return asyncio.create_task(close(), name=f"migrate-close-{job.id}")

    async def _amplitude_chunk(self, job: Job, fetched: Fetched) -> list[tuple[str, bytes]]:
        """Inflate the staged answer into line-aligned blocks (bounded, in a thread), map and
        validate the blocks in the worker processes (a few in flight), publish the events in
        order (blocks gathered into publishes of `publish_events`); return the chunk's profile
        updates (each user's latest record: uid and `profile_candidate`)."""
        try:
            if fetched.status == 404:
                return []
            if fetched.status != 200 or fetched.file is None:
                raise SourceError("source_unavailable", f"the source answered {fetched.status}")
            job.counts.bytes_downloaded += fetched.size
            bound = self.settings
            blocks = amplitude_blocks(
                fetched.file,
                max_bytes=bound.max_inflated_bytes,
                max_ratio=bound.max_inflation_ratio,
                size=bound.block_bytes,
            )
            builds_rows = self.rows_sink is not None and not job.dry_run
            spec = BlockSpec(
                job.id,
                job.project_id,
                bound.limits,
                int(time.time() * 1000),
                open_locator=self.open_locator if builds_rows else None,
                geoip_db=bound.geoip_db,
                fast_path=bound.fast_path,
                hot=await self.rows_sink.hot_columns() if builds_rows and self.rows_sink is not None else (),
            )
            latest: dict[str, bytes] = {}  # uid -> its latest record's profile candidate
            pending: deque[asyncio.Future[bytes]] = deque()
            # Blocks in flight: enough that the workers keep mapping while a publish is awaited.
            depth = 4 * max(1, bound.workers) + 2
            more = True
            reading: asyncio.Future[bytes | None] | None = None
            gathered = _Batch()  # blocks' events gathered into one publish of `publish_events`
            publishing: asyncio.Task[None] | None = None  # the previous publish, running while blocks decode
            try:
                while True:
                    self._check(job)
                    while more and len(pending) < depth:
                        reading = asyncio.ensure_future(asyncio.to_thread(next, blocks, None))
                        block = await self._read(reading)
                        reading = None
                        if block is None:
                            more = False
                        else:
                            pending.append(self._map(amplitude_block, block, spec))
                    if pending:
                        try:
                            blob = await pending.popleft()
                        except BrokenProcessPool:
                            self._pool = None  # a worker died (killed, out of memory): the next chunk starts a new pool
                            raise
                        done = decode_block(blob, job.project_id)
                        _keep_latest(latest, done.profiles)
                        if gathered.rows and done.rows is not None and done.columns != gathered.columns:
                            # rows of other columns (with or without the hot ones): another insert
                            publishing = await self._hand_over(job, gathered, publishing)
                            gathered = _Batch()
                        gathered.add(done)
                    if gathered.valid >= bound.publish_events or (not pending and gathered.read):
                        publishing = await self._hand_over(job, gathered, publishing)
                        gathered = _Batch()
                    if not pending:
                        break
                if publishing is not None:
                    task, publishing = publishing, None
                    await task
            finally:
                for future in pending:  # a failed or cancelled chunk: the blocks in flight are dropped
                    future.cancel()
                with contextlib.suppress(BaseException):  # the reader must be done before the staged file closes
                    if reading is not None:
                        await reading
                    await asyncio.to_thread(blocks.close)
                if publishing is not None:  # a failed chunk: its publish is finished, not abandoned half-way
                    with contextlib.suppress(BaseException):
                        await publishing
            return list(latest.items())
        finally:
            fetched.close()

    async def _hand_over(self, job: Job, gathered: _Batch, publishing: asyncio.Task[None] | None) -> asyncio.Task[None]:
        """Publish `gathered` once the previous publish is done (one at a time, in order)."""
        if publishing is not None:
            await publishing
        return asyncio.create_task(self._take(job, gathered))

    @staticmethod
    async def _read(reading: asyncio.Future[bytes | None]) -> bytes | None:
        try:
            return await asyncio.shield(reading)
        except (InflationError, OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
            message = f"the source's answer is unreadable: {exc}"[:300]
            raise SourceError("source_unavailable", message) from exc

    def _map(self, fn: Callable[[bytes, BlockSpec], bytes], block: bytes, spec: BlockSpec) -> asyncio.Future[bytes]:
        """`fn(block, spec)` in a worker process (`workers` of them, started on first use), or in
        a thread of this process with `workers = 0`."""
        if self.settings.workers <= 0:
            return asyncio.ensure_future(asyncio.to_thread(fn, block, spec))
        if self._pool is None:
            context = multiprocessing.get_context("spawn")  # never fork a process that runs chDB's threads
            self._pool = ProcessPoolExecutor(
                self.settings.workers, mp_context=context, initializer=watch_parent, initargs=(os.getpid(),)
            )
        try:
            return asyncio.wrap_future(self._pool.submit(fn, block, spec))
        except BrokenProcessPool:
            self._pool = None
            raise

    def _validate(self, job: Job, items: list[Any], longest: int) -> tuple[list[Event], list[Any]]:
        spec = BlockSpec(job.id, job.project_id, self.settings.limits, int(time.time() * 1000))
        return validate(items, spec, longest)

    async def _pump(self, job: Job, chunk: _Chunk, make: Callable[[list[bytes]], _Batch]) -> None:
        """Read the chunk in batches in a worker thread; publish each batch before the next."""
        size = self.settings.batch_events

        def next_batch() -> _Batch | None:
            lines = [line for _, line in zip(range(size), chunk.lines, strict=False)]
            return make(lines) if lines else None

        # The next batch is read while the current one is published (one reader at a time).
        pending: asyncio.Future[_Batch | None] | None = asyncio.ensure_future(asyncio.to_thread(next_batch))
        try:
            while pending is not None:
                self._check(job)
                try:
                    batch = await pending
                except (InflationError, OSError, EOFError, ValueError) as exc:
                    message = f"the source's answer is unreadable: {exc}"[:300]
                    raise SourceError("source_unavailable", message) from exc
                pending = None
                if batch is None:
                    return
                pending = asyncio.ensure_future(asyncio.to_thread(next_batch))
                await self._take(job, batch)
        finally:
            if pending is not None:  # the reader must be done before the staged file closes
                with contextlib.suppress(Exception):
                    await pending

    async def _take(self, job: Job, batch: _Batch) -> None:
        """Count one batch and publish its events (unless DRY_RUN)."""
        counts = job.counts
        limit = self.settings.event_limit
        if limit and not job.dry_run and counts.events_read + batch.read > limit:
            counts.events_read += batch.read
            self.committed[job.id].events_read = counts.events_read
            raise SourceError("event_limit_exceeded", f"the job read more than {limit} events")
        counts.events_read += batch.read
        metrics.EVENTS_READ.labels(job.source_tool).inc(batch.read)
        for reason, n in batch.invalid.items():
            counts.invalid(reason, n)
            metrics.EVENTS_INVALID.labels(job.source_tool, reason[:40]).inc(n)
        if batch.first_ms is not None and batch.last_ms is not None:
            counts.saw_time(batch.first_ms)
            counts.saw_time(batch.last_ms)
        if job.dry_run:
            counts.events_to_import += batch.valid
        elif batch.valid:
            await self._publish(
                job,
                EVENTS,
                batch.events,
                PackedRows(batch.rows, batch.row_count, batch.columns) if batch.rows else None,
            )
            counts.events_imported += batch.valid
            metrics.EVENTS_IMPORTED.labels(job.source_tool).inc(batch.valid)

    async def _publish(self, job: Job, stream: Stream[T], items: list[T], rows: PackedRows | None = None) -> None:
        """Publish through the ingestion sink (`rows`, when given, are the items' table rows for
        a `RowsPublisher`); while it answers unavailable (a broker still connecting or down, a
        store failing) retry with backoff, for `retries` attempts and at least
        `destination_patience` seconds, then fail the job `destination_unavailable` (resumable)."""
        retry = self._retry(job)
        deadline = time.monotonic() + self.settings.destination_patience
        attempt = 0
        while True:
            try:
                if rows is not None and self.rows_sink is not None:
                    await self.rows_sink.publish_rows(stream, rows)
                else:
                    await self.sink.publish(stream, items)
                return
            except UnavailableError:
                if attempt >= retry.attempts and time.monotonic() >= deadline:
                    raise
                log.info("migrate_destination_retry", job_id=job.id, stream=stream.name)
                await asyncio.sleep(retry.delay(min(attempt, retry.attempts)))
                attempt += 1
                self._check(job)

    async def _profiles(
        self, job: Job, raw: list[dict[str, Any]], seen: set[str], also: Counts | None = None, size: int = 0
    ) -> None:
        """Validate and publish profile updates, `size` (default `batch_events`) at a time; count
        the profiles not seen before in the job (and in `also`, a snapshot's counts)."""
        size = size or self.settings.batch_events
        for i in range(0, len(raw), size):
            part = raw[i : i + size]
            limits = self.settings.limits
            intake = Intake(job.project_id, True, limits, int(time.time() * 1000), 0)
            updates, _failures = await asyncio.to_thread(USER_UPDATES.validate, part, intake)
            fresh = {u.profile_id for u in updates} - seen
            seen.update(fresh)
            if not job.dry_run and updates:
                await self._publish(job, USER_UPDATES, updates)
            for counts in (job.counts,) if also is None else (job.counts, also):
                if job.dry_run:
                    counts.profiles_to_update += len(fresh)
                else:  # `fresh` is empty when nothing was published
                    counts.profiles_updated += len(fresh)

    def _check(self, job: Job) -> None:
        if job.id in self.cancelling:
            raise _Cancelled()

    # ------------------------------------------------------------------------------ Mixpanel
    def _mixpanel_hosts(self, job: Job) -> tuple[str, str]:
        if job.source_url:
            return job.source_url, job.source_url
        export, engage = MIXPANEL_HOSTS[job.source_region]
        return self.settings.mixpanel_export_url or export, self.settings.mixpanel_engage_url or engage

    async def _mixpanel(self, job: Job, creds: dict[str, Any], client: httpx.AsyncClient, profiles: set[str]) -> None:
        export, engage = self._mixpanel_hosts(job)
        job.source_host = httpx.URL(export).host
        if job.counts.chunks_total == 0:
            job.counts.chunks_total = job.days + 1  # the days, then the profiles
            self.committed[job.id].chunks_total = job.counts.chunks_total
        username = creds.get("username")
        auth = (str(username), str(creds["secret"])) if username else (str(creds["secret"]), "")
        extra = {"project_id": str(creds["project_id"])} if creds.get("project_id") else {}
        sent: list[float] = []

        async def paced(method: str, url: str, **kwargs: Any) -> Fetched:
            window = 3600.0
            while len(sent) >= self.settings.requests_per_hour > 0:
                wait = sent[0] + window - time.monotonic()
                if wait <= 0:
                    sent.pop(0)
                    continue
                await asyncio.sleep(min(wait, 5.0))
                self._check(job)
            sent.append(time.monotonic())
            fetched = await fetch(
                client,
                method,
                url,
                retry=self._retry(job),
                on_retry=self._on_retry(job),
                work_dir=self.settings.work_dir or None,
                auth=auth,
                **kwargs,
            )
            if fetched.status in (401, 403):
                fetched.close()
                raise SourceError("source_credentials_rejected", f"the source answered {fetched.status}")
            return fetched

        while job.next_day < job.days:
            self._check(job)
            day = (job.start_date + timedelta(days=job.next_day)).isoformat()
            params = {"from_date": day, "to_date": day, "time_in_ms": "true", **extra}
            fetched = await paced("GET", f"{export}/api/2.0/export", params=params)
            try:
                if fetched.status == 200 and fetched.file is not None:
                    job.counts.bytes_downloaded += fetched.size
                    chunk = _Chunk(ndjson_lines(fetched.file))
                    await self._pump(job, chunk, lambda lines: self._mixpanel_batch(job, lines))
                elif fetched.status != 404:
                    raise SourceError("source_unavailable", f"the source answered {fetched.status}")
            finally:
                fetched.close()
            job.next_day += 1
            await self._commit(job, "mixpanel")
        if not job.profiles_done:
            await self._mixpanel_profiles(job, engage, extra, paced, profiles)
            job.profiles_done = True
            await self._commit(job, "mixpanel")

    def _mixpanel_batch(self, job: Job, lines: list[bytes]) -> _Batch:
        batch = _Batch(read=len(lines))
        items = []
        for line in lines:
            try:
                items.append(mixpanel_event(orjson.loads(line)))
            except orjson.JSONDecodeError:
                batch.bad("malformed")
            except Malformed as exc:
                batch.bad(exc.reason)
        events, failures = self._validate(job, items, max(map(len, lines), default=0))
        for f in failures:
            batch.bad(f.field or f.reason)
        batch.events, batch.valid = events, len(events)
        if events:
            times = [e.time_ms for e in events]
            batch.first_ms, batch.last_ms = min(times), max(times)
        return batch

    async def _mixpanel_profiles(
        self,
        job: Job,
        engage: str,
        extra: dict[str, str],
        paced: Callable[..., Awaitable[Fetched]],
        seen: set[str],
    ) -> None:
        started_ms = int(job.created.timestamp() * 1000)
        page, session = 0, None
        while True:
            self._check(job)
            form = {"page": str(page), **extra}
            if session:
                form["session_id"] = session
            fetched = await paced("POST", f"{engage}/api/2.0/engage", data=form)
            try:
                if fetched.status == 404:
                    return
                if fetched.status != 200 or fetched.file is None:
                    raise SourceError("source_unavailable", f"the source's /engage answered {fetched.status}")
                body = await asyncio.to_thread(_read_json, fetched.file)
            finally:
                fetched.close()
            results = body.get("results") if isinstance(body, dict) else None
            if not isinstance(results, list) or not results:
                return
            updates = [
                {"$distinct_id": r["$distinct_id"], "$set": r.get("$properties") or {}, "$time": started_ms}
                | {"$ignore_time": True}
                for r in results
                if isinstance(r, dict) and isinstance(r.get("$distinct_id"), str)
            ]
            await self._profiles(job, updates, seen)
            session = body.get("session_id") if isinstance(body.get("session_id"), str) else None
            page_size = body.get("page_size")
            if not isinstance(page_size, int) or len(results) < page_size or session is None:
                return
            page += 1


def _read_json(file: IO[bytes]) -> Any:
    try:
        return orjson.loads(file.read())
    except orjson.JSONDecodeError:
        raise SourceError("source_unavailable", "the source's /engage answer is not JSON") from None
