"""The first dedup layer: recently inserted dedup keys, so retries are dropped before
ClickHouse sees them.

Order of use per batch (the caller's, see `services.worker.pipeline`): `seen(...)` →
insert what was not seen → `mark(...)` only after the insert succeeded. A crash between
the insert and the mark can only let a duplicate through to the table (whose engine and
queries remove it), never drop an event.

Keys are the 16-byte `dedup_key` hashes (optionally behind a namespace prefix), stored
with a TTL — the retry window (default 6 h), so memory ≈ rate × TTL × ~120 bytes. The
value is the 8-byte `content_digest` of the record: an event counts as seen only if the
same key was stored with the same content. A plain retry is dropped here; a changed copy
under the same dedup key goes through, so the table's "latest ingested copy wins" holds.

`RedisDedup` makes one round trip per call and batch: one Lua script looks every key up,
one sets every mark. Keys and digests travel as two packed arguments (fixed widths: 16-byte
keys, 8-byte digests) and the lookup answers with one string of '0'/'1' flags, so the
client neither packs nor parses one protocol item per event (an MGET of 5,000 keys cost the
worker ~5 µs of CPU per event in redis-py's packing and reply parsing; the packed scripts
cost ~0.3 µs). The scripts build the key names themselves, so they do not declare them: a
plain (non-cluster) Redis, as before (a 5,000-key MGET spans every cluster slot anyway).
Items whose keys or digests have other widths use the MGET / per-key script path.
When Redis cannot be reached it steps aside: lookups report nothing seen, marks are
skipped, `footfall_dedup_redis_unavailable` is 1 and a warning is logged; it tries
Redis again every `retry_seconds`. Ingestion never waits for Redis.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from footfall.shared import metrics

log = structlog.get_logger(__name__)


class DedupStore(Protocol):
    async def seen(self, keys: list[bytes], digests: list[bytes]) -> list[bool]: ...

    async def mark(self, keys: list[bytes], digests: list[bytes]) -> None: ...

    async def close(self) -> None: ...


class MemoryDedup:
    """In-process twin: a TTL'd, size-bounded map (oldest entries go first)."""

    def __init__(self, ttl_seconds: float, *, max_keys: int = 2_000_000) -> None:
        self.ttl = ttl_seconds
        self.max_keys = max_keys
        self._keys: OrderedDict[bytes, tuple[bytes, float]] = OrderedDict()

    async def seen(self, keys: list[bytes], digests: list[bytes]) -> list[bool]:
        now = time.monotonic()
        out = []
        for k, d in zip(keys, digests, strict=True):
            hit = self._keys.get(k)
            out.append(hit is not None and hit[1] > now and hit[0] == d)
        return out

    async def mark(self, keys: list[bytes], digests: list[bytes]) -> None:
        expires = time.monotonic() + self.ttl
        for k, d in zip(keys, digests, strict=True):
            self._keys[k] = (d, expires)
            self._keys.move_to_end(k)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)

    async def close(self) -> None:
        self._keys.clear()


# Packed calls: ARGV = prefix, key width, keys (concatenated), digest width, digests (concatenated)
# [, ttl]. The lookup answers one character per key: '1' stored with the same digest, else '0'.
_SEEN_PACKED = """
local prefix, kw, keys, dw, digests = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5]
local out = {}
for i = 0, #keys / kw - 1 do
  local stored = redis.call('GET', prefix .. string.sub(keys, i * kw + 1, (i + 1) * kw))
  out[i + 1] = (stored == string.sub(digests, i * dw + 1, (i + 1) * dw)) and '1' or '0'
end
return table.concat(out)
"""

_MARK_PACKED = """
local prefix, kw, keys, dw, digests, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
for i = 0, #keys / kw - 1 do
  redis.call('SET', prefix .. string.sub(keys, i * kw + 1, (i + 1) * kw),
             string.sub(digests, i * dw + 1, (i + 1) * dw), 'EX', ttl)
end
return #keys / kw
"""

