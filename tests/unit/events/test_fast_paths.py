"""The validator's and the dedup key's fast paths give exactly the answers of the plain code.

* `dedup_key` (one buffer, one hash call) against a reference written here from its
  definition (length-prefixed UTF-8 parts fed to BLAKE2b-128 one by one);
* `validate_batch`, whose events share the property names found plain (`known_keys`) and
  check only values, against the same validator with that path switched off (the general
  per-key loop), on generated events full of edge cases: long, non-ASCII and
  invalid-UTF-8 keys and values, big integers, NaN, nesting, lifted members. (Not `str`
  subclasses as names: no JSON decoder makes them, and a name equal to a known one is taken
  for a `str`; nested objects still refuse them, see below.)
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest

import footfall.shared.events.validate as validate
from footfall.shared.config import ImportLimits
from footfall.shared.events.model import dedup_key

NOW_MS = 1_767_225_600_000


def reference_dedup_key(project_id: int, event: str, time_ms: int, distinct_id: str, insert_id: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in (str(project_id), event, str(time_ms), distinct_id, insert_id):
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(4, "little"))
        h.update(raw)
    return h.digest()


TEXTS = ["", "a", "user-1", "é", "日本語", "\ud800", "x" * 300, "a\x00b", "-", "0123456789abcdef" * 2]


def test_dedup_key_matches_its_definition() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        args = (
            rng.choice([1, 7, 2**40, 0]),
            rng.choice(TEXTS) + rng.choice(TEXTS),
            rng.choice([0, 1, NOW_MS, -5, 2**62]),
            rng.choice(TEXTS),
            rng.choice(TEXTS),
        )
        assert dedup_key(*args) == reference_dedup_key(*args)


class Name(str):
    """A `str` subclass (no JSON decoder makes one; the validator refuses it as a key)."""


def value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(["plain", "x" * rng.choice([255, 256, 400]), "café", "bad\udcff", ""])
    if roll < 0.5:
        return rng.choice([0, -1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, True, None])
    if roll < 0.6:
        return rng.choice([1.5, float("nan"), float("inf"), -0.0])
    if roll < 0.7 and depth < 4:
        return [value(rng, depth + 1) for _ in range(rng.choice([0, 1, 3, 256]) if rng.random() < 0.1 else 2)]
    if roll < 0.8 and depth < 4:
        return {key(rng): value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if roll < 0.82:
        return object()
    return rng.randint(0, 100)


def key(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.8:
        return rng.choice(["a", "b", "plan", "$browser", "page", "extra_1", "extra_2"])
    return rng.choice(
        ["k" * 255 + "1", "k" * 255 + "2", "k" * 256, "clé", "bad\ud800", Name("other"), 5, "", "time", "ip", "token"]
    )


def event(rng: random.Random) -> dict[str, Any]:
    props: dict[Any, Any] = {
        "time": NOW_MS // 1000 - rng.randint(0, 10**6),
        "distinct_id": rng.choice(["u1", "u2", "anon"]) if rng.random() < 0.2 else "u1",
        "$insert_id": rng.choice(["abc-1", "ABC", "x" * 37, "a b"]) if rng.random() < 0.1 else f"id{rng.random()}"[:30],
    }
    if rng.random() < 0.1:
        props["ip"] = rng.choice(["1.2.3.4", 0, None])
    if rng.random() < 0.1:
        props["token"] = rng.choice(["t", "bad\udfff"])
    plain = rng.random() < 0.6  # most events: only plain names, as SDKs send them
    for _ in range(rng.randint(0, 12)):
        k = rng.choice(["a", "b", "plan", "page", "n1", "n2"]) if plain else key(rng)
        props[k] = value(rng)
    return {"event": rng.choice(["Sign Up", "é" * 300]), "properties": props}


@pytest.mark.parametrize("seed", range(4))
def test_validate_batch_answers_as_the_general_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    limits = ImportLimits()
    batches = [[event(rng) for _ in range(rng.randint(1, 60))] for _ in range(40)]
    kwargs: dict[str, Any] = {"project_id": 9, "limits": limits, "now_ms": NOW_MS, "body_bytes": 100}
    fast = [validate.validate_batch(b, strict=bool(n % 2), **kwargs) for n, b in enumerate(batches)]
    monkeypatch.setattr(validate, "_plain_keys", lambda *_: False)
    general = [validate.validate_batch(b, strict=bool(n % 2), **kwargs) for n, b in enumerate(batches)]
    accepted = 0
    for (events_f, failures_f), (events_g, failures_g) in zip(fast, general, strict=True):
        assert failures_f == failures_g
        assert events_f == events_g
        # equal dicts, and the same member order (what `orjson.dumps` stores)
        assert [list(e.properties) for e in events_f] == [list(e.properties) for e in events_g]
        accepted += len(events_f)
    assert accepted > 100  # the generator does produce valid events, not only failures
