"""Materialised event counts and uniques per (project, event, quarter hour).

The grain is 15 minutes of UTC, not an hour: every time zone's offset (and every DST
transition since 1971) is a multiple of 15 minutes, so each quarter hour lies inside one
local minute-aligned hour, day, week and month of *any* project time zone, including
Asia/Kolkata (+05:30), Asia/Kathmandu (+05:45) and Australia/Lord_Howe's 30-minute DST.
One aggregate therefore serves hour/day/week/month buckets of every project exactly.

Both measures are exact distinct sets, so a duplicate that slipped past the
ReplacingMergeTree (or the same event inserted twice) still counts once:

* `events`: the distinct `dedup_hash`es (type=general);
* `users`:  the distinct non-empty `distinct_id`s (type=unique; decisions.md: an empty
  distinct_id is never a user).

The last statement backfills events stored before this migration. Because the states
are distinct sets, running it again, or racing it with inserts that the view already
counted, can never count an event twice.
"""

from footfall.shared.schema.catalog import EVENT_COUNTS_15M

STATEMENTS = [
    EVENT_COUNTS_15M.create_statement(),
    """
    CREATE MATERIALIZED VIEW IF NOT EXISTS event_counts_15m_mv TO event_counts_15m AS
    SELECT
        project_id,
        event,
        toStartOfFifteenMinutes(time) AS quarter,
        uniqExactState(dedup_hash) AS events,
        uniqExactStateIf(distinct_id, distinct_id != '') AS users
    FROM events
    GROUP BY project_id, event, quarter
    """,
    """
    INSERT INTO event_counts_15m
    SELECT
        project_id,
        event,
        toStartOfFifteenMinutes(time) AS quarter,
        uniqExactState(dedup_hash) AS events,
        uniqExactStateIf(distinct_id, distinct_id != '') AS users
    FROM events
    GROUP BY project_id, event, quarter
    """,
]
