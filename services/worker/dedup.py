"""The first dedup layer: recently inserted dedup keys, so retries are dropped before
ClickHouse sees them.

Order of use per batch (the caller's, see `services.worker.pipeline`): `seen(...)` →
insert what was not seen → `mark(...)` only after the insert succeeded. A crash between
the insert and the mark can only let a duplicate through to the table (whose engine and
queries remove it), never drop an event.

Keys are the 16-byte `dedup_key` hashes, kept for the retry window (the TTL, default 6 h).
The value is the 8-byte `content_digest` of the record: an event counts as seen only if the
same key was stored with the same content. A plain retry is dropped here; a changed copy
under the same dedup key goes through, so the table's "latest ingested copy wins" holds.

`RedisDedup` keeps the marks in one hash per time bucket (a third of the TTL; the hash expires
a TTL and a bucket after its last mark; names `<prefix>dedup:<bucket number>`), so a mark is
remembered for between one TTL and a TTL and two buckets; memory grows with rate × that (a hash
field per mark: no key object or expiry entry of its own). It makes one round trip per call and
batch: one Lua script looks every key up in the newest four buckets (HMGET, a thousand fields a
call), one writes every mark (HSET, then one EXPIRE). Per-key names with a TTL each (a Lua GET
and SET EX per key, as before) cost Redis 10–11.5 µs of CPU per event (lookup and mark of 20,000
new keys a call, measured alone), a sixth of the two cores at 30k events/s; the buckets 5.5–7.
Keys and digests travel as two packed arguments (fixed widths: 16-byte keys, 8-byte
digests) and the lookup answers with one string of '0'/'1' flags, so the client neither
packs nor parses one protocol item per event (an MGET of 5,000 keys cost the worker ~5 µs
of CPU per event in redis-py's packing and reply parsing). The scripts build the bucket
names themselves, so they do not declare them: a plain (non-cluster) Redis. Items whose keys
or digests have other widths use HMGET/HSET calls from the client on the same buckets.
When Redis cannot be reached it steps aside: lookups report nothing seen, marks are
skipped, `footfall_dedup_redis_unavailable` is 1 and a warning is logged; it tries
Redis again every `retry_seconds`. Ingestion never waits for Redis.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from footfall.shared import metrics
from footfall.shared.events.fast_import import Packed

log = structlog.get_logger(__name__)


class DedupStore(Protocol):
    async def seen(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> list[bool]: ...

    async def mark(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> None: ...

    async def close(self) -> None: ...


class MemoryDedup:
    """In-process twin: a TTL'd, size-bounded map (oldest entries go first)."""

    def __init__(self, ttl_seconds: float, *, max_keys: int = 2_000_000) -> None:
        self.ttl = ttl_seconds
        self.max_keys = max_keys
        self._keys: OrderedDict[bytes, tuple[bytes, float]] = OrderedDict()

    async def seen(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> list[bool]:
        now = time.monotonic()
        out = []
        for k, d in zip(keys, digests, strict=True):
            hit = self._keys.get(k)
            out.append(hit is not None and hit[1] > now and hit[0] == d)
        return out

    async def mark(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> None:
        expires = time.monotonic() + self.ttl
        for k, d in zip(keys, digests, strict=True):
            self._keys[k] = (d, expires)
            self._keys.move_to_end(k)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)

    async def close(self) -> None:
        self._keys.clear()


# Marks live in hashes, one per time bucket (`<prefix>dedup:<n>`, n = unix time // bucket
# seconds): field = dedup key, value = content digest. A lookup reads the newest `count` buckets,
# newest first (a key's latest mark decides). Packed calls: ARGV = prefix, key width, keys
# (concatenated), digest width, digests (concatenated), then the bucket number(s). HMGET/HSET
# take up to PER_CALL fields at once (Lua's unpack is bounded).
_SEEN_PACKED = """
local prefix, kw, keys, dw, digests = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5]
local newest, count = tonumber(ARGV[6]), tonumber(ARGV[7])
local n = #keys / kw
local fields, out, decided = {}, {}, {}
for i = 1, n do
  fields[i] = string.sub(keys, (i - 1) * kw + 1, i * kw)
  out[i] = '0'
end
for b = newest, newest - count + 1, -1 do
  local bucket = prefix .. 'dedup:' .. b
  if redis.call('EXISTS', bucket) == 1 then
    for s = 1, n, 1000 do
      local e = math.min(s + 999, n)
      local stored = redis.call('HMGET', bucket, unpack(fields, s, e))
      for j = s, e do
        local v = stored[j - s + 1]
        if v and not decided[j] then
          decided[j] = true
          if v == string.sub(digests, (j - 1) * dw + 1, j * dw) then out[j] = '1' end
        end
      end
    end
  end
end
return table.concat(out)
"""

_MARK_PACKED = """
local prefix, kw, keys, dw, digests = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5]
local bucket, ttl = prefix .. 'dedup:' .. ARGV[6], ARGV[7]
local n = #keys / kw
for s = 1, n, 1000 do
  local pairs = {}
  for j = s, math.min(s + 999, n) do
    pairs[#pairs + 1] = string.sub(keys, (j - 1) * kw + 1, j * kw)
    pairs[#pairs + 1] = string.sub(digests, (j - 1) * dw + 1, j * dw)
  end
  redis.call('HSET', bucket, unpack(pairs))
end
redis.call('EXPIRE', bucket, ttl)
return n
"""

KEY_WIDTH = 16  # a stream's dedup_key
DIGEST_WIDTH = 8  # footfall.shared.kafka.content_digest
BUCKETS_PER_TTL = 3  # a bucket spans a third of the TTL: 4 buckets cover any mark of the last TTL


def _packable(keys: Sequence[bytes], digests: Sequence[bytes]) -> bool:
    return _width(keys) == KEY_WIDTH and _width(digests) == DIGEST_WIDTH


def _width(values: Sequence[bytes]) -> int | None:
    """The width every value has (None: mixed)."""
    if isinstance(values, Packed):
        return values.width
    widths = {len(v) for v in values}
    return widths.pop() if len(widths) == 1 else None


def _joined(values: Sequence[bytes]) -> bytes:
    return values.blob if isinstance(values, Packed) else b"".join(values)


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
        self._seen_packed = self._client.register_script(_SEEN_PACKED)
        self._mark_packed = self._client.register_script(_MARK_PACKED)
        self._down_until = 0.0
        self.available = True

        # A mark is found for at least `ttl` seconds: a lookup reads the buckets of the last
        # ttl + one bucket, and a bucket lives `ttl` + one bucket after its last mark.
        self.bucket_seconds = max(self.ttl // BUCKETS_PER_TTL, 1)
        self.buckets = -(-self.ttl // self.bucket_seconds) + 1
        self.bucket_ttl = self.ttl + self.bucket_seconds

    def _bucket_number(self) -> int:
        return int(time.time()) // self.bucket_seconds

    def _bucket(self, number: int) -> bytes:
        return self.prefix + b"dedup:" + str(number).encode()

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

    async def seen(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> list[bool]:
        if not keys or self._bypassed():
            return [False] * len(keys)
        started = time.perf_counter()
        newest = self._bucket_number()
        try:
            found: list[bool] = []
            for i in range(0, len(keys), self.chunk):
                chunk = slice(i, i + self.chunk)
                if _packable(keys[chunk], digests[chunk]):
                    args = [*self._packed_args(keys[chunk], digests[chunk]), newest, self.buckets]
                    flags = await self._seen_packed(args=args)
                    found.extend(flag == 49 for flag in flags)  # b"1"
                else:
                    found.extend(await self._seen_each(keys[chunk], digests[chunk], newest))
        except (RedisError, OSError) as exc:
            self._failed(exc, "lookup")
            return [False] * len(keys)
        self._recovered()
        metrics.DEDUP_LOOKUP_SECONDS.observe(time.perf_counter() - started)
        return found

    async def _seen_each(self, keys: Sequence[bytes], digests: Sequence[bytes], newest: int) -> list[bool]:
        """Keys or digests of other widths: the same lookup, one HMGET per bucket from here."""
        latest: list[bytes | None] = [None] * len(keys)
        for number in range(newest, newest - self.buckets, -1):
            stored: list[bytes | None] = await self._client.hmget(self._bucket(number), list(keys))  # type: ignore[assignment]
            latest = [old if old is not None else new for old, new in zip(latest, stored, strict=True)]
        return [v == d for v, d in zip(latest, digests, strict=True)]

    async def mark(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> None:
        if not keys or self._bypassed():
            return
        number = self._bucket_number()
        try:
            for i in range(0, len(keys), self.chunk):
                chunk = slice(i, i + self.chunk)
                if _packable(keys[chunk], digests[chunk]):
                    args = [*self._packed_args(keys[chunk], digests[chunk]), number, self.bucket_ttl]
                    await self._mark_packed(args=args)
                else:
                    async with self._client.pipeline(transaction=False) as pipe:
                        pipe.hset(self._bucket(number), mapping=dict(zip(keys[chunk], digests[chunk], strict=True)))
                        pipe.expire(self._bucket(number), self.bucket_ttl)
                        await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed(exc, "mark")
            return
        self._recovered()

    def _packed_args(self, keys: Sequence[bytes], digests: Sequence[bytes]) -> list[bytes | int]:
        return [self.prefix, KEY_WIDTH, _joined(keys), DIGEST_WIDTH, _joined(digests)]

    async def close(self) -> None:
        await self._client.aclose()
