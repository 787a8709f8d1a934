"""`/segmentation*` against the oracle (tests/oracle/segmentation.py) on generated data.

Five projects (UTC, America/New_York, Europe/Berlin, Australia/Lord_Howe with its
30-minute DST change, Asia/Kolkata +05:30), imported through `/import` with duplicates,
conflicting copies, late events, events on bucket edges and DST transitions, missing
properties, numbers as strings, lists, booleans, nulls and unicode. Every response must
equal the oracle's body (floats within 1e-9).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import oracle
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import Case, ReportEnv, check_against_oracle, rng, serving

pytestmark = pytest.mark.warehouse

SEED = 20240304
PROJECTS = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=1500)
    with serving(warehouse, dataset) as env:
        yield env, dataset


SEGMENTATION: dict[str, Case] = {
    "plain": lambda s: rng(s, event="View Item"),
    "unique-hour": lambda s: rng(s, event="App Open", type="unique", unit="hour"),
    "average-week": lambda s: rng(s, event="App Open", type="average", unit="week"),
    "month": lambda s: rng(s, event="Purchase", unit="month"),
    "minute-dst-days": lambda s: {
        "event": "App Open",
        "unit": "minute",
        "from_date": "2024-04-06",
        "to_date": "2024-04-07",
    },
    "interval-unique": lambda s: rng(s, event="App Open", type="unique", interval="3"),
    "interval-ignored-for-general": lambda s: rng(s, event="App Open", interval="3"),
    "no-events": lambda s: rng(s, event="Never Happened"),
    "unicode-event": lambda s: rng(s, event="Ünïcødé ☃ Event", type="unique"),
    "on-where": lambda s: rng(s, event="View Item", on='properties["$browser"]', where='properties["plan"] == "pro"'),
    "on-list-unique-limit": lambda s: rng(s, event="View Item", on='properties["tags"]', type="unique", limit="3"),
    "on-mixed-numbers": lambda s: rng(s, event="Purchase", on='properties["price"]'),
    "on-booleans-average": lambda s: rng(s, event="App Open", on='properties["is_trial"]', type="average"),
    "on-unicode-key": lambda s: rng(
        s, event="Sign Up", on='properties["ключ"]', where='defined(properties["utm_source"])'
    ),
    "on-unicode-values": lambda s: rng(s, event="Search", on='properties["note"]', unit="week"),
    "on-long-text": lambda s: rng(s, event="App Open", on='properties["long_text"]'),
    "on-object": lambda s: rng(s, event="App Open", on='properties["meta"]'),
    "on-nested-list": lambda s: rng(s, event="View Item", on='properties["nested_list"]', type="unique"),
    "on-string-cast": lambda s: rng(s, event="Add To Cart", on='string(properties["quantity"])', unit="hour"),
    "on-arith": lambda s: rng(s, event="Purchase", on='floor(number(properties["amount"]) / 1000)'),
    "where-number": lambda s: rng(s, event="View Item", where='number(properties["amount"]) >= 2000'),
    "where-substring": lambda s: rng(s, event="page view", where='"Facebook" in properties["referrer"]'),
    "where-not-defined": lambda s: rng(s, event="App Open", where='not defined(properties["plan"])', type="unique"),
    "where-list-member": lambda s: rng(
        s, event="App Open", where='17 in properties["account_ids"] or "vip" in properties["tags"]'
    ),
    "where-time": lambda s: rng(s, event="App Open", where='properties["time"] >= datetime("2024-03-20T12:00:00")'),
    "where-distinct-id": lambda s: rng(s, event="App Open", on='properties["distinct_id"]', limit="5"),
    "limit-1": lambda s: rng(s, event="App Open", on='properties["$os"]', limit="1"),
}

NUMERIC: dict[str, Case] = {
    "amount": lambda s: rng(s, event="View Item", on='properties["amount"]'),
    "price-cast-5": lambda s: rng(s, event="Purchase", on='number(properties["price"])', buckets="5"),
    "score-unique": lambda s: rng(s, event="App Open", on='properties["score"]', type="unique"),
    "ratio-average-hour": lambda s: rng(s, event="App Open", on='properties["ratio"]', type="average", unit="hour"),
    "quantity-where": lambda s: rng(
        s, event="Add To Cart", on='properties["quantity"]', where='properties["flag"] == true'
    ),
    "constant": lambda s: rng(s, event="App Open", on='properties["ratio"] * 0 + 7'),
    "nothing-numeric": lambda s: rng(s, event="App Open", on='properties["$browser"]'),
}

SUM_AVERAGE: dict[str, Case] = {
    "price": lambda s: rng(s, event="Purchase", on='properties["price"]'),
    "cast-hour": lambda s: rng(s, event="View Item", on='number(properties["amount"])', unit="hour"),
    "arith-where": lambda s: rng(
        s, event="App Open", on='properties["score"] * 2 - 1', where='properties["$os"] != "iOS"'
    ),
    "no-events": lambda s: rng(s, event="Never Happened", on='properties["price"]'),
}


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", SEGMENTATION, ids=list(SEGMENTATION))
def test_segmentation_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    params = SEGMENTATION[case](dataset.projects[project_id])
    check_against_oracle(env, dataset, project_id, "/segmentation", params, oracle.segmentation.segmentation)


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", NUMERIC, ids=list(NUMERIC))
def test_numeric_equals_oracle(loaded: tuple[ReportEnv, Dataset], case: str, project_id: int) -> None:
    env, dataset = loaded
    params = NUMERIC[case](dataset.projects[project_id])
    check_against_oracle(env, dataset, project_id, "/segmentation/numeric", params, oracle.segmentation.numeric)


@pytest.mark.parametrize("project_id", PROJECTS)
@pytest.mark.parametrize("case", SUM_AVERAGE, ids=list(SUM_AVERAGE))
@pytest.mark.parametrize("path", ["/segmentation/sum", "/segmentation/average"])
def test_sum_and_average_equal_oracle(loaded: tuple[ReportEnv, Dataset], path: str, case: str, project_id: int) -> None:
    env, dataset = loaded
    params = SUM_AVERAGE[case](dataset.projects[project_id])
    reference = oracle.segmentation.sum_ if path.endswith("sum") else oracle.segmentation.average
    check_against_oracle(env, dataset, project_id, path, params, reference)


def test_store_holds_unmerged_and_conflicting_duplicates(loaded: tuple[ReportEnv, Dataset]) -> None:
    """The comparisons above are only meaningful if the table really holds duplicates
    (exact retries and copies with different properties) that no merge removed."""
    env, _ = loaded
    ((rows, distinct, conflicting),) = env.warehouse.query(
        "SELECT count(), uniqExact(dedup_hash), "
        "(SELECT count() FROM (SELECT dedup_hash FROM events GROUP BY dedup_hash HAVING uniqExact(properties) > 1)) "
        "FROM events"
    )
    assert rows - distinct > 100
    assert conflicting > 10
