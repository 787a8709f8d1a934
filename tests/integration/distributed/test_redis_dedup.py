"""RedisDedup against a real Redis, checked against MemoryDedup (its in-process twin) on the
same random calls: the packed scripts (16-byte keys, 8-byte digests) and the client-side path
(other widths) answer alike, share the bucket hashes, keep the prefix and set their expiry;
a mark is remembered for the TTL (and at most two buckets more), the latest mark deciding."""

from __future__ import annotations

import asyncio
import os
import random
import re
import uuid
from collections.abc import Sequence

import pytest
import redis

from footfall.services.worker import dedup
from footfall.services.worker.dedup import MemoryDedup, RedisDedup
from footfall.shared.events.fast_import import Packed


def _calls(rng: random.Random, width: int, n: int) -> list[tuple[str, list[bytes], list[bytes]]]:
    keys = [rng.randbytes(width) for _ in range(n // 3)]
    calls = []
    for _ in range(6):
        picked = [rng.choice(keys) for _ in range(rng.randint(1, n))]
        digests = [rng.choice([b"d" * 8, b"e" * 8, rng.randbytes(8)]) for _ in picked]
        calls.append((rng.choice(["seen", "mark"]), picked, digests))
    return calls


@pytest.mark.redis
@pytest.mark.parametrize(
    ("width", "packed"),
    [(16, False), (16, True), (5, False)],
    ids=["scripts", "scripts-from-packed", "per-key"],  # packed: as the worker's fast path hands them over
)
def test_redis_dedup_answers_like_its_memory_twin(redis_url: str, width: int, packed: bool) -> None:
    rng = random.Random(width)
    prefix = f"t{uuid.uuid4().hex[:8]}:".encode()

    async def go() -> tuple[list[list[bool]], list[list[bool]]]:
        store = RedisDedup(redis_url, 600, prefix=prefix, chunk=700)  # several chunks per call
        twin = MemoryDedup(600)
        got, want = [], []
        try:
            for op, keys, digests in _calls(rng, width, 2000):
                sent: tuple[Sequence[bytes], Sequence[bytes]] = (keys, digests)
                if packed:
                    sent = (Packed(b"".join(keys), width), Packed(b"".join(digests), 8))
                if op == "mark":
                    await store.mark(*sent)
                    await twin.mark(keys, digests)
                got.append(await store.seen(*sent))
                want.append(await twin.seen(keys, digests))
        finally:
            await store.close()
        return got, want

    got, want = asyncio.run(go())
    assert got == want
    assert any(any(answer) for answer in want) and any(not all(answer) for answer in want)
    client = redis.Redis.from_url(redis_url)
    try:
        names = list(client.scan_iter(match=prefix + b"*", count=5000))
        assert names and all(re.fullmatch(re.escape(prefix) + rb"dedup:\d+", name) for name in names)
        assert 600 < client.ttl(names[0]) <= 600 + 200  # the TTL and one bucket (a third of it)
        fields = client.hgetall(names[0])
        assert fields and all(len(k) == width and len(v) == 8 for k, v in fields.items())
    finally:
        client.delete(*names)
        client.close()


@pytest.mark.redis
def test_packed_and_per_key_paths_share_marks(redis_url: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:".encode()
    keys = [os.urandom(16) for _ in range(50)]
    digests = [os.urandom(8) for _ in keys]

    async def go() -> tuple[list[bool], list[bool]]:
        store = RedisDedup(redis_url, 600, prefix=prefix)
        try:
            await store.mark(keys[:25], digests[:25])  # packed
            # One odd-width key sends the whole call down the per-key path (MGET).
            mixed = await store.seen([*keys, b"short"], [*digests, b"12345678"])
            await store.mark([*keys[25:], b"short"], [*digests[25:], b"12345678"])  # per-key script
            packed = await store.seen(keys, digests)
            return mixed, packed
        finally:
            await store.close()

    mixed, packed = asyncio.run(go())
    assert mixed == [True] * 25 + [False] * 26
    assert packed == [True] * 50


@pytest.mark.redis
def test_a_mark_is_remembered_for_the_ttl_and_the_latest_mark_decides(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:".encode()
    key, first, changed = os.urandom(16), b"a" * 8, b"b" * 8
    now = [1_800_000_000.0]
    monkeypatch.setattr(dedup.time, "time", lambda: now[0])

    async def at(seconds: float, op: str, digest: bytes) -> bool | None:
        now[0] = 1_800_000_000.0 + seconds
        if op == "mark":
            await store.mark([key], [digest])
            return None
        return (await store.seen([key], [digest]))[0]

    async def go() -> list[bool | None]:
        try:
            return await steps()
        finally:
            await store.close()

    async def steps() -> list[bool | None]:
        return [
            await at(0, "mark", first),
            await at(599, "seen", first),  # within the TTL (600 s: buckets of 200 s)
            await at(599, "seen", changed),  # a changed copy is not a retry
            await at(650, "mark", changed),
            await at(660, "seen", first),  # the later mark decides
            await at(660, "seen", changed),
            await at(650 + 600 + 400, "seen", changed),  # past the TTL and two buckets: gone
        ]

    store = dedup.RedisDedup(redis_url, 600, prefix=prefix)
    answers = asyncio.run(go())
    assert answers == [None, True, False, None, False, True, False]
