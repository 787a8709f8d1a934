"""What every Kafka-facing service shares: topic names, record headers and digests, and the
credential channel (the compacted directory topic). Record values are the streams'
business (`footfall.shared.streams`)."""

from footfall.shared.kafka.codec import accepted_header, accepted_ms_of, content_digest
from footfall.shared.kafka.topics import Topics, ensure_topics

__all__ = ["Topics", "accepted_header", "accepted_ms_of", "content_digest", "ensure_topics"]