KEY_WIDTH = 16  # a stream's dedup_key
DIGEST_WIDTH = 8  # footfall.shared.kafka.content_digest


def _packable(keys: list[bytes], digests: list[bytes]) -> bool:
    return all(len(k) == KEY_WIDTH for k in keys) and all(len(d) == DIGEST_WIDTH for d in digests)


# SET every key (value: its content digest) with one TTL in one round trip (≈ 5x a pipeline).
_MARK_SCRIPT = """
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ttl)
end
return #KEYS
"""


class RedisDedup:
    def __init__(
        self,
        url: str,
        ttl_seconds: int,
        *,
        prefix: bytes = b"",
        timeout: float = 1.0,
        retry_seconds: float = 5.0,
        chunk: int = 10_000,
    ) -> None:
        self.url = url
        self.ttl = int(ttl_seconds)
        self.prefix = prefix
        self.retry_seconds = retry_seconds
        self.chunk = chunk
        self._client = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            # One quick reconnect, then fall back: ingestion must not wait on Redis.
            retry=Retry(NoBackoff(), 1),
        )
        self._mark = self._client.register_script(_MARK_SCRIPT)
        self._seen_packed = self._client.register_script(_SEEN_PACKED)
        self._mark_packed = self._client.register_script(_MARK_PACKED)
        self._down_until = 0.0
        self.available = True

    def _key(self, k: bytes) -> bytes:
        return self.prefix + k if self.prefix else k

    def _bypassed(self) -> bool:
        return not self.available and time.monotonic() < self._down_until

    def _failed(self, exc: Exception, during: str) -> None:
        self._down_until = time.monotonic() + self.retry_seconds
        if self.available:
            log.warning(
                "redis_dedup_bypassed",
                during=during,
                error=str(exc)[:300],
                detail="ingesting without the Redis layer; the table and queries still remove duplicates",
            )
        self.available = False
        metrics.REDIS_FALLBACK.set(1)

    def _recovered(self) -> None:
        if not self.available:
            log.info("redis_dedup_restored", url_host=self._client.connection_pool.connection_kwargs.get("host"))
        self.available = True
        metrics.REDIS_FALLBACK.set(0)

    async def seen(self, keys: list[bytes], digests: list[bytes]) -> list[bool]:
        if not keys or self._bypassed():
            return [False] * len(keys)
        started = time.perf_counter()
        packed = _packable(keys, digests)
        try:
            found: list[bool] = []
            for i in range(0, len(keys), self.chunk):
                chunk = slice(i, i + self.chunk)
                if packed:
                    flags = await self._seen_packed(args=self._packed_args(keys[chunk], digests[chunk]))
                    found.extend(flag == 49 for flag in flags)  # b"1"
                    continue
                values = await self._client.mget([self._key(k) for k in keys[chunk]])
                found.extend(v == d for v, d in zip(values, digests[chunk], strict=True))
        except (RedisError, OSError) as exc:
            self._failed(exc, "lookup")
            return [False] * len(keys)
        self._recovered()
        metrics.DEDUP_LOOKUP_SECONDS.observe(time.perf_counter() - started)
        return found

    async def mark(self, keys: list[bytes], digests: list[bytes]) -> None:
        if not keys or self._bypassed():
            return
        packed = _packable(keys, digests)
        try:
            for i in range(0, len(keys), self.chunk):
                chunk = slice(i, i + self.chunk)
                if packed:
                    await self._mark_packed(args=[*self._packed_args(keys[chunk], digests[chunk]), self.ttl])
                else:
                    await self._mark(keys=[self._key(k) for k in keys[chunk]], args=[self.ttl, *digests[chunk]])
        except (RedisError, OSError) as exc:
            self._failed(exc, "mark")
            return
        self._recovered()

    def _packed_args(self, keys: list[bytes], digests: list[bytes]) -> list[bytes | int]:
        return [self.prefix, KEY_WIDTH, b"".join(keys), DIGEST_WIDTH, b"".join(digests)]

    async def close(self) -> None:
        await self._client.aclose()
