"""Random small datasets against the oracle: /funnels, /retention and /retention/addiction.

Where the generated journeys are realistic, these are adversarial: a handful of users with
events 0, 0.5, 1.5, 2, 2.001 and 2.5 s apart (the grace edges), exactly one window or one
day apart, several events at the same millisecond (ties broken by event name and
`$insert_id`), duplicates in separate parts (unmerged) with the later copy ingested last,
an empty distinct_id, custom events that overlap other steps, selectors, and a range
across the New York DST change. Each case is checked in full against the oracle.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from footfall.services.query.params import Params
from footfall.services.query.reports import frequency, retention
from footfall.services.query.reports.funnels import build, parse_request, shape
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.store import store_batch
from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import validate_batch
from footfall.shared.saved import SavedFunnel, parse_funnel
from footfall.shared.streams import EVENTS
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.integration.query.report_env import diff
from tests.oracle import frequency as oracle_frequency
from tests.oracle import funnels as oracle_funnels
from tests.oracle import retention as oracle_retention

pytestmark = pytest.mark.warehouse

TZ = "America/New_York"
BASE = int(datetime(2024, 3, 9, 20, tzinfo=UTC).timestamp() * 1000)
NAMES = ["A", "B", "C", "D"]
GAPS = [0, 0, 500, 1500, 2000, 2001, 2500, 60_000, 3_600_000, 86_400_000, 86_400_001]
RANGE = {"from_date": "2024-03-09", "to_date": "2024-03-11"}


def _events(rng: random.Random, case: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for u in range(rng.randint(1, 6)):
        uid = rng.choice(["u1", "u2", ""]) if rng.random() < 0.2 else f"u{u}"
        t = BASE + rng.randint(0, 3 * 86_400_000)
        for _ in range(rng.randint(1, 12)):
            t += rng.choice(GAPS)
            e = {
                "event": rng.choice(NAMES),
                "properties": {
                    "time": t,
                    "distinct_id": uid,
                    "$insert_id": f"r{case}-{len(out)}-{rng.randint(0, 2)}",
                    "p": rng.choice(["x", "y", 1, None]),
                },
            }
            out.append(e)
            if rng.random() < 0.1:  # an exact duplicate
                out.append(json.loads(json.dumps(e)))
            if rng.random() < 0.15:  # another event at the same millisecond
                tie = json.loads(json.dumps(e))
                tie["event"] = rng.choice(NAMES)
                tie["properties"]["$insert_id"] += "z"
                tie["properties"]["p"] = rng.choice(["x", "y"])
                out.append(tie)
    return out


def _load(warehouse: ClickHouseWarehouse, events: list[dict[str, Any]]) -> None:
    warehouse.command("TRUNCATE TABLE events")
    valid, failures = validate_batch(
        events, project_id=1, strict=True, limits=ImportLimits(), now_ms=BASE + 10 * 86_400_000, body_bytes=0
    )
    assert not failures
    for ingested, event in enumerate(valid, start=1):  # one part per event: duplicates stay unmerged
        store_batch(EVENTS, warehouse, Enricher(None), [event], ingested)


def _funnel(rng: random.Random) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for k in range(rng.randint(1, 4)):
        if rng.random() < 0.25:
            steps.append({"custom_event": {"id": k + 1, "name": f"c{k}", "events": rng.sample(NAMES, 2)}})
        else:
            steps.append({"event": rng.choice(NAMES)})
        if rng.random() < 0.2:
            steps[-1]["selector"] = 'properties["p"] == "x"'
    return {
        "name": "random",
        "steps": steps,
        "length": rng.choice([1, 2, 90]),
        "length_unit": rng.choice(["second", "hour", "day"]),
    }


def _check(warehouse: ClickHouseWarehouse, events: list[dict[str, Any]], rng: random.Random) -> list[str]:
    problems: list[str] = []
    definition = _funnel(rng)
    name, parsed = parse_funnel(definition)
    saved = SavedFunnel(1, 1, name, parsed, datetime.now(UTC), datetime.now(UTC))
    params = {
        **RANGE,
        **rng.choice(
            [{}, {"unit": "week"}, {"interval": "2"}, {"on": 'properties["p"]'}, {"where": 'properties["p"] != 1'}]
        ),
    }
    req = parse_request(Params(params), saved, 1, TZ)
    q = build(req)
    got = shape(warehouse.query(q.text, q.binds.values), req)
    problems += [
        f"funnels {definition} {params}: {p}"
        for p in diff(got, oracle_funnels.funnels(events, TZ, params, definition))[:3]
    ]

    rparams = {
        **RANGE,
        "born_event": rng.choice(NAMES),
        "interval_count": "3",
        **rng.choice(
            [
                {},
                {"event": rng.choice(NAMES)},
                {"retention_type": "compounded"},
                {"retention_type": "compounded", "event": "A", "on": 'properties["p"]'},
                {"unbounded_retention": "1", "unit": "week"},
                {"interval": "2", "where": 'properties["p"] == "x"'},
            ]
        ),
    }
    rreq = retention.parse_request(Params(rparams), 1, TZ)
    rq = retention.build(rreq)
    got = retention.shape(warehouse.query(rq.text, rq.binds.values), rreq)
    problems += [f"retention {rparams}: {p}" for p in diff(got, oracle_retention.retention(events, TZ, rparams))[:3]]

    fparams = {
        **RANGE,
        **rng.choice(
            [
                {"unit": "day", "addiction_unit": "hour"},
                {"unit": "week", "addiction_unit": "day", "on": 'properties["p"]'},
            ]
        ),
    }
    freq = frequency.parse_request(Params(fparams), 1, TZ)
    fq = frequency.build(freq)
    got = frequency.shape(warehouse.query(fq.text, fq.binds.values), freq)
    problems += [f"frequency {fparams}: {p}" for p in diff(got, oracle_frequency.frequency(events, TZ, fparams))[:3]]
    return problems


@pytest.mark.parametrize("seed", range(6), ids=[f"seed{s}" for s in range(6)])
def test_random_cases_match_oracle(clean_warehouse: ClickHouseWarehouse, seed: int) -> None:
    rng = random.Random(seed)
    for case in range(4):
        events = _events(rng, case)
        _load(clean_warehouse, events)
        problems = _check(clean_warehouse, events, rng)
        assert not problems, f"seed {seed} case {case}:\n" + "\n".join(problems) + "\n" + json.dumps(events)[:4000]
