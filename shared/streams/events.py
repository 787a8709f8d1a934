"""The events stream: `/import` (and `/track`) events, stored in the `events` table.

Kafka envelope:

    key     = b"<project_id>:<distinct_id>"
    value   = {"v": 1, "p": project_id, "e": event, "t": time_ms, "d": distinct_id,
               "i": insert_id, "pr": properties, "ip": ip | null}

The value depends only on the event, so a retried event is byte-for-byte the same record
value: workers hash it (`footfall.shared.kafka.content_digest`) to tell a plain retry
(dropped by the Redis layer) from a changed copy under the same dedup key (inserted, so
that the table's "latest ingested copy wins" holds). Decoding is strict about shapes and
types; anything else raises `CodecError`.

Rows: the enricher's place is added as `$city`, `$region`, `mp_country_code` (and in the
geo columns); `ip` itself is never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from footfall.shared.events.model import Event, Failure, event_dedup_key
from footfall.shared.events.validate import validate_batch
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.streams.stream import CodecError, Intake, Locator, Rows, Stream, dedup_rows, insert_rows

__all__ = ["EVENTS", "build_event_rows", "decode_event", "encode_event", "event_key", "event_rows"]

VERSION = 1


def event_key(e: Event) -> bytes:
    return f"{e.project_id}:{e.distinct_id}".encode()


def encode_event(e: Event) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            "p": e.project_id,
            "e": e.event,
            "t": e.time_ms,
            "d": e.distinct_id,
            "i": e.insert_id,
            "pr": e.properties,
            "ip": e.ip,
        }
    )


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    # bool is an int subclass: never accept it where an integer is meant.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CodecError("field", f"envelope field {name!r} missing or not {kind.__name__}")
    return value


def decode_event(value: bytes | None) -> Event:
    """The event of a record value, or `CodecError`."""
    if value is None:
        raise CodecError("empty", "record has no value")
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise CodecError("json", "record value is not JSON") from None
    if not isinstance(data, dict):
        raise CodecError("envelope", "record value is not a JSON object")
    if data.get("v") != VERSION:
        raise CodecError("version", f"unknown envelope version {data.get('v')!r}")
    project_id = _field(data, "p", int)
    if project_id <= 0:
        raise CodecError("field", "project id must be positive")
    ip = data.get("ip")
    if ip is not None and not isinstance(ip, str):
        raise CodecError("field", "envelope field 'ip' is not a string")
    return Event(
        project_id=project_id,
        event=_field(data, "e", str),
        time_ms=_field(data, "t", int),
        distinct_id=_field(data, "d", str),
        insert_id=_field(data, "i", str),
        properties=_field(data, "pr", dict),
        ip=ip,
    )


def validate_events(items: list[Any], intake: Intake) -> tuple[list[Event], list[Failure]]:
    return validate_batch(
        items,
        project_id=intake.project_id,
        strict=intake.strict,
        limits=intake.limits,
        now_ms=intake.now_ms,
        body_bytes=intake.body_bytes,
    )


def event_rows(events: Sequence[Event], keys: Sequence[bytes], locator: Locator, ingested_at_ms: int) -> Rows:
    """Rows of `events` (already deduplicated; `keys` their dedup keys), in the table's
    column order. Times are integer milliseconds, which clickhouse-connect inserts into
    DateTime64(3) as ticks."""
    cols: dict[str, list[Any]] = {name: [] for name in EVENTS_TABLE.column_names}
    project_id, time, event, distinct_id = cols["project_id"], cols["time"], cols["event"], cols["distinct_id"]
    insert_id, properties, dedup_hash, ingested_at = (
        cols["insert_id"],
        cols["properties"],
        cols["dedup_hash"],
        cols["ingested_at"],
    )
    city, region, country_code = cols["city"], cols["region"], cols["country_code"]
    for key, e in zip(keys, events, strict=True):
        props = e.properties
        place = locator.place(e.ip)
        if place.city or place.region or place.country_code:
            props = dict(props)
            if place.city:
                props["$city"] = place.city
            if place.region:
                props["$region"] = place.region
            if place.country_code:
                props["mp_country_code"] = place.country_code
        project_id.append(e.project_id)
        time.append(e.time_ms)
        event.append(e.event)
        distinct_id.append(e.distinct_id)
        insert_id.append(e.insert_id)
        properties.append(orjson.dumps(props).decode())
        city.append(place.city)
        region.append(place.region)
        country_code.append(place.country_code)
        dedup_hash.append(key)
        ingested_at.append(ingested_at_ms)
    return Rows([cols[name] for name in EVENTS_TABLE.column_names], list(keys))


# The events stream's store step split in two (`EVENTS.store` is both): the migration's workers
# build the rows of their blocks, the embedded store inserts them (`EmbeddedSink.publish_rows`).
build_event_rows = dedup_rows(event_rows, event_dedup_key)

EVENTS: Stream[Event] = Stream(
    name="events",
    table=EVENTS_TABLE,
    validate=validate_events,
    encode=encode_event,
    decode=decode_event,
    partition_key=event_key,
    dedup_key=event_dedup_key,
    store=insert_rows(EVENTS_TABLE, event_rows, event_dedup_key),
)
