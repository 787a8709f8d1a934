"""`/engage` paging snapshots: the ordered members of a multi-page query, kept about a day (TTL)."""

from footfall.shared.schema.catalog import ENGAGE_SESSIONS

STATEMENTS = [ENGAGE_SESSIONS.create_statement()]
