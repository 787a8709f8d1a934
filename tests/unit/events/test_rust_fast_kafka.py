"""The Rust fast path of the distributed shape against the Python path: the gateway's Kafka
records (`FastImport.envelopes`) and the worker's rows of consumed records (`FastRecords`).

The properties that make them safe: whenever the gateway's fast path takes a body, the Python
path accepts every event of it and publishes the same records — partition keys, record values
byte for byte (so a retried event is the same record whichever path wrote it), partition hashes;
and whenever the worker's fast path takes a batch of records, the Python codec decodes every one
of them and `build_event_rows` builds the same rows, keys and digests for any subset of them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
from aiokafka.partitioner import murmur2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from footfall.services.gateway.decode import parse_json
from footfall.services.worker.enrich import Enricher
from footfall.shared.config import ImportLimits
from footfall.shared.events import Event, fast_import
from footfall.shared.events.fast_records import FastRecords
from footfall.shared.events.model import event_dedup_key
from footfall.shared.events.validate import validate_batch
from footfall.shared.kafka import content_digest
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.streams.events import build_event_rows, decode_event, encode_event, event_key
from footfall.shared.warehouse import native
from tests.fastpath import require_extension
from tests.unit.events.test_rust_fast_import import (
    INGESTED_MS,
    NOW_MS,
    PROJECT,
    SMALL,
    bodies,
    event,
    events,
    plain_events,
)

require_extension()


def python_events(body: bytes, limits: ImportLimits, strict: bool) -> list[Event] | None:
    items = parse_json(body)
    if not isinstance(items, list):
        return None
    accepted, failures = validate_batch(
        items, project_id=PROJECT, strict=strict, limits=limits, now_ms=NOW_MS, body_bytes=len(body)
    )
    return None if failures else accepted


def envelopes(body: bytes, limits: ImportLimits) -> fast_import.FastEnvelopes | None:
    return fast_import.FastImport(limits, geo=False).envelopes(body, project_id=PROJECT, now_ms=NOW_MS)


def assert_same_records(body: bytes, limits: ImportLimits, strict: bool, *, must_take: bool = False) -> None:
    fast = envelopes(body, limits)
    rows = fast_import.FastImport(limits, geo=False).rows(
        body, project_id=PROJECT, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS
    )
    assert (fast is None) == (rows is None), "the two fast paths take the same bodies"
    if must_take:
        assert fast is not None, body
    if fast is None:
        return
    accepted = python_events(body, limits, strict)
    assert accepted is not None, f"the fast path took a body the Python path rejects: {body!r}"
    assert fast.values == [encode_event(e) for e in accepted]
    assert fast.keys == [event_key(e) for e in accepted]
    assert fast.hashes == [murmur2(k) & 0x7FFFFFFF for k in fast.keys]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(events()), strict=st.booleans())
def test_a_body_the_gateway_path_takes_gives_the_python_paths_records(body: bytes, strict: bool) -> None:
    assert_same_records(body, SMALL, strict)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(plain_events()))
def test_plain_bodies_take_the_gateway_path(body: bytes) -> None:
    assert_same_records(body, ImportLimits(), strict=True, must_take=True)


def test_an_address_travels_in_the_record_for_the_workers_to_locate() -> None:
    body = orjson.dumps([event(ip="203.0.113.9"), event(ip=0, **{"$insert_id": "id-2"}), event(ip=None)])
    assert_same_records(body, ImportLimits(), strict=True, must_take=True)
    fast = envelopes(body, ImportLimits())
    assert fast is not None
    assert [orjson.loads(v)["ip"] for v in fast.values] == ["203.0.113.9", None, None]
    assert envelopes(orjson.dumps([event(ip="1" * 256)]), ImportLimits()) is None  # an address to truncate


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=40))
def test_partition_hashes_are_the_java_clients(key: bytes) -> None:
    from footfall.shared.events import _fastpath

    assert _fastpath.partition_hash(key) == murmur2(key) & 0x7FFFFFFF


# -- the worker's side ---------------------------------------------------------------------------


def python_rows(values: list[bytes], fresh: list[int]) -> tuple[dict[str, list[Any]], list[bytes], list[bytes]]:
    """The Python path's rows of the records at `fresh`, with their keys and digests."""
    decoded = [decode_event(values[i]) for i in fresh]
    digests = {event_dedup_key(e): content_digest(values[i]) for e, i in zip(decoded, fresh, strict=True)}
    rows, _dropped = build_event_rows(decoded, Enricher(None), INGESTED_MS)
    columns = dict(zip(EVENTS_TABLE.column_names, rows.columns, strict=True))
    as_read = native.decode(native.encode("events", list(columns), list(columns.values())))
    return as_read, list(rows.keys), [digests[k] for k in rows.keys]


def assert_same_rows(values: list[bytes], fresh: list[int], *, must_take: bool = True) -> None:
    decoded = FastRecords(geo=False).decode(values)
    if decoded is None:
        assert not must_take, values
        return
    for v in values:
        decode_event(v)  # the Python codec takes every one of them (else: CodecError)
    assert decoded.keys() == [event_dedup_key(decode_event(v)) for v in values]
    assert decoded.digests() == [content_digest(v) for v in values]
    stored = decoded.block(fresh, ingested_at_ms=INGESTED_MS)
    columns, keys, digests = python_rows(values, fresh)
    assert (stored.keys, stored.digests, stored.dropped) == (keys, digests, len(fresh) - len(keys))
    assert stored.columns == EVENTS_TABLE.column_names
    assert native.decode(stored.block) == columns


