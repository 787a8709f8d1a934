"""Bounded starts and stops for what a process runs beside its HTTP app.

Every process (`serve`, `gateway`, `worker`) must stop within `SHUTDOWN_SECONDS` of
SIGTERM in every state, and must answer HTTP at once however far its brokers are. The
rules its `Background` services follow:

* `start()` returns at once. Connecting, creating topics and joining a consumer group
  happen in a task of the service, which retries with backoff until it succeeds or the
  service is stopped. A service reports where it stands through its own health method.
* `stop()` is bounded: each service gets a share of `STOP_SECONDS` (`bounded` below);
  what does not finish in time is cancelled. Nothing acknowledged depends on a stop
  finishing: Kafka keeps what it acknowledged, and a consumer commits only after its
  insert, so an abandoned batch is read again by the next owner and deduplicated.

`Stopping` is the interruptible pause those retry loops use, so a stop never waits out
a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Protocol, TypeVar

import structlog

__all__ = ["SHUTDOWN_SECONDS", "STOP_SECONDS", "Background", "Services", "Stopping", "bounded"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

# The promise: a process exits within this many seconds of SIGTERM.
SHUTDOWN_SECONDS = 5.0
# What a process's lifespan shutdown may take in total (its services stop concurrently);
# the HTTP drain before it and the interpreter's exit after it share the rest.
STOP_SECONDS = 2.5


async def bounded(awaitable: Awaitable[T], seconds: float, *, what: str) -> bool:
    """Await `awaitable` for at most `seconds`; on timeout cancel it and log. True when it
    finished in time (an exception it raised is logged and counts as finished)."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=max(seconds, 0.0))
    if not done:
        task.cancel()
        # Give the cancellation a moment to run its cleanup; never wait for it unbounded.
        await asyncio.wait({task}, timeout=0.2)
        log.warning("stop_step_timed_out", step=what, seconds=round(seconds, 2))
        return False
    if not task.cancelled() and task.exception() is not None:
        log.info("stop_step_failed", step=what, error=str(task.exception())[:300])
    return True


class Background(Protocol):
    """A service a process runs beside its HTTP app (like `footfall.shared.web.Background`;
    what `start()` returns is ignored)."""

    async def start(self) -> object: ...

    async def stop(self) -> None: ...


class Stopping:
    """A stop flag that a backoff pause can wait on: `await stopping.pause(s)` returns
    after `s` seconds or as soon as `set()` is called, whichever comes first."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()

    async def pause(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if the sleep was cut short by `set()`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), max(seconds, 0.0))
        return self._event.is_set()


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


class Services:
    """What a process runs beside its HTTP app, started without delaying it and stopped
    within `STOP_SECONDS`.

    `start()` returns at once: each service's own `start()` runs in a task of its own (so a
    directory refresh waiting for the broker does not hold back the consumers, nor the
    HTTP app), retried with backoff until it succeeds or the process stops. `stop()` cuts
    short the starts still running, then stops every service concurrently, each bounded by
    what is left of `STOP_SECONDS`. `health()` says where each one stands.
    """

    RETRY_SECONDS = (1.0, 2.0, 5.0)

    def __init__(self, **services: Background) -> None:
        self.services = dict(services)
        self._state: dict[str, str] = dict.fromkeys(self.services, "idle")
        self._errors: dict[str, str] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = Stopping()

    @classmethod
    def of(cls, *services: Background) -> Services:
        """Named after their classes (`KafkaSink` → `kafka_sink`)."""
        return cls(**{_snake(type(s).__name__): s for s in services})

    async def start(self) -> None:
        for name, service in self.services.items():
            self._state[name] = "starting"
            self._tasks[name] = asyncio.create_task(self._start(name, service), name=f"start-{name}")

    async def _start(self, name: str, service: Background) -> None:
        attempt = 0
        while not self._stopping:
            try:
                await service.start()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.RETRY_SECONDS[min(attempt, len(self.RETRY_SECONDS) - 1)]
                attempt += 1
                self._errors[name] = str(exc)[:300]
                log.warning("service_start_failed", service=name, error=self._errors[name], retry_in=delay)
                await self._stopping.pause(delay)
                continue
            self._state[name] = "started"
            self._errors.pop(name, None)
            return

    async def stop(self, seconds: float = STOP_SECONDS) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._stopping.set()
        starting = [t for t in self._tasks.values() if not t.done()]
        for task in starting:
            task.cancel()
        if starting:
            await asyncio.wait(starting, timeout=min(0.3, seconds / 4))
        left = max(deadline - loop.time(), 0.1)
        await asyncio.gather(
            *(bounded(service.stop(), left, what=f"stop {name}") for name, service in self.services.items())
        )
        for name in self.services:
            self._state[name] = "stopped"

    def health(self) -> dict[str, str]:
        """`{name: "starting" | "started" | "stopped" | "starting (last error: …)"}`."""
        out: dict[str, str] = {}
        for name, state in self._state.items():
            error = self._errors.get(name)
            out[name] = f"{state} (last error: {error})" if error and state == "starting" else state
        return out
