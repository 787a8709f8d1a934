"""The per-project import rate limit: a rolling one-minute budget of events and of bytes.

The interface limits ingestion to "2 GB of uncompressed JSON per minute, or about 30,000
events per second, on a rolling 1-minute basis" and answers 429 above it. Footfall keeps,
per project, what the last 60 seconds used in one-second buckets and admits a request
when the usage of the window plus the request's cost fits both budgets
(`FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND` × 60 events, `FOOTFALL_IMPORT_RATE_BYTES_PER_MINUTE`
bytes; 0 disables either). A refused request costs nothing and is answered 429 with
`Retry-After`: the seconds until enough of the window has expired for it to fit.

Decisions where the interface is silent:

* The cost of a request is every item it carried (valid or not: "400 responses count
  toward the rate limit") and its uncompressed body size; it is charged after the body is
  decoded and before anything is published, so a refused batch stores nothing.
* A request larger than a whole budget is admitted when its project used nothing in the
  window, so a small budget never refuses a request forever.
* `/track` bodies may carry events of several projects: each project is charged its items
  (and the body's bytes in proportion), and the request is refused as a whole if any of
  them is over its budget.
* One window is shared by every gateway process through Redis (`RedisRateLimiter`: one
  Lua script checks and charges atomically; the clock is the gateways', so they should
  agree within a second or so); embedded, and for a gateway without `FOOTFALL_REDIS_URL`,
  the window lives in the process (`MemoryRateLimiter`). When Redis cannot be reached each
  gateway falls back to its own window (imports are not refused for Redis being down, and
  the limit still holds per process); Redis is tried again after a few seconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from footfall.shared.config import ImportLimits
from footfall.shared.errors import RateLimitedError

__all__ = [
    "WINDOW_SECONDS",
    "Cost",
    "MemoryRateLimiter",
    "RateBudget",
    "RateLimiter",
    "RedisRateLimiter",
    "admits",
    "open_rate_limiter",
    "retry_after",
    "split_bytes",
]

log = structlog.get_logger(__name__)

WINDOW_SECONDS = 60
MESSAGE = "Project exceeded rate limits. Please retry the request with exponential backoff."

# (second, events, bytes) of the requests admitted in that second, oldest first
Bucket = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Cost:
    events: int
    bytes: int


@dataclass(frozen=True, slots=True)
class RateBudget:
    """What one project may import per rolling minute; 0 means no limit."""

    events: int
    bytes: int

    @classmethod
    def from_limits(cls, limits: ImportLimits) -> RateBudget:
        return cls(limits.rate_events_per_second * WINDOW_SECONDS, limits.rate_bytes_per_minute)

    @property
    def enabled(self) -> bool:
        return self.events > 0 or self.bytes > 0


def admits(budget: RateBudget, buckets: Iterable[Bucket], cost: Cost) -> bool:
    """Whether a request of `cost` fits beside the usage `buckets` (the live window)."""
    used_events = used_bytes = 0
    for _, events, size in buckets:
        used_events += events
        used_bytes += size
    if used_events == 0 and used_bytes == 0:
        return True  # alone in its window: admitted whatever its size
    if budget.events > 0 and used_events + cost.events > budget.events:
        return False
    return not (budget.bytes > 0 and used_bytes + cost.bytes > budget.bytes)


def retry_after(budget: RateBudget, buckets: Sequence[Bucket], cost: Cost, now: int) -> int:
    """Whole seconds from `now` until enough of the window has expired for `cost` to fit
    (a bucket of second `s` leaves the window at `s + WINDOW_SECONDS`); at least 1."""
    ordered = sorted(buckets)
    for i, (second, _, _) in enumerate(ordered):
        if i + 1 < len(ordered) and ordered[i + 1][0] == second:
            continue
        if admits(budget, ordered[i + 1 :], cost):
            return max(1, second + WINDOW_SECONDS - now)
    return WINDOW_SECONDS  # pragma: no cover - an empty window admits


class RateLimiter(Protocol):
    async def charge(self, costs: Mapping[int, Cost]) -> None:
        """Charge each project its cost, all or nothing; `RateLimitedError` (429) when one
        of them does not fit its budget."""
        ...

    async def close(self) -> None: ...


def _wait(budget: RateBudget, windows: Mapping[int, Sequence[Bucket]], costs: Mapping[int, Cost], now: int) -> int:
    """Seconds until every project's cost fits (0: it fits now)."""
    wait = 0
    for project, cost in costs.items():
        buckets = windows.get(project, ())
        if not admits(budget, buckets, cost):
            wait = max(wait, retry_after(budget, buckets, cost, now))
    return wait


class MemoryRateLimiter:
    """The window in this process (embedded `serve`, a gateway without Redis, tests).
    `charge` never awaits, so it is atomic on the event loop."""

    def __init__(self, budget: RateBudget, *, clock: Callable[[], float] = time.time) -> None:
        self.budget = budget
        self.clock = clock
        self._windows: dict[int, deque[list[int]]] = {}

    def _window(self, project: int, now: int) -> deque[list[int]]:
        window = self._windows.setdefault(project, deque())
        while window and window[0][0] <= now - WINDOW_SECONDS:
            window.popleft()
        return window

    async def charge(self, costs: Mapping[int, Cost]) -> None:
        if not self.budget.enabled or not costs:
            return
        now = int(self.clock())
        windows = {p: [(b[0], b[1], b[2]) for b in self._window(p, now)] for p in costs}
        wait = _wait(self.budget, windows, costs, now)
        if wait:
            raise RateLimitedError(MESSAGE, retry_after=wait)
        for project, cost in costs.items():
            window = self._window(project, now)
            if window and window[-1][0] == now:
                window[-1][1] += cost.events
                window[-1][2] += cost.bytes
            else:
                window.append([now, cost.events, cost.bytes])
        if len(self._windows) > 10_000:  # forget idle projects
            self._windows = {p: w for p, w in self._windows.items() if self._window(p, now)}

    async def close(self) -> None:
        self._windows.clear()


