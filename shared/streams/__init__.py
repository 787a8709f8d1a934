"""Ingested streams, each described once (`Stream`); `STREAMS` lists every one of them
(the topics created, the worker's subscriptions)."""

from footfall.shared.streams.events import EVENTS
from footfall.shared.streams.stream import CodecError, Intake, Locator, Place, Rows, Stream

STREAMS: tuple[Stream, ...] = (EVENTS,)  # type: ignore[type-arg]

__all__ = ["EVENTS", "STREAMS", "CodecError", "Intake", "Locator", "Place", "Rows", "Stream"]
