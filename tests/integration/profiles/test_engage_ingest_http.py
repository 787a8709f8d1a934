"""Profile and group updates over HTTP into the embedded store (chDB): random update
sequences sent to `/engage` and `/groups` in random batches end in the reference state; a
strict request reports the updates the store refused (type clashes) while applying the rest;
the group keys appear under the management interface's data groups."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from footfall.shared.profiles.groups import data_group_id
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.integration.profiles.test_profile_store_oracle import NOW_MS, random_update, stored_state
from tests.integration.query.report_env import SA_SECRET, SA_USER, ReportEnv, build_env
from tests.oracle import profiles as oracle

pytestmark = pytest.mark.warehouse

JSON = {"content-type": "application/json"}


@pytest.fixture
def env(warehouse: ClickHouseWarehouse) -> Iterator[ReportEnv]:
    e = build_env(warehouse, {1: "UTC", 2: "Europe/Berlin"})
    yield e
    e.close()


def token(project: int) -> str:
    return f"report-token-{project}"


@pytest.mark.parametrize("seed", range(4))
def test_random_updates_over_http_match_the_oracle(env: ReportEnv, seed: int) -> None:
    rng = random.Random(1000 + seed)
    sent: list[tuple[int, bool, dict[str, Any]]] = []
    for _ in range(150):
        project, is_group = rng.choice([1, 2]), rng.random() < 0.3
        raw = random_update(rng, is_group)
        raw["$token"] = token(project)
        raw.pop("$ip", None)  # no GeoIP database here
        raw.setdefault("$time", NOW_MS - rng.randint(0, 50) * 60_000)  # else the server's clock decides
        sent.append((project, is_group, raw))
    sent += [(p, g, dict(raw)) for p, g, raw in rng.sample(sent, 30)]  # retries, later
    rng.shuffle(sent)
    i = 0
    while i < len(sent):
        n = rng.randint(1, 40)
        chunk = sent[i : i + n]
        for path, is_group in (("/engage", False), ("/groups", True)):
            body = [raw for _, g, raw in chunk if g is is_group]
            if body:
                r = env.request("POST", path + "?ip=0", content=json.dumps(body), headers=JSON)
                assert r.status_code == 200 and r.text in ("0", "1"), r.text
        i += n
    reference = [
        oracle.parse_update(raw, received_ms=NOW_MS, kind="group" if g else "user", seq=k, project_id=p)
        for k, (p, g, raw) in enumerate(sent)
    ]
    expected = oracle.apply(reference)
    assert stored_state(env.warehouse) == {k: p.properties for k, p in expected.profiles.items()}


def test_strict_reports_what_the_store_refused(env: ReportEnv) -> None:
    def post(*updates: dict[str, Any]) -> Any:
        r = env.request("POST", "/engage?strict=1&ip=0", content=json.dumps(list(updates)), headers=JSON)
        return r.status_code, r.json()

    base = {"$token": token(1), "$distinct_id": "u"}
    assert post({**base, "$set": {"plan": "pro", "tags": ["a"]}, "$time": NOW_MS - 5000}) == (
        200,
        {"code": 200, "status": "OK", "num_good_events": 1},
    )
    status, body = post(
        {**base, "$add": {"plan": 1}, "$time": NOW_MS - 4000},
        {**base, "$union": {"tags": ["b"]}, "$time": NOW_MS - 3000},
        {**base, "$append": {"plan": "x"}, "$time": NOW_MS - 2000},
    )
    assert status == 400 and body["num_good_events"] == 1
    assert [(f["index"], f["field"]) for f in body["failed_records"]] == [(0, "$add"), (2, "$append")]
    assert "current value" in body["failed_records"][0]["message"]
    props = stored_state(env.warehouse)[(1, None, "u")]
    assert (props["plan"], props["tags"]) == ("pro", ["a", "b"])


def test_data_groups_list_the_group_keys(env: ReportEnv) -> None:
    for key in ("company", "team"):
        update = {"$token": token(2), "$group_key": key, "$group_id": "g1", "$set": {"n": 1}}
        assert env.request("POST", "/groups", content=json.dumps([update]), headers=JSON).text == "1"
    r = env.request("GET", "/api/app/projects/2/data-groups", auth=(SA_USER, SA_SECRET))
    assert r.status_code == 200, r.text
    assert env.request("GET", "/api/app/projects/1/data-groups", auth=(SA_USER, SA_SECRET)).json()["results"] == []
    assert r.json()["results"] == [
        {"data_group_id": data_group_id("company"), "property_name": "company"},
        {"data_group_id": data_group_id("team"), "property_name": "team"},
    ]
