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
from footfall.shared.config import BootstrapSettings, LogSettings, StoreSettings


@dataclass(frozen=True)
class ServeSettings:
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    query: QuerySettings = field(default_factory=QuerySettings)
    management: ManagementSettings = field(default_factory=ManagementSettings)
    migrate: MigrateSettings = field(default_factory=MigrateSettings)

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

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> ServeSettings:
        return cls(
            gateway=GatewaySettings.from_env(values),
            worker=WorkerSettings.from_env(values, data_dir=data_dir),
            query=QuerySettings.from_env(values, data_dir=data_dir),
            management=ManagementSettings.from_env(values, data_dir=data_dir),
            migrate=MigrateSettings.from_env(values, data_dir=data_dir),
        )
