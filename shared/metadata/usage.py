"""`last_used` of service accounts: logins noted in memory, written at most once a minute per account.

`note(sa_id)` is what `Authenticator` calls after a successful service-account login (from the
verification thread: cheap, locked, no IO). A background loop writes what was noted every
`flush_seconds` to the store (`MetadataStore.record_usage`, the `service_account_usage` table);
an account written less than `min_interval` seconds ago is not noted again (semantics-2 §17.1:
at most once a minute per account). Memory is bounded by the number of accounts. A failed write
is logged and retried with the next flush. Processes without the store (the Kafka gateways) do
not record logins.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime

import structlog

__all__ = ["UsageRecorder"]

log = structlog.get_logger(__name__)

Write = Callable[[Mapping[int, datetime]], Awaitable[None]]


class UsageRecorder:
    def __init__(
        self,
        write: Write,
        *,
        min_interval: float = 60.0,
        flush_seconds: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.write = write
        self.min_interval = min_interval
        self.flush_seconds = flush_seconds
        self.clock = clock
        self._pending: dict[int, float] = {}
        self._written: dict[int, float] = {}
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None

    def note(self, sa_id: int) -> None:
        moment = self.clock()
        with self._lock:
            if moment - self._written.get(sa_id, float("-inf")) >= self.min_interval:
                self._pending[sa_id] = moment

    async def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            before = {sa: self._written.get(sa) for sa in pending}
            self._written.update(pending)  # notes arriving during the write are not due yet
        if not pending:
            return
        try:
            await self.write({sa: datetime.fromtimestamp(t, UTC) for sa, t in pending.items()})
        except Exception as exc:  # the store is away: keep them for the next flush
            log.warning("service_account_usage_not_written", accounts=len(pending), error=str(exc)[:300])
            with self._lock:
                for sa, moment in pending.items():
                    self._pending.setdefault(sa, moment)
                    previous = before[sa]
                    if previous is None:
                        self._written.pop(sa, None)
                    else:
                        self._written[sa] = previous

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="service-account-usage")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_seconds)
            await self.flush()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
