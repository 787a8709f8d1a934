"""Slow clients: a connection may not hold the server by sending slowly.

uvicorn bounds only the idle time between two requests (keep-alive); a client that opens
a connection and sends its request head a byte at a time, or stops half-way through a
body, holds the connection (and, for a body, a request task) forever. `GuardedHTTPProtocol`
is uvicorn's own HTTP protocol plus two timers, checked a few times a second:

* `FOOTFALL_HEADER_TIMEOUT_SECONDS` (default 10): from the connection's start (or the end
  of its previous answer) to a complete request head; beyond it the connection is closed.
* `FOOTFALL_BODY_TIMEOUT_SECONDS` (default 30): the longest pause between two pieces of a
  request body while the server waits for it (not while the server itself stopped reading);
  beyond it the connection is closed, which the application sees as the client leaving
  (`ClientDisconnect`: no answer, no 500, no stack trace).

0 disables either. `run_app` (`footfall.shared.server`) names this class by its import
path, so the processes of `gateway --workers N` use it too.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from footfall.shared.config import Env

__all__ = ["PROTOCOL", "GuardedHTTPProtocol", "Timeouts", "timeouts"]

PROTOCOL = "footfall.shared.slow_clients:GuardedHTTPProtocol"


class Timeouts:
    def __init__(self, header: float, body: float) -> None:
        self.header = header
        self.body = body


@cache
def timeouts() -> Timeouts:
    """The process's timeouts, from the environment (read once)."""
    env = Env()
    return Timeouts(env.number("HEADER_TIMEOUT_SECONDS", 10.0), env.number("BODY_TIMEOUT_SECONDS", 30.0))


class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol with a request-head timeout and a body idle timeout."""

    limits: Timeouts | None = None  # None: `timeouts()` (tests set their own)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = self.limits or timeouts()
        self._guard: asyncio.TimerHandle | None = None
        self._last_data = 0.0
        self._phase: tuple[str, int] = ("head", 0)
        self._phase_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        now = self.loop.time()
        self._last_data = self._phase_since = now
        self._phase = self._current_phase()
        if self._limits.header > 0 or self._limits.body > 0:
            self._schedule()

    def data_received(self, data: bytes) -> None:
        self._last_data = self.loop.time()
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        super().connection_lost(exc)

    def _current_phase(self) -> tuple[str, int]:
        """What the connection waits for: a request head, a body, or nothing from the client
        (the application is working or answering); with the current request's identity."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return ("head", id(cycle))
        if cycle.more_body:
            return ("body", id(cycle))
        return ("app", id(cycle))

    def _schedule(self) -> None:
        shortest = min(t for t in (self._limits.header, self._limits.body) if t > 0)
        self._guard = self.loop.call_later(min(1.0, max(0.05, shortest / 4)), self._check)

    def _check(self) -> None:
        self._guard = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        phase = self._current_phase()
        if phase != self._phase:
            self._phase, self._phase_since = phase, now
        kind = phase[0]
        if kind == "head" and self._limits.header > 0 and now - self._phase_since > self._limits.header:
            self.transport.close()
            return
        reading = not self.flow.read_paused
        if kind == "body" and self._limits.body > 0 and reading and now - self._last_data > self._limits.body:
            self.transport.close()
            return
        if kind != "body" or not reading:
            # A pause of the server's own making does not count against the client.
            self._last_data = now
        self._schedule()
