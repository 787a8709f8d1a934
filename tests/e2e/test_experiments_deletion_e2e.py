"""Experiments and data deletion through a running `footfall serve` (the composition root wires the
routes and starts the deletion runner): an experiment is created, launched, sees its exposure and
conversion, is concluded and decided; a deletion task erases one user's events, which the export
then no longer returns."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = pytest.mark.e2e

SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])


def test_experiment_and_deletion_through_serve(serve_process: ServeProcess) -> None:
    now_ms = int(time.time() * 1000) - 3_600_000

    def event(name: str, user: str, insert_id: str, at: int, **props: str) -> dict[str, object]:
        return {"event": name, "properties": {"time": at, "distinct_id": user, "$insert_id": insert_id, **props}}

    seen = {"Experiment name": "Checkout"}
    events = [
        event("$experiment_started", "a", "e1", now_ms, **seen, **{"Variant name": "control"}),
        event("$experiment_started", "b", "e2", now_ms, **seen, **{"Variant name": "new"}),
        event("Purchase", "b", "p1", now_ms + 1000),
    ]
    with httpx.Client(base_url=serve_process.base, auth=SA, timeout=60) as client:
        r = client.post(
            "/import?project_id=1&strict=1", content=orjson.dumps(events), headers={"content-type": "application/json"}
        )
        assert r.status_code == 200, r.text
        base = "/api/app/workspaces/1/experiments"
        body = {
            "name": "Checkout",
            "variants": [{"key": "control", "is_control": True}, {"key": "new"}],
            "metrics": [{"event": "Purchase"}],
        }
        created = client.post(base, json=body)
        assert created.status_code == 201, created.text
        url = f"{base}/{created.json()['results']['id']}"
        assert client.patch(url, json={"start_date": "2000-01-01"}).status_code == 200
        active = client.put(url + "/launch").json()["results"]
        assert active["exposures_cache"]["variants"] == {"control": 1, "new": 1}
        concluded = client.put(url + "/force_conclude", json={}).json()["results"]
        values = concluded["results_cache"]["metrics"][0]["variants"]
        assert (
            concluded["status"] == "concluded" and values["new"]["value"] == 1.0 and values["control"]["value"] == 0.0
        )
        assert (
            client.patch(url + "/decide", json={"success": True, "variant": "new"}).json()["results"]["status"]
            == "success"
        )

        deletions = "/api/app/data-deletions/v3.0/"
        task = client.post(deletions, params={"project_id": 1}, json={"distinct_ids": ["b"]})
        assert task.status_code == 200, task.text
        task_id = task.json()["results"]["task_id"]
        deadline = time.monotonic() + 60
        while (status := client.get(f"{deletions}{task_id}", params={"project_id": 1}).json()["results"])[
            "status"
        ] not in ("SUCCESS", "FAILURE"):
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["status"] == "SUCCESS"
        day = time.strftime("%Y-%m-%d", time.gmtime(now_ms / 1000))
        exported = client.get("/api/2.0/export", params={"project_id": 1, "from_date": day, "to_date": day})
        ids = sorted(
            {orjson.loads(line)["properties"]["distinct_id"] for line in exported.content.splitlines() if line.strip()}
        )
        assert ids == ["a"]
