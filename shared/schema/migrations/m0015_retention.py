"""Per-project retention periods (`footfall.shared.retention`). The tables' TTL rules are
rendered from this table whenever a period changes; with no row every project keeps its data."""

from footfall.shared.schema.catalog import PROJECT_RETENTION

STATEMENTS = [PROJECT_RETENTION.create_statement()]
