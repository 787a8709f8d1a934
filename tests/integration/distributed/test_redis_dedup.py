"""RedisDedup against a real Redis, checked against MemoryDedup (its in-process twin) on the
same random calls: the packed scripts (16-byte keys, 8-byte digests) and the per-key path
(other widths) answer alike, share key names and values, keep the prefix and set the TTL."""

from __future__ import annotations

import asyncio
import os
import random
import uuid

import pytest
import redis

from footfall.services.worker.dedup import MemoryDedup, RedisDedup


def _calls(rng: random.Random, width: int, n: int) -> list[tuple[str, list[bytes], list[bytes]]]:
    keys = [rng.randbytes(width) for _ in range(n // 3)]
    calls = []
    for _ in range(6):
        picked = [rng.choice(keys) for _ in range(rng.randint(1, n))]
        digests = [rng.choice([b"d" * 8, b"e" * 8, rng.randbytes(8)]) for _ in picked]
        calls.append((rng.choice(["seen", "mark"]), picked, digests))
    return calls


@pytest.mark.redis
@pytest.mark.parametrize("width", [16, 5])  # 16: the packed scripts; 5: the per-key path
def test_redis_dedup_answers_like_its_memory_twin(redis_url: str, width: int) -> None:
    rng = random.Random(width)
    prefix = f"t{uuid.uuid4().hex[:8]}:".encode()

    async def go() -> tuple[list[list[bool]], list[list[bool]]]:
        store = RedisDedup(redis_url, 600, prefix=prefix, chunk=700)  # several chunks per call
        twin = MemoryDedup(600)
        got, want = [], []
        try:
            for op, keys, digests in _calls(rng, width, 2000):
                if op == "mark":
                    await store.mark(keys, digests)
                    await twin.mark(keys, digests)
                got.append(await store.seen(keys, digests))
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
        assert names and all(len(name) == len(prefix) + width for name in names)
        assert 0 < client.ttl(names[0]) <= 600
        assert len(client.get(names[0]) or b"") == 8
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
