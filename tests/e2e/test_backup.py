"""Backup and restore of a running `footfall serve` (issue 16), end to end.

Imports run in a thread, one `/import` request after another, while `footfall --url … --user …
backup` snapshots the store. The snapshot is restored with `footfall restore` into a new
folder and served by a second `footfall serve` (chDB opens one data folder per process). The
restored store must hold a whole prefix of the import requests (each request is one insert):
its export, segmentation and `/events` answers equal the plain-Python oracles over exactly
those events, its credentials (stored hashed), saved funnel and cohort are the source's, and
its materialised views keep working for new imports. A damaged backup is refused and leaves
no folder behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import CREDS, REPO, ServeProcess
from tests.factories import dedupe, make_dataset
from tests.oracle import events as events_oracle
from tests.oracle import export as export_oracle
from tests.oracle import segmentation as segmentation_oracle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SECRET = CREDS["FOOTFALL_BOOTSTRAP_SECRET"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
BATCH = 25
JSON = {"Content-Type": "application/json"}
FUNNEL = {"name": "Signup", "steps": [{"event": "Sign Up"}, {"event": "Purchase"}], "length": 1, "length_unit": "day"}
COHORT = {
    "name": "Buyers",
    "selector": 'behaviors["buys"] >= 1',
    "behaviors": [{"name": "buys", "window": "30d", "event_selectors": [{"event": "Purchase"}]}],
}


def insert_ids(batches: list[list[dict[str, Any]]]) -> set[str]:
    return {str(e["properties"]["$insert_id"]) for b in batches for e in b}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")}
    return subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", *args],
        cwd=REPO,
        env=base | (env or {}),
        capture_output=True,
        text=True,
        timeout=200,
    )


def post(server: ServeProcess, batch: list[dict[str, Any]]) -> None:
    r = httpx.post(
        server.base + "/import?strict=1", content=orjson.dumps(batch), auth=(SECRET, ""), timeout=30, headers=JSON
    )
    assert r.status_code == 200, r.text


def get(server: ServeProcess, path: str, **params: str) -> httpx.Response:
    r = httpx.get(server.base + path, params=params, auth=(SECRET, ""), timeout=30)
    assert r.status_code == 200, r.text
    return r


def exported(server: ServeProcess, params: dict[str, str]) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in get(server, "/api/2.0/export", **params).content.splitlines() if line]
    for row in rows:
        row["properties"].pop("mp_processing_time_ms", None)
    return sorted(rows, key=lambda o: (o["properties"]["time"], o["properties"]["$insert_id"], o["event"]))


def answers(server: ServeProcess, params: dict[str, str]) -> dict[str, Any]:
    seg = {**params, "event": "View Item", "unit": "day"}
    by_plan = {**params, "event": "Purchase", "type": "unique", "on": 'properties["plan"]'}
    events = {**params, "event": '["App Open", "Sign Up", "Purchase"]', "type": "general", "unit": "day"}
    return {
        "export": exported(server, params),
        "segmentation": get(server, "/api/2.0/segmentation", **seg).json()["data"],
        "segmentation_on": get(server, "/api/2.0/segmentation", **by_plan).json()["data"],
        "events": get(server, "/api/2.0/events", **events).json()["data"],
    }


def oracle(raw: list[dict[str, Any]], params: dict[str, str]) -> dict[str, Any]:
    seg = {**params, "event": "View Item", "unit": "day"}
    by_plan = {**params, "event": "Purchase", "type": "unique", "on": 'properties["plan"]'}
    events = {**params, "event": '["App Open", "Sign Up", "Purchase"]', "type": "general", "unit": "day"}
    return {
        "export": export_oracle.export(raw, "UTC", params),
        "segmentation": segmentation_oracle.segmentation(raw, "UTC", seg)["data"],
        "segmentation_on": segmentation_oracle.segmentation(raw, "UTC", by_plan)["data"],
        "events": events_oracle.events(raw, "UTC", events)["data"],
    }


@pytest.mark.slow
def test_backup_while_importing_restores_a_consistent_snapshot(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    data = make_dataset(161, n_events=1500, zones={1: "UTC"})
    spec = data.projects[1]
    raw = spec.events
    batches = [raw[i : i + BATCH] for i in range(0, len(raw), BATCH)]
    params = {"from_date": "2024-03-01", "to_date": "2024-04-30"}
    env = {"FOOTFALL_BACKUP_DIR": str(backups)}
    source = ServeProcess(tmp_path / "source", env=env)
    source.start()
    restored: ServeProcess | None = None
    try:
        sa_env = {"FOOTFALL_BACKUP_DIR": str(backups)}
        funnel = httpx.post(source.base + "/api/app/projects/1/funnels", json=FUNNEL, auth=SA, timeout=30)
        cohort = httpx.post(source.base + "/api/app/projects/1/cohorts", json=COHORT, auth=SA, timeout=30)
        assert funnel.status_code in (200, 201) and cohort.status_code in (200, 201), (funnel.text, cohort.text)
        for batch in batches[:4]:
            post(source, batch)

        sent, stop = [4], threading.Event()

        def importer() -> None:
            for batch in batches[4:]:
                if stop.wait(0.1):  # paced, so that the backup runs between requests
                    return
                post(source, batch)
                sent[0] += 1

        thread = threading.Thread(target=importer)
        thread.start()
        before = sent[0]
        who = ["--url", source.base, "--user", f"{SA[0]}:{SA[1]}"]
        done = cli(*who, "backup", "snap", env=sa_env)
        after = sent[0]
        stop.set()
        thread.join()
        assert done.returncode == 0, done.stderr
        assert after > before, "no import finished while the backup ran"
        more = cli(*who, "backup", "snap", env=sa_env)  # the same name again: refused, the first kept
        outside = cli(*who, "backup", str(tmp_path / "elsewhere"), env=sa_env)
        status = cli(*who, "--json", "status", env=sa_env)
        direct = cli("backup", "direct", "--data", str(source.data_dir), env=sa_env)  # the server holds the store
        assert direct.returncode == 1 and "running server" in direct.stderr and "--url" in direct.stderr
        assert not (backups / "direct").exists()
        assert more.returncode == 1 and "already exists" in more.stderr
        assert outside.returncode == 1 and "inside" in outside.stderr and not (tmp_path / "elsewhere").exists()
        assert status.returncode == 0, status.stderr
        report = orjson.loads(status.stdout)
        assert report["schema_version"] == report["release_schema_version"] > 0
        assert report["projects"][0]["events"] == len(dedupe([e for b in batches[: sent[0]] for e in b]))
        assert report["projects"][0]["last_insert"] and report["consumer_lag"] is None

        # Restore into a new folder and serve it beside the source.
        snap = backups / "snap"
        target = tmp_path / "restored"
        done = cli("restore", str(snap), "--data", str(target))
        assert done.returncode == 0, done.stderr
        restored = ServeProcess(target, env=env)
        restored.start()
        got = answers(restored, params)
        everything = {"from_date": "2000-01-01", "to_date": "2024-12-31"}
        stored = {row["properties"]["$insert_id"] for row in exported(restored, everything)}
        prefixes = [k for k in range(len(batches) + 1) if stored == insert_ids(batches[:k])]
        assert prefixes, "the restored events are not whole import requests in order"
        k = prefixes[-1]
        assert before <= k <= after + 1 < len(batches), (before, k, after)
        expected = oracle([e for b in batches[:k] for e in b], params)
        assert got == expected

        # Credentials (hashed), the saved funnel and the cohort came along; views work for new imports.
        funnels = httpx.get(restored.base + "/api/app/projects/1/funnels", auth=SA, timeout=30)
        assert funnels.status_code == 200 and [f["name"] for f in funnels.json()["results"]] == ["Signup"]
        cohorts = httpx.get(restored.base + "/api/app/projects/1/cohorts", auth=SA, timeout=30).json()["results"]
        assert [c["name"] for c in cohorts] == ["Buyers"]
        health = httpx.get(restored.base + "/healthz", timeout=10).json()
        assert health["schema_version"] == report["schema_version"]
        extra = batches[k : k + 3] if k < len(batches) else []
        for batch in extra:
            post(restored, batch)
        assert answers(restored, params) == oracle([e for b in batches[: k + len(extra)] for e in b], params)
    finally:
        if restored is not None:
            restored.stop()
        source.stop()

    # A damaged backup is refused, and nothing is left in the target's folder.
    for damage in ("truncate", "alter", "extra"):
        bad = tmp_path / f"bad-{damage}"
        shutil.copytree(snap, bad)
        victim = max((p for p in (bad / "data").rglob("*.bin")), key=lambda p: p.stat().st_size)
        if damage == "truncate":
            victim.write_bytes(victim.read_bytes()[:-7])
        elif damage == "alter":
            body = bytearray(victim.read_bytes())
            body[len(body) // 2] ^= 0xFF
            victim.write_bytes(bytes(body))
        else:
            (bad / "data" / "default" / "events" / "stray.bin").write_bytes(b"x")
        into = tmp_path / f"into-{damage}"
        refused = cli("restore", str(bad), "--data", str(into))
        assert refused.returncode == 1 and "damaged" in refused.stderr and "nothing was restored" in refused.stderr
        assert not into.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".into-{damage}")]


@pytest.mark.kafka
@pytest.mark.redis
def test_status_shows_the_consumer_lag_of_the_kafka_path(tmp_path: Path, kafka_bootstrap: str, redis_url: str) -> None:
    prefix = f"bk{time.time_ns() % 10**9}."
    env = {"FOOTFALL_KAFKA_BOOTSTRAP": kafka_bootstrap, "FOOTFALL_KAFKA_TOPIC_PREFIX": prefix}
    server = ServeProcess(tmp_path / "d", env={**env, "FOOTFALL_REDIS_URL": redis_url})
    server.start()
    try:
        raw = make_dataset(162, n_events=60, zones={1: "UTC"}).projects[1].events
        post(server, raw)
        who = ["--url", server.base, "--user", f"{SA[0]}:{SA[1]}"]
        deadline, report = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            done = cli(*who, "--json", "status")
            assert done.returncode == 0, done.stderr
            report = orjson.loads(done.stdout)
            if report["projects"][0]["events"] == len(dedupe(raw)) and report["consumer_lag"]:
                break
            time.sleep(1)
        assert report["projects"][0]["events"] == len(dedupe(raw)), report
        lag = report["consumer_lag"]
        assert lag and all(topic.startswith(prefix) for topic in lag) and set(lag.values()) == {0}, lag
        text = cli(*who, "status")
        assert text.returncode == 0 and "consumer lag {" in text.stdout and f"{len(dedupe(raw))}" in text.stdout
    finally:
        server.stop()
