"""Raw export's lines: the spliced fast path gives exactly the bytes of a plain build of the
line (the export's keys, then the stored properties, a stored key overriding the export's)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import orjson

from footfall.services.query.reports.export import _lines

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
KEYS = ["plan", "$browser", "ünï", 'q"uote', "back\\slash", "tab\t", "mp_processing_time_ms", "time", "x/y", ""]


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 2 else 6)
    if kind == 0:
        return rng.randint(-(2**53), 2**53)
    if kind == 1:
        return rng.uniform(-1e6, 1e6)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4, 5):
        return "".join(rng.choice('ab é€😀"\\/\n\x01<>') for _ in range(rng.randrange(12)))
    if kind == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(3))}


def _expected(row: tuple[object, ...], time_in_ms: bool) -> bytes:
    when, event, distinct_id, insert_id, properties, ingested, _ = row
    assert isinstance(when, datetime) and isinstance(ingested, datetime) and isinstance(properties, str)
    millis = (when.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
    out = {
        "time": millis if time_in_ms else millis // 1000,
        "distinct_id": distinct_id,
        "$insert_id": insert_id,
        "mp_processing_time_ms": (ingested.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1),
        **orjson.loads(properties),
    }
    return orjson.dumps({"event": event, "properties": out}) + b"\n"


def test_lines_match_a_plain_build() -> None:
    rng = random.Random(15)
    rows = []
    for i in range(3000):
        props = {rng.choice(KEYS) + str(rng.randrange(3)): _value(rng) for _ in range(rng.randrange(6))}
        if i % 50 == 0:
            props[rng.choice(["time", "mp_processing_time_ms", "distinct_id", "$insert_id"])] = "stored"
        when = datetime(2024, 1, 1) + timedelta(milliseconds=rng.randrange(10**11))
        rows.append(
            (
                when,
                rng.choice(["e", "Sign up", 'ev"il', "é"]),
                f"u{rng.randrange(100)}",
                f"i{i}",
                orjson.dumps(props).decode(),
                when + timedelta(seconds=rng.randrange(100)),
                "00",
            )
        )
    for time_in_ms in (False, True):
        assert _lines(rows, time_in_ms) == b"".join(_expected(row, time_in_ms) for row in rows)
