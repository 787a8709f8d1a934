"""What `footfall query` reads from its environment: the store, the per-project query and
export limits, and what one request may cost (body, answer cells, warehouse time and memory)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from footfall.services.query.jql.engine import JqlLimits
from footfall.services.query.jql.settings import jql_limits
from footfall.shared.config import Env, LogSettings, StoreSettings
from footfall.shared.warehouse.lanes import QueryLimits


@dataclass(frozen=True)
class ExportLimits:
    """Raw export's own per-project limits (the interface's: 60/hour, 3/second, 100 at once; 0 disables each)."""

    per_hour: int = 60
    per_second: int = 3
    concurrency: int = 100

    @classmethod
    def from_env(cls, env: Env) -> ExportLimits:
        return cls(
            per_hour=env.integer("EXPORT_RATE_PER_HOUR", cls.per_hour),
            per_second=env.integer("EXPORT_RATE_PER_SECOND", cls.per_second),
            concurrency=env.integer("EXPORT_CONCURRENCY", cls.concurrency),
        )


@dataclass(frozen=True)
class QuerySettings:
    log: LogSettings = field(default_factory=LogSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    rate_per_hour: int = 60  # queries per project per rolling hour (0: no limit)
    concurrency: int = 5  # queries per project at once (0: no limit)
    cohort_count_ttl: float = 60.0  # seconds a cohort's member count may be reused (0: never)
    export: ExportLimits = field(default_factory=ExportLimits)
    max_body_bytes: int = 256 * 1024  # a query's form body (the parameters), refused with 413 beyond
    max_cells: int = 1_000_000  # buckets × segments of one answer (0: no limit)
    warehouse: QueryLimits = field(default_factory=QueryLimits)  # per statement: time, memory; the lane's threads
    jql: JqlLimits = field(default_factory=JqlLimits)  # a JQL script's wall clock, heap and answer size

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> QuerySettings:
        env = Env(values)
        return cls(
            log=LogSettings.from_env(env),
            store=StoreSettings.from_env(env, data_dir),
            rate_per_hour=env.integer("QUERY_RATE_PER_HOUR", 60),
            concurrency=env.integer("QUERY_CONCURRENCY", 5),
            cohort_count_ttl=env.number("COHORT_COUNT_TTL", 60.0),
            export=ExportLimits.from_env(env),
            max_body_bytes=env.integer("QUERY_MAX_BODY_BYTES", cls.max_body_bytes),
            max_cells=env.integer("QUERY_MAX_CELLS", cls.max_cells),
            warehouse=QueryLimits(
                max_seconds=env.number("QUERY_MAX_SECONDS", QueryLimits.max_seconds),
                max_memory_bytes=env.integer("QUERY_MAX_MEMORY_BYTES", QueryLimits.max_memory_bytes),
                threads=env.integer("QUERY_THREADS", QueryLimits.threads),
                max_threads=env.integer("QUERY_MAX_THREADS", QueryLimits.max_threads),
            ),
            jql=jql_limits(env),
        )
