"""`serve`'s migration jobs, run in a process of their own (the job process).

`serve` holds the store (chDB: a few hundred MB mapped and working memory of its own), so a
job run inside it would be measured and limited with all of that. Instead `JobProcess` starts
`python -m footfall.services.standalone.job_process` on the first job (or at start, when a
crash left jobs to resume), and that process runs the migration `Runner` with its mapping
workers: fetching, inflating, mapping, validating, building rows, choosing profiles. What
needs the store crosses a `Channel` over the child's stdin/stdout:

    serve → job process: submit, get, cancel, resume_all, stop (the `Jobs` of the routes)
    job process → serve: the job store (save, get, of_project) and the ingestion sink
                         (publish, publish_rows: the same streams and store steps as `/import`)

The job process exits when serve goes (its stdin closes, even after a SIGKILL); if it dies
while serve runs, serve starts it again and it resumes the jobs from their saved cursors
(the same rule as after a crash of serve). It reports its metrics to serve every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

from footfall.services.migrate import metrics
from footfall.services.migrate.model import ACTIVE, Job
from footfall.services.migrate.request import MigrationRequest
from footfall.services.migrate.runner import Publisher, RowsPublisher, RunBlocking, Runner
from footfall.services.migrate.settings import MigrateSettings
from footfall.services.migrate.store import JobStore, load_cipher
from footfall.shared.channel import Channel, ChannelClosed
from footfall.shared.errors import NotFoundError, UnavailableError
from footfall.shared.streams import STREAMS, Stream
from footfall.shared.streams.stream import PackedRows

__all__ = ["JobProcess"]

log = structlog.get_logger(__name__)

MODULE = "footfall.services.standalone.job_process"
STOP_SECONDS = 2.0  # within serve's 5 s shutdown budget: its jobs stop (then 1 s to exit), or it is killed
RESTART_SECONDS = (1.0, 300.0)  # backoff between restarts after the job process died
METRICS_SECONDS = 1.0
_STREAMS = {s.name: s for s in STREAMS}


def _stream(name: str) -> Stream[Any]:
    stream = _STREAMS.get(name)
    if stream is None:
        raise ValueError(f"no stream {name[:40]!r}")
    return stream


class JobProcess:
    """serve's side: the routes' `Jobs`, answered by the runner in the job process."""

    def __init__(
        self,
        settings: MigrateSettings,
        store: JobStore,
        run_blocking: RunBlocking,
        sink: Publisher,
        *,
        projects: Callable[[], list[int]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.run_blocking = run_blocking
        self.sink = sink
        self.projects = projects  # the projects whose jobs a restarted job process resumes
        self._process: asyncio.subprocess.Process | None = None
        self._channel: Channel | None = None
        self._starting = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        self._seen: metrics.Totals = {}  # the job process's metric totals counted so far
        self._restarts = 0

    @property
    def pid(self) -> int | None:
        """The job process's, while one runs."""
        return self._process.pid if self._process is not None and self._process.returncode is None else None

    # ------------------------------------------------------------------------------ Jobs
    async def submit(self, req: MigrationRequest, project_id: int) -> Job:
        job: Job = await self._call("submit", req, project_id)
        return job

    async def get(self, project_id: int, job_id: str) -> Job:
        channel = self._channel
        if channel is not None and not channel.closed.is_set():
            with contextlib.suppress(ChannelClosed):  # it died meanwhile: the store answers
                job: Job = await channel.call("get", project_id, job_id)
                return job
        # No job process: no job runs, so the store has every job as it stands.
        found: tuple[Job, str] | None = await self.run_blocking(self.store.get, project_id, job_id)
        if found is None:
            raise NotFoundError(f"no migration job {job_id[:64]!r} in this project")
        return found[0]

    async def cancel(self, project_id: int, job_id: str) -> Job:
        job: Job = await self._call("cancel", project_id, job_id)
        return job

    async def resume_all(self, project_ids: list[int]) -> int:
        """Start the job process only if a previous one left jobs queued or running."""
        for pid in project_ids:
            jobs = await self.run_blocking(self.store.of_project, pid)
            if any(j.state in ACTIVE for j in jobs):
                started: int = await self._call("resume_all", project_ids)
                return started
        return 0

    async def stop(self) -> None:
        self._stopping.set()
        if self._watch is not None:
            self._watch.cancel()
        process, channel = self._process, self._channel
        if process is None or channel is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(channel.call("stop"), STOP_SECONDS)
        await channel.close()  # its stdin closes: it exits
        try:
            await asyncio.wait_for(process.wait(), 1.0)
        except TimeoutError:
            process.kill()
            await process.wait()

    # ------------------------------------------------------------------------------ the process
    async def _call(self, method: str, *args: Any) -> Any:
        channel = await self._started()
        try:
            return await channel.call(method, *args)
        except ChannelClosed as exc:
            raise UnavailableError("the migration job process stopped; retry") from exc

    async def _started(self) -> Channel:
        async with self._starting:
            if self._stopping.is_set():
                raise UnavailableError("the service is stopping")
            if self._channel is not None and not self._channel.closed.is_set():
                return self._channel
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,  # a terminal's Ctrl-C goes to serve, which stops it in order
            )
            if process.stdout is None or process.stdin is None:  # both are pipes: asked for above
                raise UnavailableError("the migration job process has no pipes")
            channel = Channel(process.stdout, process.stdin, self._handle, name="job-process")
            channel.start()
            takes_rows = isinstance(self.sink, RowsPublisher)
            try:
                await channel.call("start", self.settings, takes_rows)
            except ChannelClosed as exc:
                process.kill()
                await process.wait()
                raise UnavailableError("the migration job process did not start") from exc
            self._process, self._channel, self._seen = process, channel, {}
            self._watch = asyncio.create_task(self._watch_process(process, channel, time.monotonic()))
            log.info("migrate_job_process_started", pid=process.pid)
            return channel

    async def _watch_process(self, process: asyncio.subprocess.Process, channel: Channel, started: float) -> None:
        """A job process that dies while serve runs is started again; its jobs resume."""
        code = await process.wait()
        await channel.close()
        if self._stopping.is_set():
            return
        if self._channel is channel:  # (a request may have started the next one already)
            self._channel = self._process = None
        log.error("migrate_job_process_died", pid=process.pid, code=code)
        self._restarts = 0 if time.monotonic() - started > 600 else self._restarts + 1
        low, high = RESTART_SECONDS
        await asyncio.sleep(min(high, low * 2 ** min(self._restarts, 10)))
        if self._stopping.is_set():
            return
        try:
            await self.resume_all(self.projects())
        except Exception as exc:  # the next request or restart tries again
            log.error("migrate_job_process_restart_failed", error=str(exc)[:500])

    async def _handle(self, method: str, args: tuple[Any, ...]) -> Any:
        """What the job process may ask of serve (nothing else)."""
        if method == "save":
            return await self.run_blocking(self.store.save, *args)
        if method == "get":
            return await self.run_blocking(self.store.get, *args)
        if method == "of_project":
            return await self.run_blocking(self.store.of_project, *args)
        if method == "publish":
            name, items = args
            return await self.sink.publish(_stream(name), items)
        if method == "publish_rows":
            name, packed = args
            if not isinstance(self.sink, RowsPublisher) or not isinstance(packed, PackedRows):
                raise ValueError("this sink takes no rows")
            return await self.sink.publish_rows(_stream(name), packed)
        if method == "hot_columns":
            if not isinstance(self.sink, RowsPublisher):
                raise ValueError("this sink takes no rows")
            return await self.sink.hot_columns()
        if method == "metrics":
            (reported,) = args
            metrics.add_totals(reported, self._seen)
            return None
        raise ValueError(f"no method {method[:40]!r}")


