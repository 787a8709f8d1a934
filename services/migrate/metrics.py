"""The migration service's Prometheus metrics (the default registry, served on `/metrics`;
serve's job process reports its totals to serve, which adds them here)."""

from prometheus_client import Counter

CHUNKS_DONE = Counter("footfall_migrate_chunks_done_total", "Migration chunks committed", ["source"])
EVENTS_READ = Counter("footfall_migrate_events_read_total", "Source events read by migration jobs", ["source"])
EVENTS_IMPORTED = Counter("footfall_migrate_events_imported_total", "Migrated events published", ["source"])
EVENTS_INVALID = Counter("footfall_migrate_events_invalid_total", "Migrated events refused", ["source", "reason"])
SOURCE_RETRIES = Counter("footfall_migrate_source_retries_total", "Source requests retried", ["source"])

COUNTERS = {
    "chunks_done": CHUNKS_DONE,
    "events_read": EVENTS_READ,
    "events_imported": EVENTS_IMPORTED,
    "events_invalid": EVENTS_INVALID,
    "source_retries": SOURCE_RETRIES,
}

Totals = dict[tuple[str, tuple[str, ...]], float]


def totals() -> Totals:
    """Every counter's value by (counter, label values): what a job process reports to `serve`."""
    out: Totals = {}
    for key, counter in COUNTERS.items():
        for family in counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[(key, tuple(sample.labels.values()))] = sample.value
    return out


def add_totals(reported: Totals, seen: Totals) -> None:
    """Count here what another process's `totals()` added since `seen` (updated in place)."""
    for (key, labels), value in reported.items():
        delta = value - seen.get((key, labels), 0.0)
        if delta > 0 and key in COUNTERS:
            COUNTERS[key].labels(*labels).inc(delta)
        seen[(key, labels)] = value
