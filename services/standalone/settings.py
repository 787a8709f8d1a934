"""What `footfall serve` reads: every service it runs in one process, each with its own
settings object (the in-process worker only when `FOOTFALL_KAFKA_BOOTSTRAP` is set)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from footfall.services.app.settings import ManagementSettings
from footfall.services.gateway.settings import GatewaySettings
from footfall.services.migrate.settings import MigrateSettings
from footfall.services.query.settings import QuerySettings
from footfall.services.worker.settings import WorkerSettings
from footfall.shared.config import BootstrapSettings, ConfigError, Env, LogSettings, StoreSettings
from footfall.shared.profiles.cache import DEFAULT_PROFILES


@dataclass(frozen=True)
class ServeSettings:
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    query: QuerySettings = field(default_factory=QuerySettings)
    management: ManagementSettings = field(default_factory=ManagementSettings)
    migrate: MigrateSettings = field(default_factory=MigrateSettings)
    # FOOTFALL_PROFILE_CACHE_SIZE: current profile states kept by the inline profile store
    # (`footfall.shared.profiles.cache`); None: DEFAULT_PROFILES with chDB, none with a server.
    profile_cache_size: int | None = None

    @property
    def log(self) -> LogSettings:
        return self.query.log

    @property
    def store(self) -> StoreSettings:
        return self.query.store

    @property
    def bootstrap(self) -> BootstrapSettings:
        return self.management.bootstrap

    @property
    def distributed(self) -> bool:
        """Imports go through Kafka to in-process workers (else they are stored inline)."""
        return bool(self.worker.kafka.bootstrap)

    @property
    def profile_cache(self) -> int:
        """Profiles the inline store keeps (0: no cache). By default only with chDB, which
        one process opens, so this process is the one writer of its profiles."""
        if self.profile_cache_size is not None:
            return self.profile_cache_size
        return DEFAULT_PROFILES if self.store.embedded else 0

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> ServeSettings:
        return cls(
            gateway=GatewaySettings.from_env(values),
            worker=WorkerSettings.from_env(values, data_dir=data_dir),
            query=QuerySettings.from_env(values, data_dir=data_dir),
            management=ManagementSettings.from_env(values, data_dir=data_dir),
            migrate=MigrateSettings.from_env(values, data_dir=data_dir),
            profile_cache_size=_profile_cache_size(Env(values)),
        )


def _profile_cache_size(env: Env) -> int | None:
    if not env.text("PROFILE_CACHE_SIZE"):
        return None
    size = env.integer("PROFILE_CACHE_SIZE", 0)
    if size < 0:
        raise ConfigError(f"FOOTFALL_PROFILE_CACHE_SIZE must be 0 (no cache) or more, got {size}")
    return size
