"""The npm library `mixpanel-import` (3.1.x), unchanged, imports into `footfall serve`.

`tests/e2e/node/` pins it (`package-lock.json`); when `node_modules` is missing (a fresh clone)
the test installs it with `npm ci --offline` (the local npm cache) or else `npm ci`, and skips,
saying so, only when npm cannot reach a registry. The library has no host option: the preload
`redirect.cjs` swaps the Mixpanel origins of its undici pools for the server under test, records
every request it sends, and refuses any host-name lookup (so nothing can reach Mixpanel).

Generated data, three jobs through `run.cjs`:
* events (`recordType: "event"`, service account + `project_id`, gzip): every event comes back
  exactly once from `/api/2.0/export` with its name, `distinct_id`, time and properties;
* user profiles (`recordType: "user"`, token, `$set` and `$set_once` on overlapping users):
  `/api/2.0/engage` returns exactly the reference state, computed in plain Python from the
  updates as they went over the wire (the record of `redirect.cjs`);
* group profiles (`recordType: "group"`, `groupKey`): the same through `data_group_id`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

NODE_DIR = Path(__file__).resolve().parent / "node"
TOKEN, SECRET = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"], CREDS["FOOTFALL_BOOTSTRAP_SECRET"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
GROUP_KEY = "company"
N_EVENTS, N_USERS, N_GROUPS = 1500, 120, 15
# what Footfall adds to a stored profile beside the updates' properties
SERVER_PROPERTIES = {"$last_seen"}


# ------------------------------------------------------------------------------------- npm install
def _npm(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["npm", *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=timeout, check=False)


def ensure_node_modules() -> None:
    """Installs the pinned library when it is missing; skips only if no registry answers."""
    if (NODE_DIR / "node_modules" / "mixpanel-import" / "package.json").exists():
        return
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed: mixpanel-import cannot run")
    offline = _npm("ci", "--offline", "--no-audit", "--no-fund")
    if offline.returncode == 0:
        return
    online = _npm("ci", "--no-audit", "--no-fund", timeout=600)
    if online.returncode == 0:
        return
    if _npm("ping", timeout=60).returncode != 0:
        pytest.skip(f"npm cannot reach a registry to install mixpanel-import:\n{online.stderr[-2000:]}")
    pytest.fail(f"npm ci failed although the registry answers:\n{online.stdout[-2000:]}\n{online.stderr[-4000:]}")


# ------------------------------------------------------------------------------------------- data
def generate(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    now = datetime.now(UTC).replace(microsecond=0)
    names = ["Signed up", "Viewed page", "Purchased", "Ünïcode ✓"]
    events = []
    for i in range(N_EVENTS):
        at = now - timedelta(days=rng.randrange(0, 20), seconds=rng.randrange(0, 86_400))
        events.append(
            {
                "event": rng.choice(names),
                "properties": {
                    "distinct_id": f"user-{rng.randrange(N_USERS)}",
                    "time": int(at.timestamp()),
                    "$insert_id": f"npm-{i:05d}",
                    "plan": rng.choice(["free", "pro", None]),
                    "amount": round(rng.uniform(0, 100), 2),
                    "n": i,
                },
            }
        )
    profiles: list[dict[str, Any]] = []
    for u in range(N_USERS):
        profiles.append({"$distinct_id": f"user-{u}", "$set": {"$email": f"u{u}@example.com", "tier": u % 3}})
        if u % 4 == 0:  # a second update of the same profile: a later `$set` wins, `$set_once` does not
            profiles.append({"$distinct_id": f"user-{u}", "$set": {"tier": 10 + u}})
            profiles.append({"$distinct_id": f"user-{u}", "$set_once": {"tier": -1, "first_seen_by": "npm"}})
    groups = [
        {"$group_key": GROUP_KEY, "$group_id": f"c{g}", "$set": {"name": f"Company {g}", "seats": g * 10}}
        for g in range(N_GROUPS)
    ]
    return events, profiles, groups


def reference_profiles(recorded: list[dict[str, Any]], path: str, key: str) -> dict[str, dict[str, Any]]:
    """Profile state after the `$set` / `$set_once` updates that reached the server (answered
    200) at `path`, applied in sending order: the record of what went over the wire."""
    state: dict[str, dict[str, Any]] = {}
    for request in sorted(recorded, key=lambda r: r["sent_ms"]):
        if not request["path"].startswith(path) or request.get("status") != 200:
            continue
        for update in _updates(request["body"]):
            props = state.setdefault(str(update[key]), {})
            props.update(update.get("$set", {}))
            for name, value in update.get("$set_once", {}).items():
                props.setdefault(name, value)
    return state


def _updates(body: str) -> list[dict[str, Any]]:
    if body.startswith("data="):  # form-encoded, as older clients send it
        from urllib.parse import parse_qs

        body = parse_qs(body)["data"][0]
    parsed = json.loads(body)
    return parsed if isinstance(parsed, list) else [parsed]


# ----------------------------------------------------------------------------------------- reading
def export_all(server: ServeProcess) -> list[dict[str, Any]]:
    today = datetime.now(UTC).date()
    params = {"project_id": "1", "from_date": (today - timedelta(days=30)).isoformat(), "to_date": today.isoformat()}
    answer = httpx.get(server.base + "/api/2.0/export", params=params, auth=SA, timeout=60)
    assert answer.status_code == 200, answer.text
    return [orjson.loads(line) for line in answer.content.splitlines() if line.strip()]


def engage_all(server: ServeProcess, **params: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    page, session = 0, None
    while True:
        form = {"project_id": "1", "page": str(page), **params}
        if session:
            form["session_id"] = session
        answer = httpx.post(server.base + "/api/2.0/engage", data=form, auth=(SECRET, ""), timeout=60)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        for row in body["results"]:
            found[row["$distinct_id"]] = {k: v for k, v in row["$properties"].items() if k not in SERVER_PROPERTIES}
        session = body.get("session_id")
        if (page + 1) * body["page_size"] >= body["total"]:
            return found
        page += 1


def data_group_id(server: ServeProcess, key: str) -> str:
    answer = httpx.get(server.base + "/api/app/projects/1/data-groups", auth=SA, timeout=30)
    assert answer.status_code == 200, answer.text
    ids = [str(g["data_group_id"]) for g in answer.json()["results"] if g["property_name"] == key]
    assert len(ids) == 1, answer.json()
    return ids[0]


# -------------------------------------------------------------------------------------------- test
def test_mixpanel_import_npm_events_users_groups(serve_process: ServeProcess, tmp_path: Path) -> None:
    ensure_node_modules()
    events, profiles, groups = generate(random.Random(20261126))
    files = {}
    for name, records in (("events", events), ("users", profiles), ("groups", groups)):
        files[name] = tmp_path / f"{name}.ndjson"
        files[name].write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    common = {"verbose": False, "showProgress": False, "logs": False, "workers": 4, "recordsPerBatch": 500}
    jobs = [
        {
            "creds": {"acct": SA[0], "pass": SA[1], "project": "1"},
            "data": str(files["events"]),
            "opts": {**common, "recordType": "event", "compress": True, "strict": True},
        },
        {"creds": {"token": TOKEN}, "data": str(files["users"]), "opts": {**common, "recordType": "user"}},
        {
            "creds": {"token": TOKEN, "groupKey": GROUP_KEY},
            "data": str(files["groups"]),
            "opts": {**common, "recordType": "group"},
        },
    ]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    record = tmp_path / "requests.ndjson"
    env = {**os.environ, "REDIRECT_TARGET": serve_process.base, "REDIRECT_RECORD": str(record)}
    run = subprocess.run(
        ["node", "--require", "./redirect.cjs", "run.cjs", str(tmp_path / "jobs.json")],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:] + serve_process.log()[-3000:]
    summaries = json.loads(run.stdout.strip().splitlines()[-1])
    recorded = [json.loads(line) for line in record.read_text().splitlines()]

    # the library's own account: everything sent, nothing failed, and only to the server under test
    assert [s["success"] for s in summaries] == [N_EVENTS, len(profiles), N_GROUPS], summaries
    assert all(s["failed"] == 0 for s in summaries), summaries
    assert {r["origin"] for r in recorded} == {"https://api.mixpanel.com"}
    assert all(r.get("status") == 200 for r in recorded), [r for r in recorded if r.get("status") != 200][:3]
    assert any(r["headers"].get("Content-Encoding") == "gzip" for r in recorded if r["path"].startswith("/import"))

    # events: each exactly once, as generated
    exported = export_all(serve_process)
    by_id = {}
    for row in exported:
        insert_id = row["properties"]["$insert_id"]
        assert insert_id not in by_id, f"{insert_id} exported twice"
        by_id[insert_id] = row
    assert len(by_id) == N_EVENTS
    for event in events:
        row = by_id[event["properties"]["$insert_id"]]
        assert row["event"] == event["event"]
        for key, value in event["properties"].items():
            assert row["properties"].get(key) == value, (key, value, row)

    # profiles and groups: the reference state of what went over the wire
    users = reference_profiles(recorded, "/engage", "$distinct_id")
    assert len(users) == N_USERS
    assert users["user-0"]["tier"] == 10 and users["user-0"]["first_seen_by"] == "npm"  # the generator's intent
    assert engage_all(serve_process) == users
    companies = reference_profiles(recorded, "/groups", "$group_id")
    assert len(companies) == N_GROUPS
    assert engage_all(serve_process, data_group_id=data_group_id(serve_process, GROUP_KEY)) == companies
