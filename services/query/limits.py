"""Per-project limits on queries and exports: rolling budgets (per hour, per second) and a
concurrency cap, 429 with `Retry-After` beyond.

Reports take a slot for the time of the request (`slot`). An export's answer streams long
after its handler returned, so it holds its slot until the stream ends or the client
leaves (`acquire` → `Slot.release`, wired in `QueryService.wrap`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from footfall.shared.errors import RateLimitedError


@dataclass(frozen=True)
class Window:
    """At most `limit` requests per rolling `seconds` (`limit=0` disables it); `label` names it in the 429."""

    seconds: float
    limit: int
    label: str


class Slot:
    """A running request's hold on its project's concurrency; `release` is idempotent."""

    def __init__(self, limiter: QueryLimiter, project_id: int) -> None:
        self._limiter = limiter
        self._project_id = project_id
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._limiter._running[self._project_id] -= 1


class QueryLimiter:
    """`per_hour=0` disables the hourly budget, `per_second=0` the per-second one, and
    `concurrency=0` the cap. `what` names the requests in the 429 messages."""

    def __init__(
        self,
        per_hour: int,
        concurrency: int,
        *,
        per_second: int = 0,
        what: str = "queries",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_hour = per_hour
        self.concurrency = concurrency
        self.what = what
        self.windows = tuple(
            w for w in (Window(3600, per_hour, "per hour"), Window(1, per_second, "per second")) if w.limit > 0
        )
        self._clock = clock
        self._history: dict[tuple[int, float], deque[float]] = {}
        self._running: dict[int, int] = {}

    def _admit(self, project_id: int, counted: bool) -> None:
        now = self._clock()
        if self.concurrency and self._running.get(project_id, 0) >= self.concurrency:
            raise RateLimitedError(
                f"too many concurrent {self.what} for this project (at most {self.concurrency})", retry_after=1
            )
        if not counted:
            return
        spent = []
        for w in self.windows:
            times = self._history.setdefault((project_id, w.seconds), deque())
            while times and times[0] <= now - w.seconds:
                times.popleft()
            if len(times) >= w.limit:
                retry = max(1, math.ceil(times[0] + w.seconds - now))
                raise RateLimitedError(f"{self.what} rate limit exceeded ({w.limit} {w.label})", retry_after=retry)
            spent.append(times)
        for times in spent:
            times.append(now)

    def acquire(self, project_id: int, *, counted: bool = True) -> Slot:
        """Admit one request (429 when a budget or the cap is spent) and hold a slot for it."""
        self._admit(project_id, counted)
        self._running[project_id] = self._running.get(project_id, 0) + 1
        return Slot(self, project_id)

    @asynccontextmanager
    async def slot(self, project_id: int, *, counted: bool = True) -> AsyncIterator[None]:
        """A concurrency slot for one query; `counted` ones also spend the budgets."""
        held = self.acquire(project_id, counted=counted)
        try:
            yield
        finally:
            held.release()
            await asyncio.sleep(0)
