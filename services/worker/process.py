"""Pure processing of validated events into warehouse rows: enrich, drop in-batch
duplicates, serialise properties. No IO; the caller inserts the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from footfall.services.worker.enrich import Enricher
from footfall.shared.events import Event
from footfall.shared.events.model import event_dedup_key

EVENT_COLUMNS = (
    "project_id",
    "time",
    "event",
    "distinct_id",
    "insert_id",
    "properties",
    "city",
    "region",
    "country_code",
    "dedup_hash",
    "ingested_at",
)


@dataclass
class Batch:
    """Column-oriented rows for `events`, in EVENT_COLUMNS order, with their dedup keys."""

    columns: list[list[Any]] = field(default_factory=lambda: [[] for _ in EVENT_COLUMNS])
    keys: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)

    def subset(self, keep: list[int]) -> Batch:
        return Batch([[col[i] for i in keep] for col in self.columns], [self.keys[i] for i in keep])


def build_batch(events: list[Event], enricher: Enricher, ingested_at_ms: int) -> tuple[Batch, int]:
    """Rows for `events`; of several events with the same dedup key only the last is kept.

    The interface says the most recently ingested copy of a duplicate wins; inside one
    batch that is the later one. Returns the batch and how many in-batch duplicates were
    dropped. Times are integer milliseconds, which clickhouse-connect inserts into
    DateTime64(3) as ticks.
    """
    latest: dict[bytes, Event] = {}
    for e in events:
        latest[event_dedup_key(e)] = e  # re-assigning keeps the first position, last value
    dropped = len(events) - len(latest)
    batch = Batch()
    cols = batch.columns
    for key, e in latest.items():
        props = e.properties
        place = enricher.place(e.ip)
        if place.city or place.region or place.country_code:
            props = dict(props)
            if place.city:
                props["$city"] = place.city
            if place.region:
                props["$region"] = place.region
            if place.country_code:
                props["mp_country_code"] = place.country_code
        cols[0].append(e.project_id)
        cols[1].append(e.time_ms)
        cols[2].append(e.event)
        cols[3].append(e.distinct_id)
        cols[4].append(e.insert_id)
        cols[5].append(orjson.dumps(props).decode())
        cols[6].append(place.city)
        cols[7].append(place.region)
        cols[8].append(place.country_code)
        cols[9].append(key)
        cols[10].append(ingested_at_ms)
        batch.keys.append(key)
    return batch, dropped
