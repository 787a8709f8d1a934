"""What `footfall query` reads from its environment: the store and the per-project query limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from footfall.shared.config import Env, LogSettings, StoreSettings


@dataclass(frozen=True)
class QuerySettings:
    log: LogSettings = field(default_factory=LogSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    rate_per_hour: int = 60  # queries per project per rolling hour (0: no limit)
    concurrency: int = 5  # queries per project at once (0: no limit)
    cohort_count_ttl: float = 60.0  # seconds a cohort's member count may be reused (0: never)

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> QuerySettings:
        env = Env(values)
        return cls(
            log=LogSettings.from_env(env),
            store=StoreSettings.from_env(env, data_dir),
            rate_per_hour=env.integer("QUERY_RATE_PER_HOUR", 60),
            concurrency=env.integer("QUERY_CONCURRENCY", 5),
            cohort_count_ttl=env.number("COHORT_COUNT_TTL", 60.0),
        )
