"""Per-project query limits: a rolling hourly budget and a concurrency cap (429 beyond)."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from footfall.shared.errors import RateLimitedError


class QueryLimiter:
    """`per_hour=0` disables the hourly budget; `concurrency=0` disables the cap."""

    def __init__(self, per_hour: int, concurrency: int, *, clock: object = time.monotonic) -> None:
        self.per_hour = per_hour
        self.concurrency = concurrency
        self._clock = clock
        self._history: dict[int, deque[float]] = {}
        self._running: dict[int, int] = {}

    def _now(self) -> float:
        return self._clock()  # type: ignore[operator,no-any-return]

    def _admit(self, project_id: int, counted: bool) -> None:
        now = self._now()
        if self.concurrency and self._running.get(project_id, 0) >= self.concurrency:
            raise RateLimitedError(
                f"too many concurrent queries for this project (at most {self.concurrency})", retry_after=1
            )
        if self.per_hour and counted:
            window = self._history.setdefault(project_id, deque())
            while window and window[0] <= now - 3600:
                window.popleft()
            if len(window) >= self.per_hour:
                retry = max(1, math.ceil(window[0] + 3600 - now))
                raise RateLimitedError(
                    f"query rate limit exceeded ({self.per_hour} queries per hour)", retry_after=retry
                )
            window.append(now)

    @asynccontextmanager
    async def slot(self, project_id: int, *, counted: bool = True) -> AsyncIterator[None]:
        """A concurrency slot for one query; `counted` ones also spend the hourly budget."""
        self._admit(project_id, counted)
        self._running[project_id] = self._running.get(project_id, 0) + 1
        try:
            yield
        finally:
            self._running[project_id] -= 1
            await asyncio.sleep(0)
