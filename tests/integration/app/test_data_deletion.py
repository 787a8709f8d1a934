"""Data deletion (`services/app/data_deletion.py`): a tracked job through the HTTP API, after which
the deleted ids leave no trace in any report — the service's answers over the store equal the report
oracles over the remaining events (segmentation, which reads the quarter-hour counts, `/events`,
funnels, export, `/engage`) — the rows are physically gone, and a re-import of remaining events
dedups as usual.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import orjson
import pytest

from footfall.services.app.data_deletion import data_deletions
from footfall.services.query.reports import _common
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.saved import WarehouseSavedStore, parse_funnel
from footfall.shared.warehouse import ClickHouseWarehouse
from tests import oracle
from tests.factories import MAX_STR, Dataset, make_dataset
from tests.integration.query.report_env import (
    SA_SECRET,
    SA_USER,
    build_env,
    check_against_oracle,
    diff,
    import_events,
    rng,
)
from tests.oracle import funnels as oracle_funnels
from tests.oracle.engage import engage as oracle_engage
from tests.oracle.export import export as oracle_export

pytestmark = pytest.mark.warehouse

URL = "/api/app/data-deletions/v3.0/"


def _id(raw: dict[str, Any]) -> str:
    return str(raw["properties"]["distinct_id"])[:MAX_STR]


def test_deleted_ids_leave_no_trace(clean_warehouse: ClickHouseWarehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = make_dataset(20261127, n_events=900, zones={1: "UTC"})
    spec = dataset.projects[1]
    monkeypatch.setattr(_common, "utc_now", lambda: dataset.now)
    env = build_env(clean_warehouse, {1: "UTC"})
    auth = (SA_USER, SA_SECRET)
    try:
        authenticator = Authenticator(MetadataRepository(clean_warehouse).load_directory())
        routes, runner = data_deletions(authenticator, clean_warehouse)
        env.app.router.routes[:0] = routes
        env._runner.run(runner.start())
        import_events(env, 1, spec.events)
        ids = sorted({_id(e) for e in spec.events if _id(e)})
        ancient = [
            {"event": "Old", "properties": {"time": 800_000_000, "distinct_id": i, "$insert_id": f"old-{i}"}}
            for i in (ids[0], ids[1])
        ]  # before 2001-09-09: deleted by dedup hash (see data_deletion._MUTABLE)
        import_events(env, 1, ancient)
        victims = ids[::4]
        assert len(victims) >= 5
        updates = [{"$token": "report-token-1", "$distinct_id": i, "$set": {"plan": f"p-{i}"}} for i in ids[:40]]
        r = env.request(
            "POST", "/engage?strict=1&ip=0", content=orjson.dumps(updates), headers={"content-type": "application/json"}
        )
        assert r.status_code == 200, r.text
        funnel_name, funnel = parse_funnel(dataset.funnels[min(dataset.funnels)])
        funnel_id = WarehouseSavedStore(clean_warehouse).create_funnel(1, funnel_name, funnel).funnel_id

        # bad requests are 400s and create nothing; a consumer-less secret is not a management credential
        assert env.request("POST", URL + "?project_id=1", json={"distinct_ids": []}, auth=auth).status_code == 400
        bad = {"distinct_ids": ["a"], "compliance_type": "HIPAA"}
        assert env.request("POST", URL + "?project_id=1", json=bad, auth=auth).status_code == 400
        assert (
            env.request(
                "POST", URL + "?project_id=1", json={"distinct_ids": ["a"]}, auth=("report-secret-1", "")
            ).status_code
            == 401
        )

        created = env.request(
            "POST", URL + "?project_id=1", json={"distinct_ids": victims, "compliance_type": "GDPR"}, auth=auth
        )
        assert created.status_code == 200, created.text
        task_id = created.json()["results"]["task_id"]
        deadline = time.monotonic() + 120
        while True:
            got = env.request("GET", f"{URL}{task_id}?project_id=1", auth=auth)
            assert got.status_code == 200, got.text
            status = got.json()["results"]
            if status["status"] in ("SUCCESS", "FAILURE") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status["status"] == "SUCCESS", status
        assert status["distinct_ids"] == victims and status["compliance_type"] == "GDPR"
        assert status["created"] <= status["finished"]
        assert env.request("GET", f"{URL}{task_id}?project_id=2", auth=auth).status_code in (403, 404)
        assert env.request("GET", f"{URL}nope?project_id=1", auth=auth).status_code == 404

        # physically gone, not only masked
        stored = clean_warehouse.query(
            "SELECT count() FROM events WHERE distinct_id IN {ids:Array(String)} SETTINGS apply_deleted_mask = 0",
            {"ids": victims},
        )
        assert stored[0][0] == 0
        old = clean_warehouse.query("SELECT distinct_id FROM events WHERE time < '2001-01-01'")
        assert old == [(ids[1],)]  # the victim's event of 1995 went by its hash, the other one stayed
        gone = set(victims)
        remaining = replace(dataset, projects={1: replace(spec, events=[e for e in spec.events if _id(e) not in gone])})

        def check_reports(remaining: Dataset) -> None:
            kept = remaining.projects[1]
            check_against_oracle(
                env, remaining, 1, "/segmentation", rng(kept, event="View Item"), oracle.segmentation.segmentation
            )
            check_against_oracle(
                env,
                remaining,
                1,
                "/segmentation",
                rng(kept, event="App Open", type="unique", unit="hour"),
                oracle.segmentation.segmentation,
            )
            check_against_oracle(
                env,
                remaining,
                1,
                "/events",
                rng(kept, event='["App Open", "Purchase"]', type="unique"),
                oracle.events.events,
            )
            params = {**rng(kept), "funnel_id": str(funnel_id)}
            want = oracle_funnels.funnels(
                kept.events, kept.tz, rng(kept), dataset.funnels[min(dataset.funnels)], dataset.now
            )
            r = env.query(1, "/funnels", params)
            assert r.status_code == 200 and not diff(r.json(), want), diff(r.json(), want)[:10]
            r = env.query(1, "/export", rng(kept), prefix="/api/2.0")
            rows = [orjson.loads(line) for line in r.content.splitlines() if line.strip()]
            for row in rows:
                row["properties"].pop("mp_processing_time_ms")
            assert all(row["properties"]["distinct_id"] not in gone for row in rows)
            order = [
                (o["properties"]["time"], o["properties"]["$insert_id"], o["event"], o["properties"]["distinct_id"])
                for o in rows
            ]
            rows = [row for _, row in sorted(zip(order, rows, strict=True), key=lambda pair: pair[0])]
            assert rows == oracle_export(kept.events, kept.tz, rng(kept))
            profiles = {(1, None, u["$distinct_id"]): dict(u["$set"]) for u in updates if u["$distinct_id"] not in gone}
            query = {"output_properties": '["plan"]'}
            r = env.query(1, "/engage", query)
            body = r.json()
            body.pop("session_id", None)
            assert body == oracle_engage(profiles, query, project_id=1)
            assert len(body["results"]) == len(profiles) < len(updates), (len(profiles), len(updates), len(gone))

        check_reports(remaining)
        # a re-import of remaining events dedups as usual (and brings no deleted id back)
        again = [e for e in spec.events if _id(e) not in gone][:300]
        import_events(env, 1, again)
        # the re-sent copies are now the latest ingested ones (the oracles' last copy wins)
        check_reports(replace(remaining, projects={1: replace(spec, events=remaining.projects[1].events + again)}))
        env._runner.run(runner.stop())
    finally:
        env.close()
