"""`/events`, `/events/top`, `/events/names` against the oracle (tests/oracle/events.py),
and the materialised-aggregate route against the events-table route.

Same generated data as the segmentation tests (five projects and time zones, DST,
duplicates, late events). `now` is the dataset's clock, so "today", "yesterday", the
31-day window and `interval` back from now are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from footfall.services.query.reports import _common, events
from footfall.shared.sql import render
from tests import oracle
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import Case, ReportEnv, check_against_oracle, rng, serving

pytestmark = pytest.mark.warehouse

SEED = 20240305
PROJECTS = (1, 2, 3, 4, 5)
NAMES = '["App Open", "Purchase", "Ünïcødé ☃ Event", "Never Happened", "App Open"]'


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=1500)
    with serving(warehouse, dataset) as env:
        yield env, dataset


EVENTS: dict[str, Case] = {
    "general-day": lambda s: rng(s, event=NAMES, type="general", unit="day"),
    "unique-week": lambda s: rng(s, event=NAMES, type="unique", unit="week"),
    "average-month": lambda s: rng(s, event=NAMES, type="average", unit="month"),
    "unique-hour": lambda s: rng(s, event='["View Item"]', type="unique", unit="hour"),
    "minute-dst": lambda s: {
        "event": '["App Open","View Item"]',
        "type": "general",
        "unit": "minute",
        "from_date": "2024-03-31",
        "to_date": "2024-03-31",
    },
    "interval-days": lambda s: {"event": NAMES, "type": "general", "unit": "day", "interval": "5"},
    "interval-hours": lambda s: {"event": NAMES, "type": "unique", "unit": "hour", "interval": "30"},
    "interval-weeks": lambda s: {"event": NAMES, "type": "average", "unit": "week", "interval": "3"},
    "interval-minutes": lambda s: {"event": '["App Open"]', "type": "general", "unit": "minute", "interval": "90"},
    "dates-win-over-interval": lambda s: rng(s, event=NAMES, type="general", unit="day", interval="2"),
}
TOP: dict[str, dict[str, str]] = {
    "general": {"type": "general"},
    "unique-limit": {"type": "unique", "limit": "3"},
    "average": {"type": "average"},
}
NAMES_CASES: dict[str, dict[str, str]] = {
    "general": {"type": "general"},
    "unique-limit": {"type": "unique", "limit": "4"},
    "average": {"type": "average", "limit": "6"},
}


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", EVENTS, ids=list(EVENTS))
def test_events_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(
        env, dataset, project_id, "/events", EVENTS[case](dataset.projects[project_id]), oracle.events.events
    )


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", TOP, ids=list(TOP))
def test_top_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(env, dataset, project_id, "/events/top", TOP[case], oracle.events.top)


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", NAMES_CASES, ids=list(NAMES_CASES))
def test_names_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(env, dataset, project_id, "/events/names", NAMES_CASES[case], oracle.events.names)


# -- materialised route vs events table ------------------------------------------------------------
class _Ctx:
    """The parts of QueryContext the request parsers read."""

    def __init__(self, project_id: int, tz: str, params: dict[str, str]) -> None:
        from footfall.services.query.params import Params

        self.project_id, self.timezone, self.params = project_id, tz, Params(params)


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("unit", ["hour", "day", "week", "month"])
@pytest.mark.parametrize("kind", ["general", "unique", "average"])
def test_materialised_route_equals_events_table(
    loaded: tuple[ReportEnv, Dataset], project_id: int, unit: str, kind: str
) -> None:
    env, dataset = loaded
    spec = dataset.projects[project_id]
    params = {"event": NAMES, "type": kind, "unit": unit, "from_date": spec.from_date, "to_date": spec.to_date}
    req = events.EventsRequest.parse(_Ctx(project_id, spec.tz, params), dataset.now)  # type: ignore[arg-type]
    mv, raw, chosen = events.build_mv(req), events.build_raw(req), events.build(req)
    assert "event_counts_15m" in mv.text and "event_counts_15m" not in raw.text
    via_mv = events.shape(env.warehouse.query(mv.text, mv.binds.values), req)
    via_raw = events.shape(env.warehouse.query(raw.text, raw.binds.values), req)
    via_chosen = events.shape(env.warehouse.query(chosen.text, chosen.binds.values), req)
    assert via_mv == via_raw == via_chosen
    assert any(v for values in via_mv["data"]["values"].values() for v in values.values())


@pytest.mark.parametrize("project_id", PROJECTS)
def test_materialised_route_with_partial_quarters_equals_events_table(
    loaded: tuple[ReportEnv, Dataset], project_id: int
) -> None:
    """A window ending at `now` (not on a quarter hour) mixes aggregates and raw events."""
    env, dataset = loaded
    spec = dataset.projects[project_id]
    now = dataset.now - timedelta(minutes=7, seconds=13, milliseconds=5)
    window = events.last_31_days(project_id, spec.tz, now)
    assert _common.mv_covers(window, None)
    mv_binds, raw_binds = _common.Binds(), _common.Binds()
    mv = _common.counts_mv(window, None, None, mv_binds)
    raw = _common.counts_raw(window, None, None, raw_binds)
    via_mv = sorted(env.warehouse.query(render(mv), mv_binds.values))
    via_raw = sorted(env.warehouse.query(render(raw), raw_binds.values))
    assert via_mv == via_raw and via_mv
