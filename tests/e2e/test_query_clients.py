"""The query interface end to end with an existing client library (mixpanel-utils): events
imported and reports read by the library, against `footfall serve` and then against
`footfall query` (the query service alone) on the same data folder. Answers must equal
the oracle's.

mixpanel-utils builds `<formatted_api>/2.0/<endpoint>` with service-account Basic auth
and `project_id`; pointing `formatted_api`/`import_api` at the local server is all the
configuration it needs.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel_utils import MixpanelUtils

from tests import oracle
from tests.e2e.conftest import CREDS, REPO, ServeProcess, free_port
from tests.factories import make_dataset
from tests.integration.query.report_env import diff

pytestmark = pytest.mark.e2e

SA_USER, SA_SECRET = CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"]
TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
DATASET = make_dataset(11, n_events=600, zones={1: "UTC"})
SPEC = DATASET.projects[1]


def client(base: str) -> MixpanelUtils:
    mu = MixpanelUtils(
        SA_SECRET, token=TOKEN, service_account_username=SA_USER, project_id=1, timeout=60, max_retries=1
    )
    mu.formatted_api = base + "/api"
    mu.import_api = base
    return mu


QUERIES: list[tuple[list[str], dict[str, str], Any]] = [
    (
        ["segmentation"],
        {
            "event": "View Item",
            "from_date": SPEC.from_date,
            "to_date": SPEC.to_date,
            "on": 'properties["$browser"]',
            "where": 'properties["plan"] != "free"',
        },
        oracle.segmentation.segmentation,
    ),
    (
        ["segmentation", "numeric"],
        {
            "event": "View Item",
            "from_date": SPEC.from_date,
            "to_date": SPEC.to_date,
            "on": 'properties["amount"]',
            "buckets": "5",
        },
        oracle.segmentation.numeric,
    ),
    (
        ["segmentation", "sum"],
        {"event": "Purchase", "from_date": SPEC.from_date, "to_date": SPEC.to_date, "on": 'properties["price"]'},
        oracle.segmentation.sum_,
    ),
    (
        ["events"],
        {
            "event": '["App Open", "Purchase"]',
            "type": "unique",
            "unit": "week",
            "from_date": SPEC.from_date,
            "to_date": SPEC.to_date,
        },
        oracle.events.events,
    ),
    (
        ["events", "properties"],
        {
            "event": "App Open",
            "name": "$os",
            "type": "general",
            "unit": "day",
            "from_date": SPEC.from_date,
            "to_date": SPEC.to_date,
        },
        oracle.properties.properties,
    ),
]


def check_queries(base: str) -> None:
    mu = client(base)
    for path, params, reference in QUERIES:
        body = orjson.loads(mu.request(mu.formatted_api, list(path), dict(params)))
        expected = reference(SPEC.events, SPEC.tz, params, datetime.now(UTC))
        problems = diff(body, expected)
        assert not problems, f"/{'/'.join(path)}: " + "\n".join(problems[:10])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("clients") / "data"


def test_mixpanel_utils_against_serve(data_dir: Path) -> None:
    server = ServeProcess(data_dir)
    server.start()
    try:
        client(server.base).import_events(copy.deepcopy(SPEC.events), timezone_offset=0)
        check_queries(server.base)
    finally:
        server.stop()


@pytest.fixture
def query_process(data_dir: Path) -> Iterator[str]:
    """`footfall query` on the folder `serve` filled (chDB: one process at a time)."""
    port = free_port()
    env = {**os.environ, **CREDS, "FOOTFALL_DATA_DIR": str(data_dir), "FOOTFALL_LOG_FORMAT": "json"}
    env.pop("FOOTFALL_WAREHOUSE_DSN", None)
    log_path = data_dir.parent / "query.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "footfall.services.cli", "query", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log_path.read_text(errors="replace")
            try:
                if httpx.get(base + "/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_mixpanel_utils_against_footfall_query(query_process: str) -> None:
    check_queries(query_process)
    # The query service alone still answers the interface's error shape.
    r = httpx.get(
        query_process + "/api/2.0/segmentation", params={"project_id": "1", "event": "x"}, auth=(SA_USER, SA_SECRET)
    )
    assert r.status_code == 400 and r.json()["error"] == "Missing required parameter: from_date"


def test_footfall_query_serves_the_management_interface(query_process: str) -> None:
    funnel = {
        "name": "Signup",
        "steps": [{"event": "Sign Up"}, {"event": "Purchase"}],
        "length": 1,
        "length_unit": "day",
    }
    created = httpx.post(query_process + "/api/app/projects/1/funnels", json=funnel, auth=(SA_USER, SA_SECRET))
    assert created.status_code in (200, 201), created.text
    listed = httpx.get(query_process + "/api/query/funnels/list", params={"project_id": "1"}, auth=(SA_USER, SA_SECRET))
    assert {"name": "Signup"}.items() <= next(f for f in listed.json() if f["name"] == "Signup").items()
    denied = httpx.post(query_process + "/api/app/projects/1/funnels", json=funnel, auth=(SA_USER, "wrong"))
    assert denied.status_code == 401 and denied.json()["status"] == "error"
