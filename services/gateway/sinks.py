"""Where accepted events go. `publish()` returns only once the events are durable; if it
cannot guarantee that it raises `UnavailableError` and the client gets a 503.

Implementations: `MemorySink` (tests), `KafkaSink` (`services.gateway.kafka_sink`, the
distributed shape) and `EmbeddedSink` (`services.standalone.sink`, inline storage).
"""

from __future__ import annotations

from typing import Protocol

from footfall.shared.events import Event


class EventSink(Protocol):
    async def start(self) -> None: ...

    async def publish(self, events: list[Event]) -> None: ...

    async def stop(self) -> None: ...


class MemorySink:
    """Keeps published events in a list; `fail` makes it behave like an unreachable broker."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.fail = False

    async def start(self) -> None:
        return None

    async def publish(self, events: list[Event]) -> None:
        from footfall.shared.errors import UnavailableError

        if self.fail:
            raise UnavailableError()
        self.events.extend(events)

    async def stop(self) -> None:
        return None
