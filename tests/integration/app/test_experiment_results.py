"""Experiment exposures and results from stored events (semantics-2.md §16.6) against the oracle.

Generated exposures (several per user, variant switches, same-millisecond ties, other experiments,
unknown and non-string variants, empty distinct ids, exposures outside the dates) and metric events
(before the first exposure, past the 90-day window, after the end, duplicates re-sent with the same
insert id) go through the real `/import`; the experiment is created, launched and concluded through
the API; its caches are compared with `tests/oracle/experiments.py` while active, at conclusion,
after a re-conclusion with another end date, and stay frozen when events arrive later.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from footfall.services.app.experiments import WarehouseExperimentStore, experiment_routes, warehouse_results
from footfall.services.app.experiments.results import Analysis, build
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.schema import hot
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.integration.query.report_env import SA_SECRET, SA_USER, ReportEnv, build_env, import_events
from tests.oracle._common import prepare
from tests.oracle.experiments import reference

pytestmark = pytest.mark.warehouse

T0 = datetime(2025, 1, 1, tzinfo=UTC)
VARIANTS = ["control", "b", "c"]
BASE = "/api/app/workspaces/1/experiments"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def generate(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    counter = 0

    def add(name: str, user: str, at: int, **props: Any) -> None:
        nonlocal counter
        counter += 1
        events.append(
            {"event": name, "properties": {"time": at, "distinct_id": user, "$insert_id": f"i{counter}", **props}}
        )

    for u in range(240):
        user = f"user-{u}"
        variant = rng.choice(VARIANTS)
        first = T0 + timedelta(days=rng.uniform(0, 25))
        for k in range(rng.choice([1, 1, 2, 3])):
            at = _ms(first + timedelta(days=rng.uniform(0, 40) if k else 0))
            chosen = variant if rng.random() < 0.8 else rng.choice(VARIANTS)  # some users switch
            add("$experiment_started", user, at, **{"Experiment name": "Checkout", "Variant name": chosen})
            if rng.random() < 0.1:  # a same-millisecond exposure to another variant
                other = rng.choice([v for v in VARIANTS if v != chosen])
                add("$experiment_started", user, at, **{"Experiment name": "Checkout", "Variant name": other})
        noise = rng.random()
        if noise < 0.1:
            add("$experiment_started", user, _ms(first), **{"Experiment name": "Other", "Variant name": "b"})
        elif noise < 0.15:
            add("$experiment_started", user, _ms(first), **{"Experiment name": "Checkout", "Variant name": "zzz"})
        elif noise < 0.2:
            add("$experiment_started", user, _ms(first), **{"Experiment name": "Checkout", "Variant name": 1})
        lift = {"control": 0.0, "b": 0.15, "c": -0.1}[variant]
        for _ in range(rng.choice([0, 0, 1, 2, 4])):
            at = _ms(T0 + timedelta(days=rng.uniform(-5, 170 if rng.random() < 0.3 else 60)))
            add("Purchase", user, at, amount=rng.randint(1, 100))
        if rng.random() < 0.3 + lift:
            add("Purchase", user, _ms(first + timedelta(hours=rng.uniform(0, 48))), amount=rng.randint(40, 100))
    add("$experiment_started", "", _ms(T0 + timedelta(days=3)), **{"Experiment name": "Checkout", "Variant name": "b"})
    add("Purchase", "", _ms(T0 + timedelta(days=3)), amount=5)
    # duplicates: the same event re-sent (same insert id); the last copy wins
    for raw in rng.sample(events, 40):
        copy = {"event": raw["event"], "properties": dict(raw["properties"])}
        if raw["event"] == "Purchase":
            copy["properties"]["amount"] = 77
        events.append(copy)
    return events


SPEC = {
    "exposure_event": "$experiment_started",
    "name_property": "Experiment name",
    "variant_property": "Variant name",
    "experiment_name": "Checkout",
    "variants": VARIANTS,
    "control": "control",
    "confidence": 0.95,
    "metrics": [
        {"id": "m1", "type": "conversion", "event": "Purchase"},
        {"id": "spend", "type": "total", "event": "Purchase"},
        {"id": "big", "type": "conversion", "event": "Purchase", "selector": 'properties["amount"] > 50'},
    ],
}


def _add_routes(env: ReportEnv, warehouse: ClickHouseWarehouse) -> None:
    authenticator = Authenticator(MetadataRepository(warehouse).load_directory())
    routes = experiment_routes(authenticator, WarehouseExperimentStore(warehouse), warehouse_results(warehouse))
    env.app.router.routes[:0] = routes


def _compare(got: dict[str, Any], want: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    exposures, metrics = want
    cache = got["exposures_cache"]
    assert {"total": cache["total"], "variants": cache["variants"]} == exposures
    assert [m["id"] for m in got["results_cache"]["metrics"]] == [m["id"] for m in metrics]
    for mine, theirs in zip(got["results_cache"]["metrics"], metrics, strict=True):
        for key, cell in theirs["variants"].items():
            have = mine["variants"][key]
            for field in ("value", "lift", "p_value"):
                where = (mine["id"], key, field, have[field], cell[field])
                if cell[field] is None:
                    assert have[field] is None, where
                else:
                    assert have[field] == pytest.approx(cell[field], rel=1e-9, abs=1e-12), where
            assert have["exposures"] == cell["exposures"] and have["significant"] == cell["significant"]


@pytest.mark.parametrize("hot_names", [(), ("Experiment name", "Variant name")], ids=["json", "hot-columns"])
def test_results_match_the_oracle(clean_warehouse: ClickHouseWarehouse, hot_names: tuple[str, ...]) -> None:
    """Against the oracle, with the exposure properties read from the JSON text and from hot
    property columns (the statement reads them through the compiler's property seam)."""
    before = hot.in_use()
    assert hot.ensure(clean_warehouse, hot_names) == hot_names  # before the data: parts store them
    hot.use(hot_names)
    if hot_names:  # the statement reads the columns, not the text
        at = datetime(2025, 1, 1, tzinfo=UTC)
        text, _ = build(Analysis(1, "$experiment_started", *hot_names, "x", ("a", "b"), (), at, at))
        assert all(hot.column_name(n) in text for n in hot_names) and "(properties," not in text, text
    env = build_env(clean_warehouse, {1: "UTC"})
    try:
        _add_routes(env, clean_warehouse)
        raw = generate(7)
        import_events(env, 1, raw)
        events = prepare(raw)
        auth = (SA_USER, SA_SECRET)
        body = {
            "name": "Checkout",
            "variants": [{"key": "control", "is_control": True}, {"key": "b"}, {"key": "c"}],
            "metrics": [{k: v for k, v in m.items() if k != "type"} | {"type": m["type"]} for m in SPEC["metrics"]],
        }
        created = env.request("POST", BASE, json=body, auth=auth)
        assert created.status_code == 201, created.text
        url = f"{BASE}/{created.json()['results']['id']}"
        start = T0 + timedelta(days=1)
        assert env.request("PATCH", url, json={"start_date": "2025-01-02"}, auth=auth).status_code == 200
        active = env.request("PUT", url + "/launch", auth=auth).json()["results"]
        assert active["start_date"] == "2025-01-02T00:00:00Z"
        start_s = int(start.timestamp())
        _compare(active, reference(events, SPEC, start_s, int(datetime.now(UTC).timestamp())))
        assert active["exposures_cache"]["total"] > 150

        end = T0 + timedelta(days=100, hours=12)
        concluded = env.request("PUT", url + "/force_conclude", json={"end_date": "2025-04-11T12:00:00Z"}, auth=auth)
        assert concluded.status_code == 200, concluded.text
        frozen = concluded.json()["results"]
        assert frozen["status"] == "concluded" and frozen["end_date"] == "2025-04-11T12:00:00Z"
        want = reference(events, SPEC, start_s, int(end.timestamp()))
        _compare(frozen, want)
        assert any(c["p_value"] is not None for m in want[1] for c in m["variants"].values())

        # events arriving after the conclusion do not change the frozen results
        late = [
            {"event": "Purchase", "properties": {"time": _ms(T0 + timedelta(days=30)), "distinct_id": f"user-{u}",
                                                 "$insert_id": f"late{u}", "amount": 99}}
            for u in range(0, 240, 3)
        ]  # fmt: skip
        import_events(env, 1, late)
        again = env.request("GET", url, auth=auth).json()["results"]
        assert again["results_cache"] == frozen["results_cache"]
        # concluding again with another end date recomputes over the events stored now
        moved = env.request("POST", url + "/force_conclude", json={"end_date": "2025-02-15"}, auth=auth)
        end2 = int(datetime(2025, 2, 16, tzinfo=UTC).timestamp()) - 1
        _compare(moved.json()["results"], reference(prepare(raw + late), SPEC, start_s, end2))
    finally:
        hot.use(before)
        env.close()
