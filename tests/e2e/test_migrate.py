"""The migration service end to end: `footfall serve` subprocesses, the Amplitude Export API
stand-in, and a second Footfall deployment as a Mixpanel-compatible source.

1. An Amplitude job on a 6-day window is interrupted by SIGKILL mid-way; the restarted
   process resumes it by itself (same id, from its first unfinished chunk). Afterwards the
   reports on the migrated data equal the oracles' answers on the reference events
   (`tests/integration/migrate/reference.py`, plain Python from §14.4) and the profiles equal
   the §14.5 reference.
2. `footfall migrate mixpanel --source-url …` (the CLI, following with a progress bar) copies
   that project into a second deployment: the same reports and profiles again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests import oracle
from tests.e2e.conftest import CREDS, REPO, ServeProcess
from tests.integration.migrate import reference
from tests.integration.migrate.fake_amplitude import API_KEY, SECRET_KEY, Dataset, Faults, amplitude_app, serve
from tests.integration.query.report_env import diff

pytestmark = pytest.mark.e2e

TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
FIRST = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 6
FROM, TO = FIRST.date().isoformat(), (FIRST + timedelta(days=DAYS - 1)).date().isoformat()
DATA = Dataset.generate(FIRST, DAYS, per_day=250, seed=11)

STATUS = [sys.executable, "-m", "footfall.services.cli", "migrate", "status"]
QUERIES: list[tuple[str, dict[str, str], Any]] = [
    (
        "segmentation",
        {
            "event": "Viewed page",
            "from_date": FROM,
            "to_date": TO,
            "on": 'properties["tier"]',
            "where": 'properties["mp_country_code"] != "DE"',
        },
        oracle.segmentation.segmentation,
    ),
    (
        "segmentation/sum",
        {"event": "Purchased", "from_date": FROM, "to_date": TO, "on": 'properties["amount"]'},
        oracle.segmentation.sum_,
    ),
    (
        "events",
        {
            "event": '["Signed up", "session_start", "[Experiment] Exposure"]',
            "type": "unique",
            "unit": "day",
            "from_date": FROM,
            "to_date": TO,
        },
        oracle.events.events,
    ),
    (
        "events/properties",
        {"event": "Purchased", "name": "$os", "type": "general", "unit": "day", "from_date": FROM, "to_date": TO},
        oracle.properties.properties,
    ),
]


@pytest.fixture(scope="module")
def source() -> Iterator[tuple[str, Faults]]:
    faults = Faults(burst_429=1, slow=0.4)
    with serve(amplitude_app(DATA, faults)) as url:
        yield url, faults


def wait_for(base: str, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = httpx.get(f"{base}/migrate/jobs/{job_id}", auth=(TOKEN, ""), timeout=10)
        assert r.status_code == 200, r.text
        job: dict[str, Any] = r.json()["results"]
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def check_reports(base: str, events: list[dict[str, Any]]) -> None:
    for path, params, ref in QUERIES:
        r = httpx.get(f"{base}/api/2.0/{path}", params={"project_id": "1", **params}, auth=SA, timeout=30)
        assert r.status_code == 200, r.text
        problems = diff(r.json(), ref(events, "UTC", params, datetime.now(UTC)))
        assert not problems, f"/{path}: " + "\n".join(problems[:10])


def profiles(base: str) -> dict[str, dict[str, Any]]:
    r = httpx.post(f"{base}/api/2.0/engage", data={"project_id": "1"}, auth=SA, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == len(body["results"])
    return {p["$distinct_id"]: p["$properties"] for p in body["results"]}


def expected_profiles() -> dict[str, dict[str, Any]]:
    chunks: dict[str, list[dict[str, Any]]] = {}
    for hour in sorted(DATA.by_hour):
        if hour[:8] <= TO.replace("-", ""):
            chunks.setdefault(hour[:8], []).extend(DATA.by_hour[hour])
    return reference.expected_profiles([chunks[k] for k in sorted(chunks)])


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_amplitude_then_footfall_as_a_mixpanel_source(tmp_path: Path, source: tuple[str, Faults]) -> None:
    url, faults = source
    env = {"FOOTFALL_MIGRATE_AMPLITUDE_URL": url, "FOOTFALL_MIGRATE_BACKOFF_BASE": "0.05"}
    first = ServeProcess(tmp_path / "a", env=env)
    first.start()
    try:
        body = {
            "AMPLITUDE_API_KEY": API_KEY,
            "AMPLITUDE_API_SECRET": SECRET_KEY,
            "MIXPANEL_TOKEN": TOKEN,
            "START_DATE": FROM,
            "END_DATE": TO,
        }
        r = httpx.post(f"{first.base}/migrate/amplitude", json=body, timeout=10)
        assert r.status_code == 202, r.text
        job_id = r.json()["results"]["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # SIGKILL once two chunks are committed
            job = httpx.get(f"{first.base}/migrate/jobs/{job_id}", auth=(TOKEN, ""), timeout=10).json()["results"]
            if job["counts"]["chunks_done"] >= 2:
                break
            time.sleep(0.1)
        assert first.proc is not None
        job_process = children(first.proc.pid)  # serve's job process, and its mapping workers
        workers = job_process + [w for p in job_process for w in children(p)]
        assert len(job_process) == 1 and len(workers) > 1
        first.proc.kill()
        first.proc.wait()
        first.proc = None
        gone = time.monotonic() + 10
        while any(map(alive, workers)) and time.monotonic() < gone:
            time.sleep(0.2)
        assert not any(map(alive, workers))  # none outlives serve
        assert job["state"] == "running" and job["counts"]["chunks_done"] < DAYS
        requests_before = len(faults.requests)
        first.start()  # the job resumes by itself
        done = wait_for(first.base, job_id)
        assert done["state"] == "succeeded", done["error"]
        assert done["counts"]["chunks_done"] == done["counts"]["chunks_total"] == DAYS
        resumed_from = faults.requests[requests_before][0]
        assert resumed_from >= (FIRST + timedelta(days=2)).strftime("%Y%m%dT00")  # not from the start

        expected, invalid = reference.expected_events(DATA.uploaded(FIRST, DAYS), job_id)
        assert done["counts"]["events_invalid"] == invalid
        events = [reference.as_import(e) for e in expected.values()]
        check_reports(first.base, events)
        assert profiles(first.base) == expected_profiles()

        # Footfall as a Mixpanel-compatible source, through the CLI into a second deployment.
        second = ServeProcess(tmp_path / "b", env={"FOOTFALL_MIGRATE_SOURCE_ALLOWLIST": "127.0.0.1"})
        second.start()
        try:
            cli = [
                sys.executable,
                "-m",
                "footfall.services.cli",
                "migrate",
                "mixpanel",
                "--api-key",
                SA[0],
                "--api-secret",
                SA[1],
                "--project-id",
                "1",
                "--source-url",
                first.base,
                "--project-token",
                TOKEN,
                "--from",
                FROM,
                "--to",
                TO,
                "--url",
                second.base,
            ]
            run = subprocess.run(cli, cwd=REPO, capture_output=True, timeout=180, check=False)
            assert run.returncode == 0, run.stderr.decode()[-2000:]
            copied = orjson.loads(run.stdout)
            assert copied["state"] == "succeeded" and copied["counts"]["events_imported"] == len(expected)
            assert copied["counts"]["chunks_total"] == DAYS + 1 and copied["source_host"] == "127.0.0.1"
            check_reports(second.base, events)
            assert profiles(second.base) == expected_profiles()
            status = subprocess.run(
                [*STATUS, copied["id"], "--project-token", TOKEN, "--url", second.base],
                cwd=REPO,
                capture_output=True,
                timeout=60,
                check=False,
            )
            assert status.returncode == 0 and orjson.loads(status.stdout)["id"] == copied["id"]
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.mark.kafka
@pytest.mark.redis
def test_distributed_shape_imports_through_kafka_and_a_rerun_adds_nothing(
    tmp_path: Path, source: tuple[str, Faults], kafka_bootstrap: str, redis_url: str
) -> None:
    """`footfall serve` with Kafka: the job publishes to the events and profiles topics, the
    in-process workers dedup (Redis) and insert. Running the window twice stores each event once."""
    url, _ = source
    env = {
        "FOOTFALL_MIGRATE_AMPLITUDE_URL": url,
        "FOOTFALL_MIGRATE_BACKOFF_BASE": "0.05",
        "FOOTFALL_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "FOOTFALL_KAFKA_TOPIC_PREFIX": f"mig{time.time_ns() % 10**9}.",
        "FOOTFALL_REDIS_URL": redis_url,
    }
    server = ServeProcess(tmp_path / "d", env=env)
    server.start()
    try:
        last = (FIRST + timedelta(days=1)).date().isoformat()
        body = {"AMPLITUDE_API_KEY": API_KEY, "AMPLITUDE_API_SECRET": SECRET_KEY, "MIXPANEL_TOKEN": TOKEN}
        body |= {"START_DATE": FROM, "END_DATE": last}
        ids = []
        for _ in range(2):
            r = httpx.post(f"{server.base}/migrate/amplitude", json=body, timeout=10)
            assert r.status_code == 202, r.text
            done = wait_for(server.base, r.json()["results"]["id"])
            assert done["state"] == "succeeded", done["error"]
            ids.append(done["id"])
        assert ids[0] != ids[1]  # a succeeded job is not resumed: the window ran twice
        expected, _ = reference.expected_events(DATA.uploaded(FIRST, 2), ids[0])
        deadline, rows = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            params = {"project_id": "1", "from_date": FROM, "to_date": last}
            r = httpx.get(f"{server.base}/api/2.0/export", params=params, auth=SA, timeout=30)
            assert r.status_code == 200, r.text
            rows = [orjson.loads(line) for line in r.content.splitlines() if line.strip()]
            if len(rows) >= len(expected):
                break
            time.sleep(1)
        stored = sorted((e["properties"]["$insert_id"], e["event"], e["properties"]["distinct_id"]) for e in rows)
        assert stored == sorted((i, e["event"], e["distinct_id"]) for i, e in expected.items())
    finally:
        server.stop()
