"""`/events/properties`, `/events/properties/top`, `/events/properties/values` against the
oracle (tests/oracle/properties.py) on the generated five-project dataset."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import oracle
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import Case, ReportEnv, check_against_oracle, rng, serving

pytestmark = pytest.mark.warehouse

SEED = 20240306
PROJECTS = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=1500)
    with serving(warehouse, dataset) as env:
        yield env, dataset


PROPERTIES: dict[str, Case] = {
    "browser": lambda s: rng(s, event="View Item", name="$browser", type="general", unit="day"),
    "plan-unique-week": lambda s: rng(s, event="App Open", name="plan", type="unique", unit="week"),
    "tags-values": lambda s: rng(
        s, event="View Item", name="tags", values='["vip", "new", "🎉", "absent"]', type="general", unit="day"
    ),
    "price-values-mixed": lambda s: rng(
        s, event="Purchase", name="price", values='[42, "9.99", 150.25, true]', type="average", unit="month"
    ),
    "is-trial": lambda s: rng(s, event="App Open", name="is_trial", type="general", unit="hour"),
    "unicode-key-limit": lambda s: rng(s, event="Sign Up", name="ключ", type="unique", unit="day", limit="1"),
    "missing-property": lambda s: rng(s, event="App Open", name="not_a_property", type="general", unit="day"),
    "interval": lambda s: {"event": "App Open", "name": "$os", "type": "general", "unit": "day", "interval": "7"},
}
TOP: dict[str, dict[str, str]] = {
    "app-open": {"event": "App Open"},
    "purchase-limit": {"event": "Purchase", "limit": "4"},
    "unicode-event": {"event": "Ünïcødé ☃ Event", "limit": "30"},
}
VALUES: dict[str, dict[str, str]] = {
    "plan": {"event": "Purchase", "name": "plan"},
    "tags-all-events": {"name": "tags"},
    "price-limit": {"event": "Purchase", "name": "price", "limit": "3"},
    "note-unicode": {"event": "Search", "name": "note"},
}


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", PROPERTIES, ids=list(PROPERTIES))
def test_properties_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(
        env,
        dataset,
        project_id,
        "/events/properties",
        PROPERTIES[case](dataset.projects[project_id]),
        oracle.properties.properties,
    )


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", TOP, ids=list(TOP))
def test_top_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(env, dataset, project_id, "/events/properties/top", TOP[case], oracle.properties.top)


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", VALUES, ids=list(VALUES))
def test_values_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    check_against_oracle(env, dataset, project_id, "/events/properties/values", VALUES[case], oracle.properties.values)
