"""What every Kafka-facing service shares: topic names, the event envelope and the
credential channel (the compacted directory topic)."""

from footfall.shared.kafka.codec import (
    CodecError,
    accepted_header,
    accepted_ms_of,
    content_digest,
    decode_event,
    encode_event,
    event_key,
)
from footfall.shared.kafka.topics import Topics, ensure_topics

__all__ = [
    "CodecError",
    "Topics",
    "accepted_header",
    "accepted_ms_of",
    "content_digest",
    "decode_event",
    "encode_event",
    "ensure_topics",
    "event_key",
]
