"""Amplitude migration jobs against the Export API stand-in, through the real runner.

The sink collects what a job publishes (the ingestion streams' validated items), the job store
is the in-memory twin; every published event and the profiles the updates make are compared
with `reference.py` (plain Python from §14.4/§14.5) on generated data with the faults §14.3
names: empty hours (404), a 429 burst, a day answering 504 (split into hours), a connection
dropped mid-body, an oversized hour (the job fails, the same request resumes it).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.migrate import metrics
from footfall.services.migrate.model import FINAL
from footfall.services.migrate.request import parse_request
from footfall.services.migrate.runner import Runner
from footfall.services.migrate.settings import MigrateSettings
from footfall.services.migrate.store import Cipher, WarehouseJobStore
from footfall.services.standalone.job_process import JobProcess
from footfall.services.worker.enrich import open_enricher
from footfall.shared.errors import NotFoundError, UnavailableError
from footfall.shared.events import Event
from footfall.shared.profiles.updates import ProfileUpdate
from footfall.shared.streams import EVENTS, USER_UPDATES, Stream
from footfall.shared.streams.stream import PackedRows, insert_packed
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.integration.migrate import reference
from tests.integration.migrate.fake_amplitude import API_KEY, SECRET_KEY, Dataset, Faults, amplitude_app, serve
from tests.oracle._common import to_ms

FIRST = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 4
pytestmark = pytest.mark.warehouse  # the jobs live in the real `migration_jobs` table (chDB)

KEY = b"ZmRmZGZkZmRmZGZkZmRmZGZkZmRmZGZkZmRmZGZkZmQ="  # a fixed Fernet key (tests only)


class Collector:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.updates: list[ProfileUpdate] = []

    async def publish(self, stream: Stream[Any], items: list[Any]) -> dict[int, str]:
        if stream is EVENTS:
            self.events.extend(items)
        elif stream is USER_UPDATES:
            self.updates.extend(items)
        return {}


@pytest.fixture(scope="module")
def data() -> Dataset:
    return Dataset.generate(FIRST, DAYS, per_day=150)


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def source(data: Dataset, faults: Faults) -> Iterator[str]:
    with serve(amplitude_app(data, faults)) as url:
        yield url


def settings(url: str, **over: Any) -> MigrateSettings:
    base = MigrateSettings(amplitude_url=url, amplitude_eu_url=url, backoff_base=0.01, backoff_max=0.05, retries=4)
    base = replace(base, destination_patience=0.2)
    return replace(base, **over)


def body(**over: Any) -> bytes:
    import orjson

    fields = {
        "AMPLITUDE_API_KEY": API_KEY,
        "AMPLITUDE_API_SECRET": SECRET_KEY,
        "MIXPANEL_TOKEN": "destination-token",
        "START_DATE": FIRST.date().isoformat(),
        "END_DATE": (FIRST + timedelta(days=DAYS - 1)).date().isoformat(),
    } | over
    return orjson.dumps(fields)


async def run_job(runner: Runner, raw: bytes, project_id: int = 1) -> Any:
    req = parse_request("amplitude", raw, today=date(2026, 11, 26))
    job = await runner.submit(req, project_id)
    await runner.tasks[job.id]
    return await runner.get(project_id, job.id)


@pytest.fixture
def store(clean_warehouse: ClickHouseWarehouse) -> WarehouseJobStore:
    return WarehouseJobStore(clean_warehouse)


def new_runner(url: str, sink: Collector, store: WarehouseJobStore, **over: Any) -> Runner:
    return Runner(store, store.warehouse.run, sink, settings(url, **over), Cipher(KEY))


def published(events: list[Event]) -> dict[str, dict[str, Any]]:
    return {
        e.insert_id: {
            "event": e.event,
            "time_ms": e.time_ms,
            "distinct_id": e.distinct_id,
            "insert_id": e.insert_id,
            "properties": e.properties,
            "ip": e.ip,
        }
        for e in events
    }


def profiles_of(updates: list[ProfileUpdate]) -> dict[str, dict[str, Any]]:
    """Fold `$set` updates: per property the value of the newest `$time` (then the later one)."""
    slots: dict[str, dict[str, tuple[int, Any]]] = {}
    for u in updates:
        assert u.op == "$set" and u.ignore_time
        slot = slots.setdefault(u.profile_id, {})
        for k, v in u.value.items():
            if k not in slot or u.time_ms >= slot[k][0]:
                slot[k] = (u.time_ms, v)
    return {p: {k: v for k, (_, v) in s.items()} for p, s in slots.items()}


def chunks_of(data: Dataset, split_days: set[str]) -> list[list[dict[str, Any]]]:
    """The records per chunk: a UTC upload day, or an upload hour on a split day."""
    chunks: dict[str, list[dict[str, Any]]] = {}
    for hour in sorted(data.by_hour):
        if hour[:8] > (FIRST + timedelta(days=DAYS - 1)).strftime("%Y%m%d"):
            continue
        key = hour if hour[:8] in split_days else hour[:8]
        chunks.setdefault(key, []).extend(data.by_hour[hour])
    return [chunks[k] for k in sorted(chunks)]


def test_a_migration_with_faults_imports_exactly_the_reference(
    data: Dataset, faults: Faults, source: str, store: WarehouseJobStore
) -> None:
    split = (FIRST + timedelta(days=1)).strftime("%Y%m%d")
    faults.burst_429 = 2
    faults.split_days = {split}
    faults.drop_once = {(FIRST + timedelta(days=2)).strftime("%Y%m%dT00")}
    sink = Collector()
    runner = new_runner(source, sink, store)
    job = asyncio.run(run_job(runner, body()))

    expected, invalid = reference.expected_events(data.uploaded(FIRST, DAYS), job.id)
    assert job.state == "succeeded", job.error
    assert published(sink.events) == expected
    c = job.counts
    assert (c.chunks_total, c.chunks_done) == (DAYS + 23, DAYS + 23)  # one day became 24 hours
    assert c.events_read == len(data.uploaded(FIRST, DAYS))
    assert c.events_imported == len(expected) and c.events_invalid == invalid
    assert c.source_retries >= 3  # two 429s and the dropped body
    assert c.first_event_time == min(e["time_ms"] for e in expected.values())
    assert profiles_of(sink.updates) == reference.expected_profiles(chunks_of(data, {split}))
    assert c.profiles_updated == len(reference.expected_profiles(chunks_of(data, {split})))
    assert job.source_host == "127.0.0.1" and job.public()["counts"]["bytes_downloaded"] > 0
    assert "api_secret" not in str(job.public()) and SECRET_KEY not in str(job.public())
    # hours requested only for the split day; empty hours answered 404 and counted as done
    hours = [r for r in faults.requests if r[0] == r[1]]
    assert hours and all(h[0][:8] == split for h in hours) and len(hours) == 24

    # re-running the window (a new job) publishes the same events: the dedup keys are the same
    again = Collector()
    second = asyncio.run(run_job(new_runner(source, again, store), body()))
    assert {e.insert_id for e in again.events} == set(expected)
    assert {(e.insert_id, e.time_ms, e.distinct_id, e.event) for e in again.events} == {
        (e.insert_id, e.time_ms, e.distinct_id, e.event) for e in sink.events
    }
    assert second.id != job.id


def with_ties(data: Dataset) -> Dataset:
    """A copy where about a third of each user's records share the time of that user's previous
    record of the day: the latest record of a chunk is then decided by its line (§14.5)."""
    import copy

    tied = Dataset()
    last: dict[tuple[str, Any], dict[str, Any]] = {}
    for hour in sorted(data.by_hour):
        for n, rec in enumerate(data.by_hour[hour]):
            rec = copy.deepcopy(rec)
            key = (hour[:8], rec.get("user_id"))
            before = last.get(key)
            if before is not None and n % 3 == 0:
                for k in ("event_time", "client_event_time", "server_received_time", "server_upload_time"):
                    rec[k] = before[k]
            last[key] = rec
            tied.by_hour[hour].append(rec)
    return tied


def test_many_blocks_and_publishes_per_chunk_import_exactly_the_reference(
    data: Dataset, store: WarehouseJobStore
) -> None:
    """Blocks of a few lines spread over the mapping workers, gathered into publishes of 7
    events (one publishing while the next is gathered), users' records tied on time across
    blocks: the same events and profiles as the reference."""
    tied = with_ties(data)
    sink = Collector()
    with serve(amplitude_app(tied, Faults())) as url:
        runner = new_runner(url, sink, store, block_bytes=2048, publish_events=7)
        job = asyncio.run(run_job(runner, body()))
    expected, invalid = reference.expected_events(tied.uploaded(FIRST, DAYS), job.id)
    assert job.state == "succeeded", job.error
    assert published(sink.events) == expected
    assert job.counts.events_imported == len(expected) and job.counts.events_invalid == invalid
    assert profiles_of(sink.updates) == reference.expected_profiles(chunks_of(tied, set()))


class RowsCollector(Collector):
    """A sink that stores rows built by the mapping workers (as the embedded store does): it
    reads each publish's Native blocks back, and with a `warehouse` also inserts them there
    through the embedded store's own step."""

    def __init__(self, warehouse: ClickHouseWarehouse | None = None, hot: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__()
        self.inserts: list[dict[str, list[Any]]] = []
        self.warehouse = warehouse
        self.hot = hot
        self.hot_inserts = 0  # publishes whose rows carried the hot columns' values

    async def hot_columns(self) -> tuple[tuple[str, str], ...]:
        return self.hot

    async def publish_rows(self, stream: Stream[Any], packed: PackedRows) -> None:
        assert stream is EVENTS
        if self.warehouse is not None:
            await self.warehouse.run(insert_packed, self.warehouse, EVENTS.table, packed)
        columns = packed.unpack()  # as the table reads them: times as naive UTC datetimes
        if packed.columns is not None:  # the table's, then the hot ones the workers filled
            assert packed.columns == (*EVENTS.table.column_names, *(c for _, c in self.hot)) == tuple(columns)
            self.hot_inserts += 1
            columns = {name: columns[name] for name in EVENTS.table.column_names}
        assert list(columns) == list(EVENTS.table.column_names) and len(columns["insert_id"]) == packed.rows
        columns["time"] = [to_ms(t.replace(tzinfo=UTC)) for t in columns["time"]]
        self.inserts.append(columns)


def test_worker_built_rows_are_gathered_into_publishes_of_the_set_size(data: Dataset, store: WarehouseJobStore) -> None:
    sink = RowsCollector(store.warehouse)
    with serve(amplitude_app(data, Faults())) as url:
        runner = new_runner(url, sink, store, block_bytes=2048, publish_events=40)
        runner = Runner(store, store.warehouse.run, sink, runner.settings, Cipher(KEY), open_locator=open_enricher)
        job = asyncio.run(run_job(runner, body()))
    expected, _ = reference.expected_events(data.uploaded(FIRST, DAYS), job.id)
    assert job.state == "succeeded", job.error and not sink.events
    assert sorted(i for rows in sink.inserts for i in rows["insert_id"]) == sorted(expected)
    sizes = [len(rows["insert_id"]) for rows in sink.inserts]
    assert len(sizes) >= DAYS * 2 and max(sizes) < 40 + 30  # a publish: 40 events and the block that passed them
    got = {
        i: (e, t, d)
        for rows in sink.inserts
        for i, e, t, d in zip(*(rows[k] for k in ("insert_id", "event", "time", "distinct_id")), strict=True)
    }
    assert got == {i: (e["event"], e["time_ms"], e["distinct_id"]) for i, e in expected.items()}
    stored = store.warehouse.query("SELECT insert_id FROM events WHERE project_id = 1 ORDER BY insert_id")
    assert [i for (i,) in stored] == sorted(expected)  # the blocks as inserted, every publish whole
    assert profiles_of(sink.updates) == reference.expected_profiles(chunks_of(data, set()))


def test_an_oversized_hour_fails_the_job_and_the_same_request_resumes_it(
    data: Dataset, faults: Faults, source: str, store: WarehouseJobStore
) -> None:
    day = (FIRST + timedelta(days=2)).strftime("%Y%m%d")
    faults.too_large_days = {day}
    faults.too_large_hours = {f"{day}T05"}
    sink = Collector()

    async def scenario() -> tuple[Any, Any, int]:
        runner = new_runner(source, sink, store)
        failed = await run_job(runner, body())
        requests_before = len(faults.requests)
        faults.too_large_hours.clear()
        resumed = await run_job(runner, body())
        return failed, resumed, requests_before

    failed, resumed, before = asyncio.run(scenario())
    assert failed.state == "failed" and failed.error.code == "hour_too_large"
    assert failed.error.chunk == f"{day}T05"
    assert failed.counts.chunks_done == 2 + 5  # two days, then hours 00–04 of the third
    assert resumed.id == failed.id and resumed.state == "succeeded"
    later = faults.requests[before:]
    assert later[0] == (f"{day}T05", f"{day}T05")  # from the first unfinished chunk
    expected, _ = reference.expected_events(data.uploaded(FIRST, DAYS), failed.id)
    assert published(sink.events) == expected  # nothing lost, nothing twice
    assert store.get(1, failed.id) is not None and store.get(1, failed.id)[1] == ""  # credentials erased


def test_dry_run_reads_everything_and_writes_nothing(data: Dataset, source: str, store: WarehouseJobStore) -> None:
    sink = Collector()
    job = asyncio.run(run_job(new_runner(source, sink, store, event_limit=10), body(DRY_RUN="true")))
    expected, invalid = reference.expected_events(data.uploaded(FIRST, DAYS), job.id)
    profiles = reference.expected_profiles(chunks_of(data, set()))
    assert job.state == "succeeded" and sink.events == [] and sink.updates == []
    c = job.counts
    assert (c.events_to_import, c.events_imported, c.profiles_to_update, c.profiles_updated) == (
        len(expected),
        0,
        len(profiles),
        0,
    )
    # past the event limit: DRY_RUN counts on
    assert c.events_invalid == invalid and c.events_read == len(data.uploaded(FIRST, DAYS))


def test_limits_rejections_and_the_region_fallback(data: Dataset, source: str, store: WarehouseJobStore) -> None:
    sink = Collector()
    limited = asyncio.run(run_job(new_runner(source, sink, store, event_limit=100), body()))
    assert limited.state == "failed" and limited.error.code == "event_limit_exceeded"
    assert len(sink.events) < 100

    rejected = asyncio.run(run_job(new_runner(source, Collector(), store), body(AMPLITUDE_API_SECRET="wrong")))
    assert rejected.state == "failed" and rejected.error.code == "source_credentials_rejected"

    # REGION EU may name the destination's region: the EU host rejects the keys, the US host is tried
    # once; with SOURCE_REGION the region is the source's own, and the rejection fails the job.
    async def refuse(request: Request) -> Response:
        return Response("Invalid credentials", status_code=401)

    with serve(Starlette(routes=[Route("/api/2/export", refuse)])) as eu:
        one_day = FIRST.date().isoformat()
        job = asyncio.run(
            run_job(new_runner(source, Collector(), store, amplitude_eu_url=eu), body(REGION="eu", END_DATE=one_day))
        )
        assert job.state == "succeeded", job.error
        assert job.counts.events_imported > 0
        explicit = asyncio.run(
            run_job(
                new_runner(source, Collector(), store, amplitude_eu_url=eu), body(SOURCE_REGION="EU", END_DATE=one_day)
            )
        )
        assert explicit.state == "failed" and explicit.error.code == "source_credentials_rejected"


def test_cancel_stops_a_running_job_and_the_same_request_resumes_it(
    data: Dataset, faults: Faults, source: str, store: WarehouseJobStore
) -> None:
    faults.slow = 0.2
    sink = Collector()

    async def scenario() -> tuple[Any, Any]:
        runner = new_runner(source, sink, store)
        req = parse_request("amplitude", body(), today=date(2026, 11, 26))
        job = await runner.submit(req, 1)
        while job.counts.chunks_done < 1:
            await asyncio.sleep(0.05)
        cancelled = await runner.cancel(1, job.id)
        kept = await store.warehouse.run(store.get, 1, job.id)
        assert kept is not None and kept[1] != ""  # resumable: the sealed credentials are kept
        faults.slow = 0.0
        return cancelled, await run_job(runner, body())

    cancelled, resumed = asyncio.run(scenario())
    assert cancelled.state == "cancelled" and 1 <= cancelled.counts.chunks_done < DAYS
    assert resumed.id == cancelled.id and resumed.state == "succeeded"
    expected, _ = reference.expected_events(data.uploaded(FIRST, DAYS), cancelled.id)
    assert published(sink.events) == expected


class Flaky(Collector):
    """Unavailable for the first `failures` publishes (a broker still connecting), or always."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def publish(self, stream: Stream[Any], items: list[Any]) -> dict[int, str]:
        if self.failures:
            self.failures -= 1
            raise UnavailableError()
        return await super().publish(stream, items)


def test_an_unavailable_destination_is_retried_then_fails_the_job(
    data: Dataset, source: str, store: WarehouseJobStore
) -> None:
    one_day = body(END_DATE=FIRST.date().isoformat())
    flaky = Flaky(failures=2)
    job = asyncio.run(run_job(new_runner(source, flaky, store), one_day))
    expected, _ = reference.expected_events(data.uploaded(FIRST, 1), job.id)
    assert job.state == "succeeded" and published(flaky.events) == expected

    down = Flaky(failures=10**6)
    failed = asyncio.run(run_job(new_runner(source, down, store, retries=2), one_day, project_id=2))
    assert failed.state == "failed" and failed.error.code == "destination_unavailable"
    assert failed.counts.chunks_done == 0 and failed.error.chunk == FIRST.date().isoformat()


def inserted_ids(sink: RowsCollector) -> list[str]:
    return [i for rows in sink.inserts for i in rows["insert_id"]]


async def until_final(jobs: JobProcess, job_id: str, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        job = await jobs.get(1, job_id)
        if job.state in FINAL or time.monotonic() > deadline:
            return job
        await asyncio.sleep(0.1)


def test_serve_runs_jobs_in_a_job_process_of_their_own(data: Dataset, source: str, store: WarehouseJobStore) -> None:
    """serve's `JobProcess`: the runner in a child process; the store and the sink stay here. The
    workers fill the store's hot columns (asked of this process) in the rows they build."""
    sink = RowsCollector(hot=(("$os", "hp_os"), ("absent", "hp_absent")))
    jobs = JobProcess(settings(source, key=KEY.decode()), store, store.warehouse.run, sink, projects=lambda: [1])
    imported = metrics.EVENTS_IMPORTED.labels("amplitude")

    async def scenario() -> tuple[Any, int | None, float]:
        assert await jobs.resume_all([1]) == 0 and jobs.pid is None  # nothing to resume: no process
        with pytest.raises(NotFoundError):
            await jobs.get(1, "no-such-job")
        before = imported._value.get()
        job = await jobs.submit(parse_request("amplitude", body(), today=date(2026, 11, 26)), 1)
        pid = jobs.pid
        assert pid is not None and pid != os.getpid()
        done = await until_final(jobs, job.id)
        deadline = time.monotonic() + 10  # the job process reports its metrics every second
        while imported._value.get() - before < done.counts.events_imported and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await jobs.stop()
        return done, pid, imported._value.get() - before

    done, pid, counted = asyncio.run(scenario())
    expected, invalid = reference.expected_events(data.uploaded(FIRST, DAYS), done.id)
    assert done.state == "succeeded", done.error
    assert done.counts.events_imported == len(expected) == counted and done.counts.events_invalid == invalid
    assert not sink.events and sorted(inserted_ids(sink)) == sorted(expected)  # rows built by its workers
    assert sink.hot_inserts > 0
    assert profiles_of(sink.updates) == reference.expected_profiles(chunks_of(data, set()))
    assert store.get(1, done.id)[0].state == "succeeded"  # its state lives in this process's store
    assert not Path(f"/proc/{pid}").exists() or "(Z)" in Path(f"/proc/{pid}/stat").read_text()  # it exited


def test_a_job_process_that_dies_is_started_again_and_resumes_its_job(
    data: Dataset, faults: Faults, source: str, store: WarehouseJobStore
) -> None:
    faults.slow = 0.3  # per answer: the job is still running when its process is killed
    sink = RowsCollector()
    jobs = JobProcess(settings(source, key=KEY.decode()), store, store.warehouse.run, sink, projects=lambda: [1])

    async def scenario() -> tuple[Any, int, int | None]:
        job = await jobs.submit(parse_request("amplitude", body(), today=date(2026, 11, 26)), 1)
        while (await jobs.get(1, job.id)).counts.chunks_done < 1:
            await asyncio.sleep(0.05)
        first = jobs.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        done = await until_final(jobs, job.id)
        second = jobs.pid
        await jobs.stop()
        return done, first, second

    done, first, second = asyncio.run(scenario())
    expected, _ = reference.expected_events(data.uploaded(FIRST, DAYS), done.id)
    assert done.state == "succeeded", done.error
    assert second is not None and second != first
    assert done.counts.chunks_done == DAYS and done.counts.events_imported == len(expected)
    assert set(inserted_ids(sink)) == set(expected)  # a chunk redone after the kill adds copies, never gaps
    assert profiles_of(sink.updates) == reference.expected_profiles(chunks_of(data, set()))
