"""User and group profiles: the update log, the newest arrival per profile, and the current
state (see the catalog for the three tables)."""

from footfall.shared.schema.catalog import PROFILE_HEADS, PROFILE_UPDATES, PROFILES

STATEMENTS = [
    PROFILE_UPDATES.create_statement(),
    PROFILE_HEADS.create_statement(),
    """
    CREATE MATERIALIZED VIEW IF NOT EXISTS profile_heads_mv TO profile_heads AS
    SELECT project_id, group_key, profile_id, max(seq) AS max_seq
    FROM profile_updates
    GROUP BY project_id, group_key, profile_id
    """,
    PROFILES.create_statement(),
]
