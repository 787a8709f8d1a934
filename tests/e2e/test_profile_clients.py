"""Profile and group clients end to end against a `footfall serve` subprocess, unchanged.

* mixpanel-python (`mixpanel`): every `people_*` and `group_*` call through `Consumer` and
  `BufferedConsumer` pointed at `/engage` and `/groups`, and `track` at `/track`. A recorder in
  front of the library's consumer keeps each message exactly as the library made it (it
  changes nothing on the wire); the plain-Python reference (`tests/oracle/profiles.py`)
  applies those messages, and its state must equal the profiles read back through the query
  interface (`/api/2.0/engage` with the project secret; group profiles with `data_group_id`).
  Events are read back through `/api/2.0/export`.
* mixpanel-utils (`mixpanel_utils`): it has no host option, so the instance's base URLs
  (`formatted_api`, `import_api`, `raw_api`) point at the server; it authenticates with the
  bootstrap service account. Its bulk people methods (POST `data=<base64 JSON>` batches of up
  to 2000 to `/engage?verbose=1`, `project_id` in the form body, `$ip: 0`, `$ignore_time:
  true`), `query_engage` with `where` and `selector`, and `export_people`, whose paginator
  fetches pages 1..n concurrently from `total`: 2,500 profiles are three pages, and every
  profile must come back exactly once.

mixpanel-utils reports a refused request only in its log (its `request` returns None on a 4xx
and the batch callback ignores that), so its tests also assert that it logged no warning or
error.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel import BufferedConsumer, Consumer, Mixpanel
from mixpanel_utils import MixpanelUtils

from footfall.shared.profiles.groups import data_group_id
from tests.e2e.conftest import CREDS, ServeProcess
from tests.oracle import engage as engage_oracle
from tests.oracle import profiles as oracle

pytestmark = pytest.mark.e2e

TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SECRET = CREDS["FOOTFALL_BOOTSTRAP_SECRET"]
SA_USER, SA_SECRET = CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"]
KINDS = {"people": "user", "groups": "group"}


# ------------------------------------------------------------------------------------------ helpers
@dataclass
class Recorder:
    """A consumer in front of the library's own: keeps every message as the library serialised
    it, then hands it on unchanged (`Mixpanel` only calls `send`; `flush` is the buffered one's)."""

    inner: Consumer | BufferedConsumer
    sent: list[tuple[str, Any]] = field(default_factory=list)

    def send(self, endpoint: str, json_message: str, api_key: Any = None, api_secret: Any = None) -> None:
        self.sent.append((endpoint, json.loads(json_message)))
        self.inner.send(endpoint, json_message, api_key, api_secret)

    def flush(self) -> None:
        if isinstance(self.inner, BufferedConsumer):
            self.inner.flush()

    def expected(self) -> oracle.State:
        """The reference state after every profile and group update sent (in sending order)."""
        received_ms = int(time.time() * 1000)
        updates: list[oracle.Update | oracle.Invalid] = []
        for seq, (endpoint, message) in enumerate(self.sent):
            if endpoint in KINDS:
                updates.append(oracle.parse_update(message, received_ms=received_ms, kind=KINDS[endpoint], seq=seq))
        invalid = [u for u in updates if isinstance(u, oracle.Invalid)]
        assert not invalid, f"the reference refuses what the library sent: {invalid}"
        state = oracle.apply(updates)
        assert not state.rejected, f"the reference rejects updates {state.rejected}"
        return state


def consumer_urls(server: ServeProcess) -> dict[str, str]:
    base = server.base
    return {"events_url": base + "/track", "people_url": base + "/engage", "groups_url": base + "/groups"}


def engage(server: ServeProcess, **params: str) -> dict[str, Any]:
    r = httpx.post(server.base + "/api/2.0/engage", data=params, auth=(SECRET, ""), timeout=60)
    assert r.status_code == 200, f"/api/2.0/engage {params}: {r.status_code} {r.text}"
    body: dict[str, Any] = r.json()
    return body


def read_profiles(server: ServeProcess, **params: str) -> dict[str, dict[str, Any]]:
    """Every profile of a (single-page) /engage answer, by id; checks the answer's frame."""
    body = engage(server, **params)
    assert body["status"] == "ok" and body["page"] == 0 and body["total"] == len(body["results"]), body
    ids = [r["$distinct_id"] for r in body["results"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    return {r["$distinct_id"]: r["$properties"] for r in body["results"]}


def users(state: oracle.State) -> dict[str, dict[str, Any]]:
    return {pid: p.properties for (_, group_key, pid), p in state.profiles.items() if group_key is None}


def groups(state: oracle.State, key: str) -> dict[str, dict[str, Any]]:
    return {gid: p.properties for (_, group_key, gid), p in state.profiles.items() if group_key == key}


def export(server: ServeProcess) -> list[dict[str, Any]]:
    today = datetime.now(UTC).date().isoformat()
    r = httpx.get(
        server.base + "/api/2.0/export",
        params={"from_date": "2020-01-01", "to_date": today},
        auth=(SECRET, ""),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return [orjson.loads(line) for line in r.content.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------- mixpanel-python
def test_mixpanel_python_people_groups_and_track(serve_process: ServeProcess) -> None:
    recorder = Recorder(Consumer(**consumer_urls(serve_process)))
    mp = Mixpanel(TOKEN, consumer=recorder)

    # u1: every user operation, in order, on one profile
    mp.people_set(
        "u1",
        {
            "plan": "free",
            "$email": "u1@example.com",
            "tags": ["a"],
            "address": {"city": "Zürich", "zip": "8001"},
            "signed_up": datetime(2026, 1, 2, 3, 4, 5),  # the library's serializer: "2026-01-02T03:04:05"
        },
    )
    mp.people_set_once("u1", {"plan": "pro", "first_source": "ads"})  # plan stays "free"
    mp.people_increment("u1", {"logins": 1})
    mp.people_increment("u1", {"logins": 2, "spend": 9.5})
    mp.people_append("u1", {"pages": "home"})
    mp.people_append("u1", {"pages": "pricing"})
    mp.people_union("u1", {"tags": ["a", "b", "c"]})
    mp.people_remove("u1", {"tags": "b"})
    mp.people_unset("u1", ["first_source"])
    mp.people_track_charge("u1", 12.5, {"sku": "A-1"})
    # u2: created, then deleted; u3: $ignore_time (no $last_seen); u4: only an $unset (no profile);
    # u5: deleted and recreated; 42: an integer distinct id (stored as text)
    mp.people_set("u2", {"plan": "pro"})
    mp.people_delete("u2")
    mp.people_set("u3", {"plan": "team"}, meta={"$ignore_time": True})
    mp.people_unset("u4", ["plan"])
    mp.people_set("u5", {"plan": "free", "old": True})
    mp.people_delete("u5")
    mp.people_set_once("u5", {"plan": "pro"})
    mp.people_increment(42, {"visits": 3})

    # groups: every group operation on company/acme, a deleted company, and another group key
    mp.group_set("company", "acme", {"name": "Acme", "tier": "gold", "features": ["sso"]})
    mp.group_set_once("company", "acme", {"name": "Other", "founded": 1999})
    mp.group_union("company", "acme", {"features": ["sso", "audit", "api"]})
    mp.group_remove("company", "acme", {"features": "audit"})
    mp.group_unset("company", "acme", ["tier"])
    mp.group_set("company", "gone", {"name": "Gone Inc"})
    mp.group_delete("company", "gone")
    mp.group_set("team", "t1", {"size": 3})

    stamp = time.time() - 60
    mp.track("u1", "Signed up", {"plan": "free", "time": stamp, "$insert_id": "profile-clients-1"})
    mp.track("u1", "Signed up", {"plan": "free", "time": stamp, "$insert_id": "profile-clients-1"})  # a retry
    mp.track("u5", "Upgraded")

    expected = recorder.expected()
    assert set(users(expected)) == {"u1", "u3", "u5", "42"}  # the scenario is what it says
    assert read_profiles(serve_process) == users(expected)
    u1 = read_profiles(serve_process, distinct_id="u1")["u1"]
    assert u1["plan"] == "free" and u1["logins"] == 3 and u1["tags"] == ["a", "c"] and "$last_seen" in u1
    assert "$last_seen" not in read_profiles(serve_process, distinct_id="u3")["u3"]
    for key in ("company", "team"):
        got = read_profiles(serve_process, data_group_id=str(data_group_id(key)))
        assert got == groups(expected, key), key
    assert set(groups(expected, "company")) == {"acme"}
    assert read_profiles(serve_process, where='properties["plan"] == "pro"') == {"u5": users(expected)["u5"]}

    events = export(serve_process)
    signed_up = [e for e in events if e["event"] == "Signed up"]
    assert len(signed_up) == 1, signed_up
    props = signed_up[0]["properties"]
    assert props["distinct_id"] == "u1" and props["plan"] == "free" and props["time"] == int(stamp)
    assert props["mp_lib"] == "python" and "token" not in props
    assert [e["properties"]["distinct_id"] for e in events if e["event"] == "Upgraded"] == ["u5"]


def test_mixpanel_python_buffered_consumer(serve_process: ServeProcess) -> None:
    buffered = BufferedConsumer(max_size=50, **consumer_urls(serve_process))
    recorder = Recorder(buffered)
    mp = Mixpanel(TOKEN, consumer=recorder)
    for i in range(120):  # three batches: 50, 50 and the 20 that flush() sends
        mp.people_set(f"b{i:03d}", {"i": i, "even": i % 2 == 0})
        if i % 3 == 0:
            mp.people_increment(f"b{i:03d}", {"score": i})
        if i % 10 == 0:
            mp.people_union(f"b{i:03d}", {"lists": ["x", i]})
    for i in range(60):
        mp.group_set("org", f"o{i:02d}", {"i": i})
    mp.group_delete("org", "o00")
    for i in range(5):
        mp.track(f"b{i:03d}", "Buffered", {"i": i})
    recorder.flush()

    expected = recorder.expected()
    assert len(users(expected)) == 120 and len(groups(expected, "org")) == 59
    assert read_profiles(serve_process) == users(expected)
    assert read_profiles(serve_process, data_group_id=str(data_group_id("org"))) == groups(expected, "org")
    assert sorted(e["properties"]["i"] for e in export(serve_process) if e["event"] == "Buffered") == [0, 1, 2, 3, 4]


# ----------------------------------------------------------------------------------- mixpanel-utils
N_PROFILES = 2500  # three /engage pages: page 0, then pages 1 and 2 fetched concurrently


def utils_client(base: str) -> MixpanelUtils:
    mu = MixpanelUtils(
        SA_SECRET,
        token=TOKEN,
        service_account_username=SA_USER,
        project_id=1,
        timeout=60,
        max_retries=1,
        pool_size=4,
        read_pool_size=4,
    )
    mu.formatted_api = base + "/api"  # /api/2.0/engage (query_engage, export_people)
    mu.raw_api = base + "/api"  # /api/2.0/export
    mu.import_api = base  # /engage (people updates), /import
    return mu


@pytest.fixture
def utils_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="mixpanel_utils")
    return caplog


def no_client_complaints(caplog: pytest.LogCaptureFixture) -> None:
    complaints = [r.getMessage() for r in caplog.records if r.name == "mixpanel_utils" and r.levelno >= logging.WARNING]
    assert not complaints, "mixpanel-utils logged:\n" + "\n".join(complaints[:10])


def by_id(profiles: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    counts = Counter(p["$distinct_id"] for p in profiles)
    repeated = [pid for pid, n in counts.items() if n > 1]
    assert not repeated, f"profiles returned more than once: {repeated[:10]}"
    return {p["$distinct_id"]: p["$properties"] for p in profiles}


def plan(i: int) -> str:
    return ("free", "pro", "team")[i % 3]


def test_mixpanel_utils_people_bulk_updates_queries_and_export(
    serve_process: ServeProcess, tmp_path: Path, utils_log: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the library writes backup files (backup_*.json, import_backup.txt) to the cwd
    mu = utils_client(serve_process.base)
    ids = [f"p{i:04d}" for i in range(N_PROFILES)]
    model: dict[str, dict[str, Any]] = {
        pid: {"n": i, "plan": plan(i), "name": f"User {i}"} for i, pid in enumerate(ids)
    }

    # import_people: $set of each profile's $properties, batches of 2000 sent concurrently
    mu.import_people([{"$distinct_id": pid, "$properties": dict(props)} for pid, props in model.items()])
    no_client_complaints(utils_log)
    page0 = engage(serve_process)
    assert (page0["total"], page0["page_size"], len(page0["results"])) == (N_PROFILES, 1000, 1000)
    first = mu.query_engage()  # page 0, then pages 1 and 2 at once with page 0's session_id
    assert by_id(first) == model  # $ignore_time: no $last_seen

    # query_engage with `where` (one page) and `selector` (three pages)
    pro = mu.query_engage({"where": 'properties["plan"] == "pro"'})
    assert by_id(pro) == {pid: p for pid, p in model.items() if p["plan"] == "pro"}
    late = mu.query_engage({"selector": 'properties["n"] >= 100'})
    assert by_id(late) == {pid: p for pid, p in model.items() if p["n"] >= 100}

    # the bulk update methods, on profiles from a query or from a list
    team = {"where": 'properties["plan"] == "team"'}
    team_ids = {pid for pid, p in model.items() if p["plan"] == "team"}
    assert mu.people_set({"vip": True}, query_params=dict(team), backup_file="backup.json") == len(team_ids) == 833
    backup = json.loads((tmp_path / "backup.json").read_text())
    assert {p["$distinct_id"] for p in backup} == team_ids
    for pid in team_ids:
        model[pid]["vip"] = True
    chosen = [{"$distinct_id": pid} for pid in ids[:300]]
    mu.people_set_once({"name": "ignored", "source": "bulk"}, profiles=chosen)
    mu.people_add(lambda profile: {"score": int(profile["$distinct_id"][1:])}, profiles=chosen)
    mu.people_append({"pages": "home"}, profiles=chosen[:100])
    mu.people_union({"tags": ["a", "b"]}, profiles=chosen[:200])
    mu.people_remove({"tags": "a"}, profiles=chosen[:50])
    mu.people_unset(["name"], profiles=chosen[250:])
    for i, pid in enumerate(ids[:300]):
        p = model[pid]
        p.setdefault("source", "bulk")
        p["score"] = i
        if i < 100:
            p["pages"] = ["home"]
        if i < 200:
            p["tags"] = ["b"] if i < 50 else ["a", "b"]
        if i >= 250:
            del p["name"]
    deleted = mu.people_delete(query_params={"where": 'properties["n"] >= 2400'}, backup=False)
    assert deleted == 100
    for pid in ids[2400:]:
        del model[pid]
    no_client_complaints(utils_log)

    # export_people: the concurrent paginator over every profile, each exactly once
    out = tmp_path / "people.json"
    mu.export_people(str(out))
    assert by_id(json.loads(out.read_text())) == model
    assert len(model) == N_PROFILES - 100
    # one query checked against the /engage reference on the same state
    params = {"where": 'defined(properties["tags"]) and properties["score"] < 120', "output_properties": ["tags"]}
    reference = engage_oracle.engage({(1, None, pid): p for pid, p in model.items()}, params, project_id=1)
    assert isinstance(reference, dict) and reference["total"] == 120
    assert by_id(mu.query_engage(dict(params))) == {r["$distinct_id"]: r["$properties"] for r in reference["results"]}
    no_client_complaints(utils_log)
