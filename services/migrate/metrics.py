"""The migration service's Prometheus metrics (the default registry, served on `/metrics`)."""

from prometheus_client import Counter

CHUNKS_DONE = Counter("footfall_migrate_chunks_done_total", "Migration chunks committed", ["source"])
EVENTS_READ = Counter("footfall_migrate_events_read_total", "Source events read by migration jobs", ["source"])
EVENTS_IMPORTED = Counter("footfall_migrate_events_imported_total", "Migrated events published", ["source"])
EVENTS_INVALID = Counter("footfall_migrate_events_invalid_total", "Migrated events refused", ["source", "reason"])
SOURCE_RETRIES = Counter("footfall_migrate_source_retries_total", "Source requests retried", ["source"])
