"""Saved funnels and saved reports (bookmarks), per project (`shared/saved.py`).

Same pattern as the other metadata tables: ReplacingMergeTree versioned by `updated_at`
(microsecond precision, strictly increasing per item), reads use FINAL and skip rows
marked `deleted`. `body` is the validated definition as JSON text.
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS saved_funnels
    (
        project_id   UInt64,
        item_id      UInt64,
        name         String,
        body         String,
        created_at   DateTime64(6, 'UTC'),
        updated_at   DateTime64(6, 'UTC'),
        deleted      UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (project_id, item_id)
    """,
    """
    CREATE TABLE IF NOT EXISTS saved_reports
    (
        project_id   UInt64,
        item_id      UInt64,
        name         String,
        body         String,
        created_at   DateTime64(6, 'UTC'),
        updated_at   DateTime64(6, 'UTC'),
        deleted      UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (project_id, item_id)
    """,
]
