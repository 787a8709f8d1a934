"""What `footfall gateway` reads from its environment: logging, Kafka and the import limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from footfall.shared.config import Env, ImportLimits, KafkaSettings, LogSettings


@dataclass(frozen=True)
class GatewaySettings:
    log: LogSettings = field(default_factory=LogSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    limits: ImportLimits = field(default_factory=ImportLimits)

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None) -> GatewaySettings:
        env = Env(values)
        return cls(LogSettings.from_env(env), KafkaSettings.from_env(env), ImportLimits.from_env(env))
