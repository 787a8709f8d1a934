"""Ingested streams, each described once (`Stream`); `STREAMS` lists every one of them
(the topics created, the worker's subscriptions): events (`/import`, `/track`), user
profile updates (`/engage`) and group profile updates (`/groups`)."""

from typing import Any

from footfall.shared.streams.events import EVENTS
from footfall.shared.streams.profiles import GROUP_UPDATES, USER_UPDATES
from footfall.shared.streams.stream import CodecError, Intake, Locator, Place, Rows, Stored, Stream, insert_rows

STREAMS: tuple[Stream[Any], ...] = (EVENTS, USER_UPDATES, GROUP_UPDATES)

__all__ = [
    "EVENTS",
    "GROUP_UPDATES",
    "STREAMS",
    "USER_UPDATES",
    "CodecError",
    "Intake",
    "Locator",
    "Place",
    "Rows",
    "Stored",
    "Stream",
    "insert_rows",
]
