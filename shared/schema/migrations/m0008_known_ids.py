"""The distinct ids each project's events carry (`known_ids`), kept by a materialised view over
`events` and backfilled from the events already stored. The first and last event time ride
along (min/max states), so a later "active users" view can use the same table.

Running the backfill again (a crash half-way) is harmless: min/max states of the same events
merge to the same values."""

from footfall.shared.schema.catalog import KNOWN_IDS

_SELECT = """
    SELECT project_id, distinct_id, min(time) AS first_seen, max(time) AS last_seen
    FROM events
    WHERE distinct_id != ''
    GROUP BY project_id, distinct_id
"""

STATEMENTS = [
    KNOWN_IDS.create_statement(),
    "CREATE MATERIALIZED VIEW IF NOT EXISTS known_ids_mv TO known_ids AS" + _SELECT,
    "INSERT INTO known_ids" + _SELECT,
]
