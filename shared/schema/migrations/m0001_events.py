"""The events table.

ReplacingMergeTree over the full dedup identity: rows with the same sorting key are
duplicates and merges keep the most recently ingested one. The key starts with the
project and the day so every query (always scoped by project and a time range) reads a
narrow range. `dedup_hash` (16 bytes, `shared.events.model.dedup_key`) lets aggregates
count distinct events instead of rows, so a duplicate that has not been merged away yet
still counts once.
"""

from footfall.shared.schema.catalog import EVENTS

STATEMENTS = [EVENTS.create_statement()]