# ---------------------------------------------------------------------------------- job process
class _RemoteStore:
    """The job store in serve (a `JobStore`: blocking, so called from the runner's threads)."""

    def __init__(self, channel: Channel, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = channel
        self.loop = loop

    def _call(self, method: str, *args: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(self.channel.call(method, *args), self.loop).result()

    def save(self, job: Job, sealed: str | None) -> None:
        self._call("save", job, sealed)

    def get(self, project_id: int, job_id: str) -> tuple[Job, str] | None:
        found: tuple[Job, str] | None = self._call("get", project_id, job_id)
        return found

    def of_project(self, project_id: int) -> list[Job]:
        jobs: list[Job] = self._call("of_project", project_id)
        return jobs


class _RemoteSink:
    """serve's ingestion sink (a `Publisher`, and a `RowsPublisher`)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    async def publish(self, stream: Stream[Any], items: list[Any]) -> dict[int, str]:
        refused: dict[int, str] = await self.channel.call("publish", stream.name, items)
        return refused

    async def publish_rows(self, stream: Stream[Any], packed: PackedRows) -> None:
        await self.channel.call("publish_rows", stream.name, packed)

    async def hot_columns(self) -> tuple[tuple[str, str], ...]:
        hot: tuple[tuple[str, str], ...] = await self.channel.call("hot_columns")  # pickled: tuples stay tuples
        return hot


async def _report_metrics(channel: Channel) -> None:
    last: metrics.Totals = {}
    while True:
        await asyncio.sleep(METRICS_SECONDS)
        now = metrics.totals()
        if now != last:
            await channel.notify("metrics", now)
            last = now


async def _serve_jobs(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    from footfall.services.worker.enrich import open_enricher
    from footfall.shared.logging import configure_logging

    runner: Runner | None = None
    reporting: asyncio.Task[None] | None = None

    async def handle(method: str, args: tuple[Any, ...]) -> Any:
        nonlocal runner, reporting
        if method == "start":
            settings, takes_rows = args
            configure_logging(settings.log.level, settings.log.format)
            cipher = load_cipher(settings.key, settings.store.data_dir)
            store = _RemoteStore(channel, asyncio.get_running_loop())
            runner = Runner(
                store,
                asyncio.to_thread,
                _RemoteSink(channel),
                settings,
                cipher,
                open_locator=open_enricher if takes_rows else None,
            )
            reporting = asyncio.create_task(_report_metrics(channel))
            return None
        if runner is None:
            raise UnavailableError("the job process has not started")
        if method == "submit":
            return await runner.submit(*args)
        if method == "get":
            return await runner.get(*args)
        if method == "cancel":
            return await runner.cancel(*args)
        if method == "resume_all":
            return await runner.resume_all(*args)
        if method == "stop":
            await runner.stop()
            await channel.notify("metrics", metrics.totals())  # what the last second counted
            return None
        raise ValueError(f"no method {method[:40]!r}")

    channel = Channel(reader, writer, handle, name="serve")
    channel.start()
    await channel.closed.wait()  # serve is gone or stopped us
    if reporting is not None:
        reporting.cancel()
    if runner is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner.stop(), STOP_SECONDS)


async def _main(channel_fd: int) -> None:
    structlog.contextvars.bind_contextvars(process="migrate-jobs")  # its lines in serve's log say whose they are
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    out = os.fdopen(channel_fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    await _serve_jobs(reader, writer)


if __name__ == "__main__":
    # The channel keeps the real stdout; anything printed goes to stderr (serve's log).
    fd = os.dup(1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # serve decides when its jobs stop
    asyncio.run(_main(fd))
    sys.stderr.flush()
    os._exit(0)  # threads still reading a staged file do not hold the exit
