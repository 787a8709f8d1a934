"""Frozen types that cross process boundaries: a validated event and a rejected one."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

_LEN = struct.Struct("<I").pack  # a part's length prefix: 4 bytes, little-endian
_blake2b = hashlib.blake2b


@dataclass(slots=True)
class Event:
    """One validated, normalised event of one project.

    `properties` holds every property except the ones lifted into fields (`time`,
    `distinct_id`, `$insert_id`, `token`); `ip` stays separate until enrichment,
    which replaces it by `$city`, `$region` and `mp_country_code` and drops it.

    Treated as immutable, but not declared frozen: a frozen dataclass's constructor sets each
    field through `object.__setattr__` and costs five times as much (1.2 against 0.24 µs),
    and one is made for every ingested event.
    """

    project_id: int
    event: str
    time_ms: int
    distinct_id: str
    insert_id: str
    properties: dict[str, Any]
    ip: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """One rejected event: what the strict 400 body reports, plus a metrics reason."""

    index: int
    insert_id: str | None
    field: str
    message: str
    reason: str  # short label for metrics: "time", "insert_id", "size", ...

    def as_record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "$insert_id": self.insert_id,
            "field": self.field,
            "message": self.message,
        }


def dedup_key(project_id: int, event: str, time_ms: int, distinct_id: str, insert_id: str) -> bytes:
    """16-byte hash of the dedup identity (project, event, time, distinct_id, $insert_id).

    The same function feeds Redis keys and the `dedup_hash` column, so every layer
    agrees on what a duplicate is. NUL separators cannot occur inside the fields'
    JSON-decoded text without being part of the value, and lengths are prefixed, so
    distinct tuples never collide structurally.
    """
    # One buffer, one hash call (the same bytes as feeding the parts one by one): this runs
    # for every ingested event.
    p, t = b"%d" % project_id, b"%d" % time_ms
    e = event.encode("utf-8", "surrogatepass")
    d = distinct_id.encode("utf-8", "surrogatepass")
    i = insert_id.encode("utf-8", "surrogatepass")
    data = b"%s%s%s%s%s%s%s%s%s%s" % (
        _LEN(len(p)),
        p,
        _LEN(len(e)),
        e,
        _LEN(len(t)),
        t,
        _LEN(len(d)),
        d,
        _LEN(len(i)),
        i,
    )
    return _blake2b(data, digest_size=16).digest()


def event_dedup_key(e: Event) -> bytes:
    return dedup_key(e.project_id, e.event, e.time_ms, e.distinct_id, e.insert_id)
