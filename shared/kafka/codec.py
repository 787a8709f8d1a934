"""What every stream's Kafka record carries besides its value: the gateway's acceptance
time (a header, for the delay metric only) and the content digest workers compare to tell
a plain retry from a changed copy under the same dedup key."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["ACCEPTED_HEADER", "accepted_header", "accepted_ms_of", "content_digest"]

ACCEPTED_HEADER = "accepted_ms"


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
    """8-byte hash of a record value: equal for a retried item, different for a changed copy."""
    return hashlib.blake2b(value, digest_size=8).digest()
