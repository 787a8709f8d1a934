"""Per-project retention (issue 16): expired events leave every report and export, the
counts and known ids kept by materialised views expire with them, other projects keep
everything, and removing the period stops expiring (against the oracles, on generated data
spread over the last seven weeks of the real clock, since TTL compares with the real now).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.app.operations import Management
from footfall.services.app.retention import retention_routes
from footfall.services.app.saved import MANAGEMENT
from footfall.shared.auth import Authenticator
from footfall.shared.config import RegionSettings
from footfall.shared.metadata import MetadataRepository
from footfall.shared.retention import RetentionError, load_periods, set_period
from footfall.shared.schema.retention import ttl_rules
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.web import build_starlette
from tests import oracle
from tests.factories import Dataset, ProjectSpec, make_dataset, time_to_ms
from tests.integration.query.report_env import ReportEnv, build_env, check_against_oracle, load_dataset, release
from tests.oracle.export import export as oracle_export

pytestmark = pytest.mark.warehouse

SEED = 16
ZONES = {1: "Europe/Berlin", 2: "UTC"}
DAYS = 20
MARGIN = timedelta(hours=2)  # no event this close to the cutoff: the test does not race the clock


def _ms(raw: dict[str, Any]) -> int:
    return time_to_ms(raw["properties"]["time"])


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[tuple[ReportEnv, Dataset, int]]:
    today = datetime.now(UTC).date()
    data = make_dataset(SEED, n_events=500, zones=ZONES, start=today - timedelta(days=49), days=45)
    cutoff = datetime.now(UTC) - timedelta(days=DAYS)
    lo, hi = (int((cutoff - MARGIN).timestamp() * 1000), int((cutoff + MARGIN).timestamp() * 1000))
    projects = {
        pid: dataclasses.replace(spec, events=[e for e in spec.events if not lo <= _ms(e) <= hi])
        for pid, spec in data.projects.items()
    }
    data = dataclasses.replace(data, projects=projects)
    env = build_env(warehouse, ZONES)
    load_dataset(env, data)
    warehouse.command("SYSTEM START MERGES events")  # load_dataset stops them; TTL needs merges
    try:
        yield env, data, int(cutoff.timestamp() * 1000)
    finally:
        set_period(warehouse, 1, 0)  # the session store is shared: never leave a TTL behind
        warehouse.command("TRUNCATE TABLE project_retention")
        release(env)


def _kept(spec: ProjectSpec, cutoff_ms: int) -> ProjectSpec:
    return dataclasses.replace(spec, events=[e for e in spec.events if _ms(e) > cutoff_ms])


def _exported(env: ReportEnv, pid: int, params: dict[str, str]) -> list[dict[str, Any]]:
    r = env.query(pid, "/export", params, prefix="/api/2.0")
    assert r.status_code == 200, r.text[:1000]
    rows = [orjson.loads(line) for line in r.content.splitlines() if line.strip()]
    for row in rows:
        row["properties"].pop("mp_processing_time_ms")
    key = lambda o: (o["properties"]["time"], o["properties"]["$insert_id"], o["event"], o["properties"]["distinct_id"])  # noqa: E731
    return sorted(rows, key=key)


def _check_reports(env: ReportEnv, data: Dataset, pid: int) -> None:
    spec = data.projects[pid]
    everything = {"from_date": (data.now - timedelta(days=60)).date().isoformat(), "to_date": spec.to_date}
    with pytest.MonkeyPatch.context() as mp:
        from footfall.services.query.reports import _common

        mp.setattr(_common, "utc_now", lambda: data.now)
        check_against_oracle(
            env, data, pid, "/segmentation", {**everything, "event": "View Item"}, oracle.segmentation.segmentation
        )
        check_against_oracle(
            env, data, pid, "/segmentation", {**everything, "event": "Purchase", "type": "unique", "unit": "week"},
            oracle.segmentation.segmentation,
        )  # fmt: skip
        check_against_oracle(
            env, data, pid, "/events", {**everything, "event": '["App Open", "Purchase"]', "type": "unique"},
            oracle.events.events,
        )  # fmt: skip
    assert _exported(env, pid, everything) == oracle_export(spec.events, spec.tz, everything)


def test_expired_events_leave_reports_and_export_other_projects_keep_all(
    loaded: tuple[ReportEnv, Dataset, int],
) -> None:
    env, data, cutoff_ms = loaded
    warehouse = env.warehouse
    assert all(any(_ms(e) <= cutoff_ms for e in s.events) for s in data.projects.values()), "data before the cutoff"
    set_period(warehouse, 1, DAYS)
    assert load_periods(warehouse) == {1: DAYS}
    for table in ("events", "event_counts_15m", "known_ids"):  # what a day of merges would do
        warehouse.command(f"OPTIMIZE TABLE {table} FINAL")
    expired = dataclasses.replace(data, projects={1: _kept(data.projects[1], cutoff_ms), 2: data.projects[2]})
    _check_reports(env, expired, 1)
    _check_reports(env, expired, 2)
    oldest = warehouse.query("SELECT min(time) FROM events WHERE project_id = 1")[0][0]
    assert oldest.replace(tzinfo=UTC) > datetime.fromtimestamp(cutoff_ms / 1000, UTC)
    ids = warehouse.query(
        "SELECT count() FROM known_ids FINAL WHERE project_id = 1 AND last_seen <= now() - INTERVAL 20 DAY"
    )
    assert ids[0][0] == 0

    # Keeping everything again: new old events stay.
    set_period(warehouse, 1, 0)
    assert load_periods(warehouse) == {}
    ddl = warehouse.query(
        "SELECT create_table_query FROM system.tables WHERE name = 'events' AND database = currentDatabase()"
    )
    assert " TTL " not in ddl[0][0]


def test_rules_and_bad_periods() -> None:
    assert ttl_rules({5: 30, 2: 7, 9: 0}, "time") == (
        "toDateTime(time) + toIntervalDay(7) WHERE project_id = 2, "
        "toDateTime(time) + toIntervalDay(30) WHERE project_id = 5"
    )
    for bad in (-1, 36_501, 1.5, True, "30"):
        with pytest.raises(RetentionError):
            set_period(None, 1, bad)  # type: ignore[arg-type]


def test_retention_over_http_owner_sets_analyst_reads(clean_warehouse: ClickHouseWarehouse) -> None:
    warehouse = clean_warehouse
    repo = MetadataRepository(warehouse)
    owner = repo.create_service_account("ret-owner", "owner-secret", sa_id=1)
    analyst = repo.create_service_account("ret-analyst", "analyst-secret", sa_id=2)
    repo.create_project("kept", "UTC", project_id=7)
    repo.grant(owner, 7, "owner")
    repo.grant(analyst, 7, "analyst")
    authenticator = Authenticator(repo.load_directory())
    routes = retention_routes(authenticator, Management(repo, RegionSettings()), warehouse)
    app = build_starlette("retention-test", routes, interfaces=[MANAGEMENT])

    async def scenario() -> list[tuple[int, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://footfall.test") as client:
            url = "/api/app/projects/7/retention"
            calls = [
                ("PUT", {"days": 30}, ("ret-owner", "owner-secret")),
                ("GET", None, ("ret-analyst", "analyst-secret")),
                ("PUT", {"days": 5}, ("ret-analyst", "analyst-secret")),  # analysts may not
                ("PUT", {"days": -1}, ("ret-owner", "owner-secret")),
                ("PUT", {"days": 30, "x": 1}, ("ret-owner", "owner-secret")),
                ("PATCH", {"days": 0}, ("ret-owner", "owner-secret")),
                ("GET", None, ("ret-owner", "wrong")),
            ]
            out = []
            for method, body, auth in calls:
                r = await client.request(method, url, json=body, auth=auth)
                out.append((r.status_code, r.json()))
            return out

    try:
        got = asyncio.run(scenario())
    finally:
        set_period(warehouse, 7, 0)
    for status, body in got[:2]:
        assert status == 200 and body["status"] == "ok"
        assert {k: body["results"][k] for k in ("project_id", "days")} == {"project_id": 7, "days": 30}
        assert set(body["results"]["applying"]) == {"mutations", "parts_to_do"}
    assert [s for s, _ in got[2:]] == [403, 400, 400, 200, 401]
    assert all(body["status"] == "error" and body["error"] for _, body in (got[2], got[3], got[4], got[6]))
    assert got[5][1]["results"]["days"] == 0 and load_periods(warehouse) == {}
