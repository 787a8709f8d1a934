"""Group commit against the real store: concurrent requests' events, duplicates across them
included, are stored by fewer inserts than requests, and what the table holds is exactly what
a plain-Python reference says (one row per distinct dedup identity, the later copy's
properties winning)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson
import pytest

from footfall.services.standalone.sink import EmbeddedSink
from footfall.shared.config import ImportLimits
from footfall.shared.events import Event, validate_batch
from footfall.shared.streams import EVENTS, Place
from footfall.shared.warehouse import ClickHouseWarehouse

pytestmark = pytest.mark.warehouse

NOW_MS = 1_767_225_600_000


class NoPlace:
    def place(self, ip: str | None) -> Place:
        return Place()


def requests(rng: random.Random) -> list[list[Event]]:
    out = []
    for r in range(12):
        items: list[Any] = []
        for _ in range(rng.randint(50, 300)):
            n = rng.randint(0, 1500)  # collisions across requests: the same identity resent
            props = {"time": NOW_MS - n * 1000, "distinct_id": f"u{n % 40}", "$insert_id": f"id-{n}", "r": r}
            items.append({"event": f"e{n % 5}", "properties": props})
        events, failures = validate_batch(
            items, project_id=3, strict=True, limits=ImportLimits(), now_ms=NOW_MS, body_bytes=0
        )
        assert not failures
        out.append(events)
    return out


def test_concurrent_requests_share_inserts_and_store_what_the_reference_says(
    clean_warehouse: ClickHouseWarehouse,
) -> None:
    batches = requests(random.Random(17))
    sink = EmbeddedSink(clean_warehouse, NoPlace(), grouped={EVENTS.name})
    inserts: list[int] = []
    store = sink._store

    async def counting_store(stream: Any, items: list[Any]) -> dict[int, str]:
        inserts.append(len(items))
        return await store(stream, items)

    sink._store = counting_store  # type: ignore[method-assign]

    async def send() -> list[dict[int, str]]:
        return await asyncio.gather(*(sink.publish(EVENTS, b) for b in batches))

    assert asyncio.run(send()) == [{}] * len(batches)
    assert len(inserts) < len(batches)  # requests published together share an insert
    assert sum(inserts) == sum(len(b) for b in batches)

    # Reference: the last copy (in publishing order) of each identity wins.
    expected: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for batch in batches:
        for e in batch:
            expected[(e.insert_id, e.event, e.distinct_id, e.time_ms)] = e.properties
    rows = clean_warehouse.query(
        "SELECT insert_id, event, distinct_id, toUnixTimestamp64Milli(time), properties FROM events FINAL "
        "WHERE project_id = 3"
    )
    stored = {(i, e, d, t): orjson.loads(p) for i, e, d, t, p in rows}
    assert stored == expected
