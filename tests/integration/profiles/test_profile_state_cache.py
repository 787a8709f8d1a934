"""The profile store with a state cache (`footfall.shared.profiles.cache`, what `serve` uses)
against the plain-Python reference (`tests/oracle/profiles.py`): random sequences with a cache
that holds everything and one that keeps evicting; a data deletion between two batches (the
cache must forget the deleted profiles); a commit whose state insert fails after its log
insert (the cache must forget its profiles, whose stored states are then behind their logs).

Each test gives the cache to a wrapper of the session store (a warehouse of its own), so no
other test's store has one.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from footfall.services.app.data_deletion import erase
from footfall.shared.config import ImportLimits
from footfall.shared.profiles.cache import StateCache, state_cache, use_state_cache
from footfall.shared.profiles.store import store_updates
from footfall.shared.profiles.updates import ProfileUpdate, parse_update
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.warehouse import ClickHouseWarehouse, WarehouseError
from tests.integration.profiles.test_profile_store_oracle import (
    NOW_MS,
    Locator,
    oracle_geo,
    parse,
    random_update,
    stored_state,
)
from tests.oracle import profiles as oracle

pytestmark = pytest.mark.warehouse


class Store:
    """The session store under another identity, whose state insert can be made to fail once."""

    def __init__(self, inner: ClickHouseWarehouse) -> None:
        self.inner = inner
        self.fail_state_insert = False

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        return self.inner.command(sql, parameters)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.inner.query(sql, parameters)

    def query_columns(
        self, sql: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        return self.inner.query_columns(sql, parameters)

    def insert(self, table: str, columns: Any, data: Any, *, column_oriented: bool = False) -> None:
        if table == PROFILES.name and self.fail_state_insert:
            self.fail_state_insert = False
            raise WarehouseError("injected: the state insert failed")
        self.inner.insert(table, columns, data, column_oriented=column_oriented)

    async def run(self, fn: Any, *args: Any) -> Any:
        return await self.inner.run(fn, *args)

    def close(self) -> None:
        return None


def cached_store(warehouse: ClickHouseWarehouse, size: int = 1000) -> tuple[Store, StateCache]:
    store = Store(warehouse)
    cache = use_state_cache(store, size)
    assert cache is not None
    return store, cache


def user_update(distinct_id: str, op: str, value: Any, t: int) -> dict[str, Any]:
    return {"$token": "t", "$distinct_id": distinct_id, op: value, "$time": t}


def store_raws(store: Store, raws: list[dict[str, Any]], received_ms: int = NOW_MS) -> None:
    limits = ImportLimits()
    parsed = [
        parse_update(raw, i, project_id=1, group=False, limits=limits, now_ms=received_ms) for i, raw in enumerate(raws)
    ]
    assert all(isinstance(u, ProfileUpdate) for u in parsed)
    store_updates(store, Locator(), parsed, received_ms)  # type: ignore[arg-type]


def oracle_state(raws: list[dict[str, Any]]) -> dict[tuple[int, str | None, str], dict[str, Any]]:
    reference = [oracle.parse_update(raw, received_ms=NOW_MS, kind="user", seq=i) for i, raw in enumerate(raws)]
    return {key: p.properties for key, p in oracle.apply(reference, geo=oracle_geo).profiles.items()}


@pytest.mark.parametrize(
    ("seed", "size"), [(0, 1000), (1, 1000), (2, 2), (3, 3)], ids=["all-0", "all-1", "evicting-2", "evicting-3"]
)
def test_random_sequences_with_a_cache_match_the_oracle(
    clean_warehouse: ClickHouseWarehouse, seed: int, size: int
) -> None:
    store, cache = cached_store(clean_warehouse, size)
    assert cache.complete  # the store holds no profile yet
    rng = random.Random(500 + seed)
    raws = [
        (rng.choice([1, 2]), group, random_update(rng, group)) for group in (rng.random() < 0.3 for _ in range(150))
    ]
    raws += [(p, g, dict(raw)) for p, g, raw in rng.sample(raws, 30)]  # exact replays, later
    rng.shuffle(raws)
    parsed = [u for u in parse(raws) if isinstance(u, ProfileUpdate)]
    i = 0
    while i < len(parsed):  # random batches in arrival order: later ones hit the cache
        n = rng.randint(1, 20)
        store_updates(store, Locator(), parsed[i : i + n], NOW_MS)  # type: ignore[arg-type]
        i += n
    reference = [
        oracle.parse_update(raw, received_ms=NOW_MS, kind="group" if g else "user", seq=i, project_id=p)
        for i, (p, g, raw) in enumerate(raws)
    ]
    expected = {key: profile.properties for key, profile in oracle.apply(reference, geo=oracle_geo).profiles.items()}
    assert stored_state(clean_warehouse) == expected
    assert len(cache) <= size
    assert cache.complete == (size == 1000)


def test_a_data_deletion_empties_the_cache(clean_warehouse: ClickHouseWarehouse) -> None:
    store, cache = cached_store(clean_warehouse)
    t = NOW_MS - 600_000
    before = [
        user_update("u1", "$set", {"plan": "pro", "seats": 3}, t),
        user_update("u1", "$add", {"logins": 5}, t + 1000),
        user_update("u2", "$add", {"logins": 1}, t + 1000),
    ]
    store_raws(store, before)
    assert len(cache) == 2
    erase(store, 1, ("u1",))  # type: ignore[arg-type]
    assert len(cache) == 0 and not cache.complete
    after = [user_update("u1", "$add", {"logins": 1}, t + 2000), user_update("u2", "$add", {"logins": 1}, t + 2000)]
    store_raws(store, after)
    # u1 starts again from nothing (its state and log are gone); u2 keeps its history.
    want = oracle_state(before[2:] + after)
    assert stored_state(clean_warehouse) == want
    assert want[(1, None, "u1")]["logins"] == 1


def test_a_failed_state_insert_leaves_nothing_stale_in_the_cache(clean_warehouse: ClickHouseWarehouse) -> None:
    store, cache = cached_store(clean_warehouse)
    t = NOW_MS - 600_000
    first = [user_update(u, "$add", {"n": 1}, t) for u in ("a", "b")]
    store_raws(store, first)
    failed = [user_update("a", "$add", {"n": 10}, t + 1000), user_update("b", "$set", {"plan": "x"}, t + 1000)]
    store.fail_state_insert = True
    with pytest.raises(WarehouseError, match="injected"):
        store_raws(store, failed)  # logged, but the states were not written
    assert len(cache) == 0 and not cache.complete
    later = [user_update("a", "$add", {"n": 100}, t + 2000), user_update("b", "$add", {"n": 100}, t + 2000)]
    store_raws(store, later)
    # The next commit reads the states behind their logs and replays them: the failed batch counts.
    want = oracle_state(first + failed + later)
    assert stored_state(clean_warehouse) == want
    assert want[(1, None, "a")]["n"] == 111
    assert state_cache(store) is cache and len(cache) == 2
