"""The `events.raw` envelope: one validated `Event` ↔ one Kafka record.

    key     = b"<project_id>:<distinct_id>"
    value   = {"v": 1, "p": project_id, "e": event, "t": time_ms, "d": distinct_id,
               "i": insert_id, "pr": properties, "ip": ip | null}
    headers = [("accepted_ms", b"<when the gateway accepted it>")]

The value depends only on the event, so a retried event is byte-for-byte the same
record value: workers hash it (`content_digest`) to tell a plain retry (dropped by the
Redis layer) from a changed copy under the same dedup key (inserted, so that the
table's "latest ingested copy wins" holds). The acceptance time rides in a header for
the delay metric only. Decoding is strict about shapes and types, because a record may
come from any producer: anything else raises `CodecError` with a short reason, and the
worker sends the record to the dead-letter topic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from footfall.shared.events import Event

VERSION = 1
ACCEPTED_HEADER = "accepted_ms"


class CodecError(ValueError):
    """A record that is not a version-1 event envelope; `reason` is a short metrics label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def event_key(e: Event) -> bytes:
    return f"{e.project_id}:{e.distinct_id}".encode()


def accepted_header(accepted_ms: int) -> list[tuple[str, bytes]]:
    return [(ACCEPTED_HEADER, str(accepted_ms).encode())]


def accepted_ms_of(headers: Sequence[tuple[str, bytes]] | None) -> int:
    """The gateway's acceptance time from a record's headers; 0 when absent or garbled."""
    for name, raw in headers or ():
        if name == ACCEPTED_HEADER:
            try:
                return int(raw)
            except (TypeError, ValueError):
                return 0
    return 0


def content_digest(value: bytes) -> bytes:
    """8-byte hash of a record value: equal for a retried event, different for a changed copy."""
    return hashlib.blake2b(value, digest_size=8).digest()


def encode_event(e: Event) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            "p": e.project_id,
            "e": e.event,
            "t": e.time_ms,
            "d": e.distinct_id,
            "i": e.insert_id,
            "pr": e.properties,
            "ip": e.ip,
        }
    )


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    # bool is an int subclass: never accept it where an integer is meant.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CodecError("field", f"envelope field {name!r} missing or not {kind.__name__}")
    return value


def decode_event(value: bytes | None) -> Event:
    """The event of a record value, or `CodecError`."""
    if value is None:
        raise CodecError("empty", "record has no value")
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise CodecError("json", "record value is not JSON") from None
    if not isinstance(data, dict):
        raise CodecError("envelope", "record value is not a JSON object")
    if data.get("v") != VERSION:
        raise CodecError("version", f"unknown envelope version {data.get('v')!r}")
    project_id = _field(data, "p", int)
    if project_id <= 0:
        raise CodecError("field", "project id must be positive")
    ip = data.get("ip")
    if ip is not None and not isinstance(ip, str):
        raise CodecError("field", "envelope field 'ip' is not a string")
    return Event(
        project_id=project_id,
        event=_field(data, "e", str),
        time_ms=_field(data, "t", int),
        distinct_id=_field(data, "d", str),
        insert_id=_field(data, "i", str),
        properties=_field(data, "pr", dict),
        ip=ip,
    )
