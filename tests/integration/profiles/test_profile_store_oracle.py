"""The profile store against the plain-Python reference (`tests/oracle/profiles.py`).

Random update sequences — users and groups of several projects, every operation, out-of-order
`$time`s, exact replays, deletes and recreation, `$ignore_time`, type clashes, geolocation —
are validated by the service's validator and stored in random batches through
`store_updates` (log + materialised state, on chDB), in a random arrival order. The state
in `profiles` must equal the oracle's state for the same arrival order; with in-order
delivery the refused updates must be the oracle's clashes too.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from footfall.shared.config import ImportLimits
from footfall.shared.profiles.store import store_updates
from footfall.shared.profiles.updates import ProfileUpdate, UpdateFailure, parse_update
from footfall.shared.streams import Place, Stored
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.oracle import profiles as oracle

pytestmark = pytest.mark.warehouse

NOW_MS = 1_760_000_000_000
PLACES = {"81.2.69.160": Place("London", "England", "GB"), "2.125.160.216": Place("", "", "GB")}


class Locator:
    def place(self, ip: str | None) -> Place:
        return PLACES.get(ip or "", Place())


def oracle_geo(ip: str) -> dict[str, str]:
    place = PLACES.get(ip, Place())
    found = {"$city": place.city, "$region": place.region, "mp_country_code": place.country_code}
    return {k: v for k, v in found.items() if v}


def random_value(rng: random.Random) -> Any:
    return rng.choice([1, 2.5, -3, "a", "b", "ü" * 3, True, None, [1, "a"], {"k": 1}, "x" * 300, 0])


def random_update(rng: random.Random, group: bool) -> dict[str, Any]:
    update: dict[str, Any] = {"$token": "t"}
    if group:
        update["$group_key"] = rng.choice(["company", "team"])
        update["$group_id"] = rng.choice(["acme", "globex", 42])
        ops = ["$set", "$set_once", "$unset", "$remove", "$union", "$delete"]
    else:
        update["$distinct_id"] = rng.choice(["u1", "u2", "u3", 7])
        ops = ["$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete"]
    op = rng.choices(ops, weights=[5, 3, 4, 3, 3, 3, 2, 1][: len(ops)])[0]
    keys = ["plan", "n", "tags", "name", "score"]
    if op == "$unset":
        update[op] = rng.sample(keys, rng.randint(1, 2))
    elif op == "$delete":
        update[op] = ""
    elif op == "$add":
        update[op] = {rng.choice(keys): rng.choice([1, 2, 0.5, -1])}
    elif op == "$union":
        update[op] = {rng.choice(keys): [random_value(rng) for _ in range(rng.randint(0, 3))]}
    else:
        update[op] = {rng.choice(keys): random_value(rng) for _ in range(rng.randint(1, 3))}
    if rng.random() < 0.8:
        update["$time"] = (NOW_MS - rng.randint(0, 50) * 60_000) // (1000 if rng.random() < 0.5 else 1)
    if rng.random() < 0.2:
        update["$ignore_time"] = True
    if rng.random() < 0.2:
        update["$ip"] = rng.choice(list(PLACES))
    return update


def stored_state(warehouse: ClickHouseWarehouse) -> dict[tuple[int, str | None, str], dict[str, Any]]:
    rows = warehouse.query("SELECT project_id, group_key, profile_id, properties FROM profiles FINAL WHERE deleted = 0")
    return {(int(p), g or None, pid): orjson.loads(props) for p, g, pid, props in rows}


def parse(raws: list[tuple[int, bool, dict[str, Any]]]) -> list[ProfileUpdate | UpdateFailure]:
    limits = ImportLimits()
    return [
        parse_update(raw, i, project_id=p, group=g, limits=limits, now_ms=NOW_MS) for i, (p, g, raw) in enumerate(raws)
    ]


@pytest.mark.parametrize("seed", range(12))
def test_random_sequences_in_any_arrival_order_match_the_oracle(
    clean_warehouse: ClickHouseWarehouse, seed: int
) -> None:
    rng = random.Random(seed)
    raws: list[tuple[int, bool, dict[str, Any]]] = []
    for _ in range(rng.randint(40, 160)):
        project = rng.choice([1, 2])
        raws.append((project, rng.random() < 0.3, random_update(rng, rng.random() < 0.3)))
    in_order = seed % 3 == 0  # arrival in $time order: the refusals at arrival are final
    if in_order:
        for k, (_, _, raw) in enumerate(raws):
            raw["$time"] = NOW_MS - (len(raws) - k) * 1000
    raws += [(p, g, dict(raw)) for p, g, raw in rng.sample(raws, len(raws) // 5)]  # exact replays, later
    if not in_order:
        rng.shuffle(raws)
    parsed = parse(raws)
    reference = [
        oracle.parse_update(raw, received_ms=NOW_MS, kind="group" if g else "user", seq=i, project_id=p)
        for i, (p, g, raw) in enumerate(raws)
    ]
    # Both validators agree on what is valid.
    assert [isinstance(u, ProfileUpdate) for u in parsed] == [isinstance(u, oracle.Update) for u in reference]

    refused: set[int] = set()
    i = 0
    while i < len(parsed):  # random batches, in arrival order
        n = rng.randint(1, 25)
        batch = [(j, u) for j, u in enumerate(parsed[i : i + n], start=i) if isinstance(u, ProfileUpdate)]
        stored = store_updates(clean_warehouse, Locator(), [u for _, u in batch], NOW_MS)
        refused |= {batch[k][0] for k in stored.refused}
        i += n

    expected = oracle.apply(reference, geo=oracle_geo)
    want = {key: profile.properties for key, profile in expected.profiles.items()}
    assert stored_state(clean_warehouse) == want
    if in_order:
        assert refused == set(expected.rejected)


def test_a_late_update_is_replayed_into_place(clean_warehouse: ClickHouseWarehouse) -> None:
    def upd(op: str, value: Any, t: int) -> ProfileUpdate:
        raw = {"$token": "t", "$distinct_id": "u", op: value, "$time": t}
        parsed = parse_update(raw, 0, project_id=1, group=False, limits=ImportLimits(), now_ms=NOW_MS)
        assert isinstance(parsed, ProfileUpdate)
        return parsed

    t = NOW_MS - 600_000
    store_updates(clean_warehouse, Locator(), [upd("$set", {"plan": "pro"}, t + 2000)], NOW_MS)
    store_updates(clean_warehouse, Locator(), [upd("$set", {"plan": "free", "seats": 3}, t + 1000)], NOW_MS)
    assert stored_state(clean_warehouse)[(1, None, "u")]["plan"] == "pro"  # the later $time wins
    store_updates(clean_warehouse, Locator(), [upd("$delete", "", t)], NOW_MS)  # older than both
    assert stored_state(clean_warehouse)[(1, None, "u")]["seats"] == 3
    store_updates(clean_warehouse, Locator(), [upd("$delete", "", t + 3000)], NOW_MS)
    assert (1, None, "u") not in stored_state(clean_warehouse)


def test_a_state_behind_its_log_is_rebuilt(clean_warehouse: ClickHouseWarehouse) -> None:
    """A crash between the log insert and the state insert leaves the state behind; the next
    batch of that profile notices (the log's newest seq) and replays."""
    parsed = parse_update(
        {"$token": "t", "$distinct_id": "u", "$add": {"n": 1}},
        0,
        project_id=1,
        group=False,
        limits=ImportLimits(),
        now_ms=NOW_MS,
    )
    assert isinstance(parsed, ProfileUpdate)
    store_updates(clean_warehouse, Locator(), [parsed], NOW_MS)
    clean_warehouse.command("TRUNCATE TABLE profiles")  # as if the state insert never happened
    later = parse_update(
        {"$token": "t", "$distinct_id": "u", "$add": {"n": 10}},
        0,
        project_id=1,
        group=False,
        limits=ImportLimits(),
        now_ms=NOW_MS + 1000,
    )
    assert isinstance(later, ProfileUpdate)
    store_updates(clean_warehouse, Locator(), [later], NOW_MS + 1000)
    assert stored_state(clean_warehouse)[(1, None, "u")]["n"] == 11


@pytest.mark.parametrize("seed", range(3))
def test_concurrent_batches_on_the_same_profiles_match_the_oracle(
    clean_warehouse: ClickHouseWarehouse, seed: int
) -> None:
    """Batches stored from several threads at once (as concurrent `/engage` requests of one
    `serve` are; the store commits them in groups) give the oracle's state, and every update
    is either logged once or dropped as a replay. Every `$time` is distinct, so the state does
    not depend on which batch arrived first."""
    rng = random.Random(100 + seed)
    raws: list[tuple[int, bool, dict[str, Any]]] = []
    for k in range(rng.randint(200, 300)):
        group = rng.random() < 0.3
        raw = random_update(rng, group)
        raw["$time"] = NOW_MS - k * 1000 - rng.randint(0, 999)
        raws.append((rng.choice([1, 2]), group, raw))
    raws += [(p, g, dict(raw)) for p, g, raw in rng.sample(raws, len(raws) // 5)]  # exact replays
    rng.shuffle(raws)
    parsed = [u for u in parse(raws) if isinstance(u, ProfileUpdate)]
    reference = [
        oracle.parse_update(raw, received_ms=NOW_MS, kind="group" if g else "user", seq=i, project_id=p)
        for i, (p, g, raw) in enumerate(raws)
    ]
    batches: list[list[ProfileUpdate]] = []
    i = 0
    while i < len(parsed):
        n = rng.randint(5, 40)
        batches.append(parsed[i : i + n])
        i += n
    start = threading.Barrier(6)

    def send(chunk: list[list[ProfileUpdate]]) -> list[Stored]:
        start.wait()
        return [store_updates(clean_warehouse, Locator(), batch, NOW_MS) for batch in chunk]

    with ThreadPoolExecutor(6) as pool:
        results = [s for out in pool.map(send, [batches[k::6] for k in range(6)]) for s in out]

    keys = [key for stored in results for key in stored.keys]
    assert len(keys) == len(set(keys))  # no update logged twice
    assert len(keys) + sum(stored.dropped for stored in results) == len(parsed)
    expected = oracle.apply(reference, geo=oracle_geo)
    assert stored_state(clean_warehouse) == {key: profile.properties for key, profile in expected.profiles.items()}
