"""`WarehouseCohortStore` on chDB: the round trip of the canonical form, ids unique across projects
(from `id_counters`, never reused), reads scoped to one project (checked by ClickHouse's own
`EXPLAIN indexes = 1`, as the tenant-guard test does), and the in-memory twin behaving alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from footfall.shared.cohorts import (
    CohortDefinition,
    CohortStore,
    MemoryCohortStore,
    WarehouseCohortStore,
    parse_cohort,
)
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.integration.query.test_tenant_guard import check_query

pytestmark = pytest.mark.warehouse

DYNAMIC = parse_cohort(
    {
        "name": "Buyers",
        "description": "ünïcode ✓",
        "is_visible": False,
        "selector": 'behaviors["b"] >= 2 and user["plan"] == "pro"',
        "behaviors": [{"name": "b", "window": "30d", "event_selectors": [{"event": "Purchase"}, {"event": "Refund"}]}],
    },
    existing={},
)
STATIC = parse_cohort({"name": "Imported", "distinct_ids": ["u2", "u1", 3]}, existing={})


def referencing(ref: int) -> CohortDefinition:
    body = {
        "name": f"uses {ref}",
        "selector": {"operator": "or", "children": [{"property": "cohort", "value": ref, "operator": "in"}]},
    }
    return parse_cohort(body, existing={ref: STATIC})


class Recording:
    """The warehouse, recording every query text and its parameters."""

    def __init__(self, inner: ClickHouseWarehouse) -> None:
        self.inner = inner
        self.queries: list[tuple[str, dict[str, Any]]] = []

    def query(self, text: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        self.queries.append((text, dict(parameters or {})))
        return self.inner.query(text, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(params=["warehouse", "memory"])
def store(request: pytest.FixtureRequest, clean_warehouse: ClickHouseWarehouse) -> Iterator[CohortStore]:
    if request.param == "memory":
        yield MemoryCohortStore()
    else:
        yield WarehouseCohortStore(clean_warehouse)


def test_round_trip(store: CohortStore) -> None:
    dynamic = store.create(3, DYNAMIC)
    static = store.create(3, STATIC)
    assert store.get(3, dynamic.id) == dynamic
    assert store.get(3, dynamic.id).canonical() == DYNAMIC.canonical()  # type: ignore[union-attr]
    assert store.get(3, static.id).definition.distinct_ids == ("3", "u1", "u2")  # type: ignore[union-attr]
    assert store.list(3) == [dynamic, static]
    assert store.list(3, [static.id, 999]) == [static]
    assert store.list(3, []) == []
    assert dynamic.created.count(":") == 2 and len(dynamic.created) == 19

    renamed = CohortDefinition("Renamed", STATIC.description, 1, distinct_ids=("x",))
    updated = store.update(3, static.id, renamed)
    assert updated is not None and updated.definition == renamed and updated.created_at == static.created_at
    assert updated.updated_at > static.updated_at
    again = store.update(3, static.id, STATIC)  # two versions within microseconds: the later one wins
    assert again is not None and store.get(3, static.id) == again

    assert store.delete(3, static.id) is True
    assert store.get(3, static.id) is None and store.list(3) == [dynamic]
    assert store.delete(3, static.id) is False
    assert store.update(3, static.id, STATIC) is None


def test_ids_are_unique_across_projects_and_never_reused(store: CohortStore) -> None:
    made = [store.create(pid, STATIC) for pid in (3, 8, 3, 8, 8)]
    ids = [c.id for c in made]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    store.delete(8, ids[-1])
    assert store.create(8, STATIC).id > ids[-1]


def test_reads_are_scoped_to_one_project(store: CohortStore) -> None:
    mine = store.create(3, STATIC)
    theirs = store.create(8, referencing(mine.id))  # (a cross-project reference the validator would refuse)
    assert store.get(8, mine.id) is None and store.list(8) == [theirs]
    assert store.update(8, mine.id, DYNAMIC) is None and store.delete(8, mine.id) is False
    assert store.get(3, mine.id) == mine
    assert store.referrers(3, mine.id) == []  # project 8's cohort is not seen from project 3


def test_referrers(store: CohortStore) -> None:
    base = store.create(3, STATIC)
    users = [store.create(3, referencing(base.id)) for _ in range(2)]
    store.create(3, DYNAMIC)
    assert store.referrers(3, base.id) == users


def test_counter_survives_a_new_store(clean_warehouse: ClickHouseWarehouse) -> None:
    first = WarehouseCohortStore(clean_warehouse).create(3, STATIC)
    second = WarehouseCohortStore(clean_warehouse).create(5, STATIC)
    assert second.id == first.id + 1


def test_every_cohort_read_carries_the_project_guard(clean_warehouse: ClickHouseWarehouse) -> None:
    recording = Recording(clean_warehouse)
    store = WarehouseCohortStore(recording)  # type: ignore[arg-type]
    for pid in (3, 8):
        store.create(pid, STATIC)
        store.create(pid, DYNAMIC)
    recording.queries.clear()
    store.list(3)
    store.list(3, [1, 2])
    store.get(3, 1)
    store.referrers(3, 1)
    store.update(3, 1, STATIC)
    store.delete(3, 2)
    reads = [(text, params) for text, params in recording.queries if "cohorts" in text and "id_counters" not in text]
    assert len(reads) >= 6
    for text, params in reads:
        checked, problems = check_query(clean_warehouse, text, params, 3)
        assert checked and not problems, (text, problems)