# KEYS: one hash per project (fields e<second> / b<second>: events / bytes admitted in that
# second). ARGV: now, window, event budget, byte budget, then (events, bytes) per key.
# Returns {1} when every key was charged, else {0, {field, value, ...} per key}.
_CHARGE_SCRIPT = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local budget_e = tonumber(ARGV[3])
local budget_b = tonumber(ARGV[4])
local refused = false
local windows = {}
for i, key in ipairs(KEYS) do
  local cost_e = tonumber(ARGV[3 + 2 * i])
  local cost_b = tonumber(ARGV[4 + 2 * i])
  local flat = redis.call('HGETALL', key)
  local used_e, used_b = 0, 0
  local kept = {}
  for j = 1, #flat, 2 do
    local field = flat[j]
    if tonumber(string.sub(field, 2)) <= now - window then
      redis.call('HDEL', key, field)
    else
      local value = tonumber(flat[j + 1])
      if string.sub(field, 1, 1) == 'e' then used_e = used_e + value else used_b = used_b + value end
      kept[#kept + 1] = field
      kept[#kept + 1] = flat[j + 1]
    end
  end
  if (used_e > 0 or used_b > 0) and ((budget_e > 0 and used_e + cost_e > budget_e)
      or (budget_b > 0 and used_b + cost_b > budget_b)) then
    refused = true
  end
  windows[i] = kept
end
if refused then
  return {0, unpack(windows)}
end
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'e' .. now, ARGV[3 + 2 * i])
  redis.call('HINCRBY', key, 'b' .. now, ARGV[4 + 2 * i])
  redis.call('EXPIRE', key, window + 5)
end
return {1}
"""


def _buckets(flat: Sequence[Any]) -> list[Bucket]:
    """{e<s>: n, b<s>: n, ...} as returned by the script → buckets."""
    seconds: dict[int, list[int]] = {}
    for i in range(0, len(flat) - 1, 2):
        field = flat[i].decode() if isinstance(flat[i], bytes) else str(flat[i])
        cell = seconds.setdefault(int(field[1:]), [0, 0])
        cell[0 if field[0] == "e" else 1] += int(flat[i + 1])
    return sorted((s, e, b) for s, (e, b) in seconds.items())


class RedisRateLimiter:
    """The window shared by every gateway through Redis (keys `<prefix>footfall:rate:<id>`)."""

    def __init__(
        self,
        url: str,
        budget: RateBudget,
        *,
        prefix: str = "",
        timeout: float = 1.0,
        retry_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.budget = budget
        self.prefix = prefix
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._client = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1)
        )
        self._script = self._client.register_script(_CHARGE_SCRIPT)
        self._down_until = 0.0
        self._fallback = MemoryRateLimiter(budget, clock=clock)  # while Redis is unreachable

    async def charge(self, costs: Mapping[int, Cost]) -> None:
        if not self.budget.enabled or not costs:
            return
        if time.monotonic() < self._down_until:
            await self._fallback.charge(costs)
            return
        projects = list(costs)
        now = int(self.clock())
        args: list[int] = [now, WINDOW_SECONDS, self.budget.events, self.budget.bytes]
        for project in projects:
            args += [costs[project].events, costs[project].bytes]
        try:
            answer = await self._script(keys=[f"{self.prefix}footfall:rate:{p}" for p in projects], args=args)
        except (RedisError, OSError) as exc:
            if self._down_until == 0.0:
                log.warning(
                    "import_rate_limit_local",
                    error=str(exc)[:300],
                    detail="Redis unreachable: this process keeps its own window until it answers",
                )
            self._down_until = time.monotonic() + self.retry_seconds
            await self._fallback.charge(costs)
            return
        if self._down_until:
            log.info("import_rate_limit_restored")
            self._down_until = 0.0
        if int(answer[0]) == 1:
            return
        windows = {p: _buckets(flat) for p, flat in zip(projects, answer[1:], strict=True)}
        raise RateLimitedError(MESSAGE, retry_after=max(1, _wait(self.budget, windows, costs, now)))

    async def close(self) -> None:
        await self._client.aclose()


def open_rate_limiter(limits: ImportLimits, redis_url: str = "", *, prefix: str = "") -> RateLimiter:
    """Redis when a URL is given (the distributed shape), else the process's own window."""
    budget = RateBudget.from_limits(limits)
    if redis_url and budget.enabled:
        return RedisRateLimiter(redis_url, budget, prefix=prefix)
    return MemoryRateLimiter(budget)


def split_bytes(total: int, items: Mapping[int, int]) -> dict[int, Cost]:
    """Costs of a body of `total` bytes whose items belong to several projects (`items`:
    project → count): each project is charged its items and its share of the bytes."""
    count = sum(items.values())
    if count == 0:
        return {}
    return {p: Cost(n, math.ceil(total * n / count)) for p, n in items.items()}
