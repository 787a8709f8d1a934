"""The events table.

ReplacingMergeTree over the full dedup identity: rows with the same sorting key are
duplicates and merges keep the most recently ingested one. The key starts with the
project and the day so every query (always scoped by project and a time range) reads a
narrow range. `dedup_hash` (16 bytes, `shared.events.model.dedup_key`) lets aggregates
count distinct events instead of rows, so a duplicate that has not been merged away yet
still counts once.
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS events
    (
        project_id      UInt64,
        time            DateTime64(3, 'UTC'),
        event           LowCardinality(String),
        distinct_id     String,
        insert_id       String,
        properties      String CODEC(ZSTD(1)),
        city            LowCardinality(String),
        region          LowCardinality(String),
        country_code    LowCardinality(String),
        dedup_hash      FixedString(16),
        ingested_at     DateTime64(3, 'UTC')
    )
    ENGINE = ReplacingMergeTree(ingested_at)
    PARTITION BY toYYYYMM(time)
    ORDER BY (project_id, toDate(time), event, distinct_id, time, insert_id)
    """,
]