@st.composite
def record_batches(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    """Record values of accepted events (several projects, retried and changed copies, written by
    orjson or, now and then, by another producer with whitespace and escapes) and a fresh subset."""
    accepted = None
    while not accepted:
        accepted = python_events(draw(bodies(plain_events())), ImportLimits(), strict=True)
    batch = [
        Event(
            draw(st.sampled_from([PROJECT, 1, 10**12])),
            e.event,
            e.time_ms,
            e.distinct_id,
            e.insert_id,
            e.properties,
            e.ip,
        )
        for e in accepted
    ]
    if draw(st.booleans()):  # a changed copy under the same dedup key
        e = draw(st.sampled_from(batch))
        batch.append(dataclasses.replace(e, properties={"changed": 1}))
    values = [encode_event(e) for e in batch]
    if draw(st.booleans()):
        values.append(draw(st.sampled_from(values)))  # a retry: the same record again
    if draw(st.booleans()):
        i = draw(st.integers(0, len(values) - 1))
        values[i] = json.dumps(orjson.loads(values[i]), indent=1, ensure_ascii=draw(st.booleans())).encode()
    fresh = sorted(draw(st.sets(st.integers(0, len(values) - 1), min_size=1)))
    return values, fresh


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=record_batches())
def test_a_batch_the_worker_path_takes_gives_the_python_paths_rows(batch: tuple[list[bytes], list[int]]) -> None:
    values, fresh = batch
    assert_same_rows(values, fresh)


ENVELOPE: dict[str, Any] = {"v": 1, "p": 3, "e": "Signed up", "t": 1_700_000_000_000, "d": "u1", "i": "id-1", "pr": {}}


@pytest.mark.parametrize(
    "value",
    [
        b"{nope",
        b"[1]",
        b'"text"',
        orjson.dumps({**ENVELOPE, "v": 2}),
        orjson.dumps({**ENVELOPE, "v": True}),
        orjson.dumps({**ENVELOPE, "p": 0}),
        orjson.dumps({**ENVELOPE, "p": True}),
        orjson.dumps({**ENVELOPE, "p": "3"}),
        orjson.dumps({**ENVELOPE, "t": 1.5}),
        orjson.dumps({**ENVELOPE, "t": 2**63}),
        orjson.dumps({**ENVELOPE, "e": 1}),
        orjson.dumps({k: v for k, v in ENVELOPE.items() if k != "d"}),
        orjson.dumps({**ENVELOPE, "i": None}),
        orjson.dumps({**ENVELOPE, "pr": []}),
        orjson.dumps({**ENVELOPE, "ip": 1}),
        b'{"v":1,"p":3,"e":"\\ud800","t":1,"d":"u","i":"i","pr":{}}',
    ],
)
def test_records_the_python_codec_decides_on_are_declined(value: bytes) -> None:
    good = orjson.dumps(ENVELOPE)
    assert FastRecords(geo=False).decode([good, value]) is None
    assert FastRecords(geo=False).decode([good]) is not None


def test_what_the_codec_ignores_is_ignored_and_an_address_declined_only_with_places() -> None:
    value = orjson.dumps({**ENVELOPE, "ip": "203.0.113.9", "extra": [1]})
    assert_same_rows([value], [0])  # nothing to locate: the address is dropped, as the Python path drops it
    assert FastRecords(geo=True).decode([value]) is None
    assert FastRecords(geo=True).decode([orjson.dumps({**ENVELOPE, "ip": None})]) is not None


def test_hot_values_are_those_the_import_path_gives() -> None:
    hot = (("plan", "hp_plan"), ("n", "hp_n"), ("nested", "hp_nested"), ("absent", "hp_absent"))
    body = orjson.dumps(
        [event(plan="pro", n=3, nested={"a": [1, True, None]}), event(plan="x", **{"$insert_id": "i2"})]
    )
    rows = fast_import.FastImport(ImportLimits(), geo=False, hot_columns=lambda: hot).rows(
        body, project_id=PROJECT, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS
    )
    fast = fast_import.FastImport(ImportLimits(), geo=False).envelopes(body, project_id=PROJECT, now_ms=NOW_MS)
    assert rows is not None and fast is not None
    decoded = FastRecords(geo=False, hot_columns=lambda: hot).decode(fast.values)
    assert decoded is not None
    stored = decoded.block([0, 1], ingested_at_ms=INGESTED_MS)
    assert stored.columns == rows.columns == (*EVENTS_TABLE.column_names, *(c for _, c in hot))
    assert native.decode(stored.block) == native.decode(rows.block)
    plain = decoded.block([0, 1], ingested_at_ms=INGESTED_MS, hot=False)
    assert plain.columns == EVENTS_TABLE.column_names
    floats = FastRecords(geo=False, hot_columns=lambda: hot).decode([orjson.dumps({**ENVELOPE, "pr": {"n": 1.5}})])
    assert floats is not None and floats.block([0], ingested_at_ms=1).columns == EVENTS_TABLE.column_names
