"""MemoryDedup, the in-process twin of RedisDedup: keys with content digests and a TTL."""

from __future__ import annotations

import asyncio

from footfall.services.worker.dedup import MemoryDedup


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_seen_only_after_mark_and_only_with_the_same_content() -> None:
    store = MemoryDedup(3600)
    assert run(store.seen([b"k1", b"k2"], [b"d1", b"d2"])) == [False, False]
    run(store.mark([b"k1"], [b"d1"]))
    assert run(store.seen([b"k1", b"k1", b"k2"], [b"d1", b"other", b"d2"])) == [True, False, False]


def test_entries_expire() -> None:
    store = MemoryDedup(0.0)
    run(store.mark([b"k"], [b"d"]))
    assert run(store.seen([b"k"], [b"d"])) == [False]


def test_size_bound_drops_the_oldest() -> None:
    store = MemoryDedup(3600, max_keys=2)
    run(store.mark([b"a", b"b", b"c"], [b"1", b"2", b"3"]))
    assert run(store.seen([b"a", b"b", b"c"], [b"1", b"2", b"3"])) == [False, True, True]
