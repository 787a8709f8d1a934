"""Where accepted items go. `publish(stream, items)` returns only once the items are durable;
if it cannot guarantee that it raises `UnavailableError` and the client gets a 503. It
returns the items the store refused (index → reason: a profile update that clashes with its
profile) when it knows them — the embedded sink stores inline and does; a broker does not,
so the workers count such refusals in their metrics instead.

Implementations: `MemorySink` (tests), `KafkaSink` (`footfall.services.gateway.kafka_sink`,
the distributed shape) and `EmbeddedSink` (`footfall.services.standalone.sink`, inline
storage). Every one takes any `Stream`; none knows what an event is.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from footfall.shared.errors import UnavailableError
from footfall.shared.events import Event
from footfall.shared.streams import EVENTS, Stream

T = TypeVar("T")
B_contra = TypeVar("B_contra", contravariant=True)


class Sink(Protocol):
    async def start(self) -> None: ...

    async def publish(self, stream: Stream[T], items: list[T]) -> dict[int, str]: ...

    async def stop(self) -> None: ...


class FastBatch(Protocol):
    """What the `/import` fast path makes of a request: `FastRows` (Native rows of the events
    table) or `FastEnvelopes` (the events stream's Kafka records)."""

    @property
    def items(self) -> int: ...


class FastSink(Protocol[B_contra]):
    """A sink that stores the fast path's batches as they are, returning once they are durable:
    the embedded sink takes `FastRows`, the Kafka sink `FastEnvelopes`."""

    async def publish_fast(self, batch: B_contra) -> None: ...


class MemorySink:
    """Keeps published items per stream; `fail` makes it behave like an unreachable broker."""

    def __init__(self) -> None:
        self.published: dict[str, list[Any]] = {}
        self.fail = False

    async def start(self) -> None:
        return None

    async def publish(self, stream: Stream[T], items: list[T]) -> dict[int, str]:
        if self.fail:
            raise UnavailableError()
        self.published.setdefault(stream.name, []).extend(items)
        return {}

    async def stop(self) -> None:
        return None

    @property
    def events(self) -> list[Event]:
        """What was published to the events stream."""
        return self.published.setdefault(EVENTS.name, [])
