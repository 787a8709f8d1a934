"""What the migration service reads (`FOOTFALL_MIGRATE_*`, plus the store, Kafka and import limits
of `footfall migrate --port`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from footfall.services.migrate.download import BLOCK_BYTES
from footfall.shared.config import Env, ImportLimits, KafkaSettings, LogSettings, StoreSettings

AMPLITUDE_US = "https://amplitude.com"
AMPLITUDE_EU = "https://analytics.eu.amplitude.com"
# Mixpanel hosts by source region (§14.6): (raw export, engage).
MIXPANEL_HOSTS = {
    "US": ("https://data.mixpanel.com", "https://mixpanel.com"),
    "EU": ("https://data-eu.mixpanel.com", "https://eu.mixpanel.com"),
    "IN": ("https://data-in.mixpanel.com", "https://in.mixpanel.com"),
}


def _hosts(raw: str) -> frozenset[str]:
    return frozenset(h.strip().lower() for h in raw.split(",") if h.strip())


@dataclass(frozen=True)
class MigrateSettings:
    amplitude_url: str = AMPLITUDE_US
    amplitude_eu_url: str = AMPLITUDE_EU
    mixpanel_export_url: str = ""  # empty: the region's host (tests and self-hosted sources override)
    mixpanel_engage_url: str = ""
    source_allowlist: frozenset[str] = frozenset()
    event_limit: int = 15_000_000  # events read per job; 0 = no limit (§14.8)
    max_running: int = 4  # running jobs per deployment
    retries: int = 6  # per source request on 429/5xx/network errors
    backoff_base: float = 2.0  # seconds, doubling to backoff_max, with jitter (§14.3)
    backoff_max: float = 60.0
    # How long a job keeps retrying a destination that answers unavailable (a broker restarting)
    # before it fails `destination_unavailable`, whatever `retries` says (resumable anyway).
    destination_patience: float = 120.0
    export_lag_hours: int = 3  # the last hour fetched ends at least this long ago
    max_inflated_bytes: int = 8 * 1024**3  # per zip member, after gunzip
    max_inflation_ratio: int = 200  # inflated bytes per compressed byte
    requests_per_hour: int = 60  # Mixpanel export requests per job
    batch_events: int = 2000  # events per publish (Mixpanel) and profile updates per publish
    # Amplitude events per publish: blocks are gathered, since the store's cost per event halves
    # from ~2,000-event inserts to ~20,000 (bench/migrate_amplitude.py); one publish runs while
    # the next is gathered, so about twice this many events are in the job's memory.
    publish_events: int = 20_000
    # Processes that map and validate Amplitude blocks beside the job's process; 0 = a thread of it.
    workers: int = field(default_factory=lambda: min(2, os.cpu_count() or 1))
    block_bytes: int = BLOCK_BYTES  # inflated bytes per block handed to a worker (and published at once)
    geoip_db: str = ""  # FOOTFALL_GEOIP_DB: the mapping workers locate addresses when they build rows
    key: str = ""  # Fernet key of the stored source credentials; empty: <data>/migrate.key
    work_dir: str = ""  # where downloads are staged; empty: the system's temp folder
    url: str = "http://127.0.0.1:8000"  # the deployment `footfall migrate amplitude|mixpanel|status` talks to
    log: LogSettings = field(default_factory=LogSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    limits: ImportLimits = field(default_factory=ImportLimits)
    # FOOTFALL_IMPORT_FAST_PATH: the mapping workers build rows with the `/import` fast path
    fast_path: bool = True

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> MigrateSettings:
        env = Env(values)
        return cls(
            amplitude_url=env.text("MIGRATE_AMPLITUDE_URL", AMPLITUDE_US).rstrip("/"),
            amplitude_eu_url=env.text("MIGRATE_AMPLITUDE_EU_URL", AMPLITUDE_EU).rstrip("/"),
            mixpanel_export_url=env.text("MIGRATE_MIXPANEL_EXPORT_URL").rstrip("/"),
            mixpanel_engage_url=env.text("MIGRATE_MIXPANEL_ENGAGE_URL").rstrip("/"),
            source_allowlist=_hosts(env.text("MIGRATE_SOURCE_ALLOWLIST")),
            event_limit=env.integer("MIGRATE_EVENT_LIMIT", cls.event_limit),
            max_running=env.integer("MIGRATE_MAX_RUNNING", cls.max_running),
            retries=env.integer("MIGRATE_RETRIES", cls.retries),
            backoff_base=env.number("MIGRATE_BACKOFF_BASE", cls.backoff_base),
            backoff_max=env.number("MIGRATE_BACKOFF_MAX", cls.backoff_max),
            destination_patience=env.number("MIGRATE_DESTINATION_PATIENCE", cls.destination_patience),
            export_lag_hours=env.integer("MIGRATE_EXPORT_LAG_HOURS", cls.export_lag_hours),
            requests_per_hour=env.integer("MIGRATE_REQUESTS_PER_HOUR", cls.requests_per_hour),
            workers=env.integer("MIGRATE_WORKERS", min(2, os.cpu_count() or 1)),
            block_bytes=max(64 * 1024, env.integer("MIGRATE_BLOCK_BYTES", BLOCK_BYTES)),
            publish_events=max(1, env.integer("MIGRATE_PUBLISH_EVENTS", cls.publish_events)),
            geoip_db=env.text("GEOIP_DB"),
            key=env.text("MIGRATE_KEY"),
            work_dir=env.text("MIGRATE_WORK_DIR"),
            url=env.text("URL", cls.url) or cls.url,
            log=LogSettings.from_env(env),
            store=StoreSettings.from_env(env, data_dir),
            kafka=KafkaSettings.from_env(env),
            limits=ImportLimits.from_env(env),
            fast_path=env.flag("IMPORT_FAST_PATH", True),
        )
