"""Cohort membership computed by the warehouse (`footfall.shared.cohorts.membership`) against the
plain-Python reference (`tests/oracle/cohorts.py`) on generated data: several projects and time
zones (DST changes), duplicates (conflicting copies: the newest decides a selector), ids
without profiles, profiles without events, random dynamic cohorts (behaviours with day, week,
month and date-range windows, `absolute` and `days` counts, event selectors as text and as
trees; profile leaves of every operator and type; references, negated ones too) and static
cohorts. Every cohort's member set and count must equal the reference's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from footfall.shared.cohorts.membership import counts_sql, members_sql
from footfall.shared.sql import Params, render
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.factories import Dataset, make_dataset
from tests.integration.cohorts.data import load_profiles, random_cohort
from tests.integration.query.report_env import ReportEnv, serving
from tests.oracle import cohorts as oracle

pytestmark = pytest.mark.warehouse

SEED = 20241113


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[tuple[ReportEnv, Dataset, dict[int, dict[str, dict]]]]:
    dataset = make_dataset(SEED, n_events=1200, zones={1: "Europe/Berlin", 2: "America/New_York", 3: "UTC"})
    with serving(warehouse, dataset) as env:
        yield env, dataset, load_profiles(env, dataset, random.Random(SEED))


def _cohorts(rng: random.Random, n: int) -> dict[int, oracle.Cohort]:
    made: dict[int, oracle.Cohort] = {}
    while len(made) < n:
        cohort_id = 100 + len(made)
        parsed = oracle.parse_cohort(random_cohort(rng, list(made)), existing=made, cohort_id=cohort_id)
        if isinstance(parsed, oracle.Cohort):
            made[cohort_id] = parsed
    return made


def canonical(cohorts: dict[int, oracle.Cohort]) -> dict[int, dict[str, Any]]:
    return {cid: {**c.definition(), "is_static": c.is_static} for cid, c in cohorts.items()}


@pytest.mark.parametrize("round_", range(6))
def test_counts_and_members_match_the_reference(
    loaded: tuple[ReportEnv, Dataset, dict[int, dict[str, dict]]], round_: int
) -> None:
    env, dataset, profiles = loaded
    rng = random.Random(SEED + round_)
    for pid, spec in dataset.projects.items():
        cohorts = _cohorts(rng, 8)
        definitions = canonical(cohorts)
        now = dataset.now - timedelta(days=rng.choice([0, 3, 11]), hours=rng.choice([0, 5]))
        now_ms = int(now.timestamp() * 1000)
        expected = {
            cid: oracle.members(cid, cohorts, events=spec.events, profiles=profiles[pid], tz=spec.tz, now_ms=now_ms)
            for cid in cohorts
        }
        ids = sorted(cohorts)
        b = Params()
        (row,) = env.warehouse.query(render(counts_sql(ids, definitions, pid, spec.tz, now, b)), b.values)
        dynamic = [cid for cid in ids if not cohorts[cid].is_static]
        got_counts = dict(zip(dynamic, (int(v) for v in row), strict=False))
        assert got_counts == {cid: len(expected[cid]) for cid in dynamic}, (pid, definitions)
        for cid in ids:
            b = Params()
            rows = env.warehouse.query(render(members_sql(cid, definitions, pid, spec.tz, now, b)), b.values)
            assert {r[0] for r in rows} == expected[cid], (pid, cid, definitions[cid])


def test_the_rounds_exercise_restricted_and_windowed_scans() -> None:
    """The rounds above compare statements in which behaviours with event selectors are scanned
    for the ids that meet their cohort's condition on plain behaviours only (`_restrict`), and
    scans whose behaviours have different windows (each event read in its own window only):
    neither shortcut is left untested. A condition that ids without events meet (`< 1`) never
    restricts (those ids are not in the plain scan)."""
    from datetime import UTC, datetime

    from footfall.shared.cohorts.membership import _Compiler

    restricted = windows = 0
    for round_ in range(6):
        rng = random.Random(SEED + round_)
        for _pid in (1, 2, 3):
            definitions = canonical(_cohorts(rng, 8))
            compiler = _Compiler(definitions, datetime(2024, 4, 1, tzinfo=UTC), "UTC", Params())
            for cid, definition in definitions.items():
                if not definition["is_static"]:
                    compiler.cohort(cid)
            restricted += bool(compiler.needs)
            windows += len({(b.start, b.end) for b in compiler.behaviours}) > 1
    assert restricted >= 4 and windows >= 10, (restricted, windows)

    selector = {"property": "event", "value": "plan", "operator": "==", "operand": "pro", "type": "string"}
    behaviours = {
        "plain": {"count": {"event_selector": {"event": "a", "selector": None}}, "window": {"unit": "day", "value": 7}},
        "chosen": {
            "count": {"event_selector": {"event": "b", "selector": selector}},
            "window": {"unit": "day", "value": 7},
        },
    }

    def needs(operator: str, operand: int) -> int:
        leaves = [
            {"property": "behaviors", "value": "plain", "operator": operator, "operand": operand},
            {"property": "behaviors", "value": "chosen", "operator": ">=", "operand": 1},
        ]
        cohort = {"is_static": False, "behaviors": behaviours, "selector": {"operator": "and", "children": leaves}}
        compiler = _Compiler({1: cohort}, datetime(2024, 4, 1, tzinfo=UTC), "UTC", Params())
        compiler.cohort(1)
        return len(compiler.needs)

    assert (needs(">=", 2), needs("<", 1), needs("==", 0), needs("!=", 0)) == (1, 0, 0, 1)
