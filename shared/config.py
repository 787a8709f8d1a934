"""Settings from `FOOTFALL_*` environment variables, read once into frozen objects.

This module holds the pieces several services share (logging, the store, Kafka, the
import limits, first-start credentials) and `Env`, the reader every settings class uses.
Each service composes its own settings object from them in its `settings.py`
(`GatewaySettings`, `WorkerSettings`, `QuerySettings`, `ServeSettings`,
`ManagementSettings`), so a gateway carries no query settings and a query process no
Kafka ones.

Every variable is documented in the README's configuration table;
`tests/unit/test_config.py` checks that the two stay in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PREFIX",
    "BootstrapSettings",
    "ConfigError",
    "Env",
    "ImportLimits",
    "KafkaSettings",
    "LogSettings",
    "StoreSettings",
]

PREFIX = "FOOTFALL_"


class ConfigError(ValueError):
    """A FOOTFALL_* variable holds a value that cannot be used."""


class Env:
    """Typed reads of `FOOTFALL_<name>` variables; a bad value names its variable."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values: Mapping[str, str] = os.environ if values is None else values

    def text(self, name: str, default: str = "") -> str:
        value = self.values.get(PREFIX + name, default)
        return default if value is None else str(value)

    def integer(self, name: str, default: int) -> int:
        raw = self.text(name, str(default))
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{PREFIX}{name} must be an integer, got {raw!r}") from None

    def number(self, name: str, default: float) -> float:
        raw = self.text(name, str(default))
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{PREFIX}{name} must be a number, got {raw!r}") from None


@dataclass(frozen=True)
class LogSettings:
    level: str = "info"
    format: str = "json"

    @classmethod
    def from_env(cls, env: Env) -> LogSettings:
        return cls(level=env.text("LOG_LEVEL", "info"), format=env.text("LOG_FORMAT", "json"))


@dataclass(frozen=True)
class StoreSettings:
    """Where the warehouse is: a ClickHouse server's DSN, else chDB in the data folder."""

    data_dir: Path = Path("footfall-data")
    warehouse_dsn: str = ""  # empty: chdb://<data_dir>/chdb

    @property
    def embedded(self) -> bool:
        return not self.warehouse_dsn

    @property
    def dsn(self) -> str:
        if self.warehouse_dsn:
            return self.warehouse_dsn
        return f"chdb://{(self.data_dir / 'chdb').resolve()}"

    @classmethod
    def from_env(cls, env: Env, data_dir: Path | None = None) -> StoreSettings:
        return cls(
            data_dir=data_dir if data_dir is not None else Path(env.text("DATA_DIR", "footfall-data")),
            warehouse_dsn=env.text("WAREHOUSE_DSN"),
        )


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = ""
    topic_prefix: str = ""
    publish_timeout: float = 10.0

    @classmethod
    def from_env(cls, env: Env) -> KafkaSettings:
        return cls(
            bootstrap=env.text("KAFKA_BOOTSTRAP"),
            topic_prefix=env.text("KAFKA_TOPIC_PREFIX"),
            publish_timeout=env.number("KAFKA_PUBLISH_TIMEOUT", 10.0),
        )


@dataclass(frozen=True)
class ImportLimits:
    """The interface's import limits (spec "Limits"); each one configurable."""

    max_events_per_request: int = 2000
    max_request_bytes: int = 2 * 1024 * 1024
    max_event_bytes: int = 1024 * 1024  # an event must be *under* this
    max_properties: int = 255  # fewer than
    max_nested_keys: int = 255  # fewer than
    max_depth: int = 3  # at most
    max_array_len: int = 255  # fewer than
    max_string_len: int = 255  # longer strings are truncated
    max_future_seconds: int = 3600

    @classmethod
    def from_env(cls, env: Env) -> ImportLimits:
        return cls(
            max_events_per_request=env.integer("IMPORT_MAX_EVENTS", cls.max_events_per_request),
            max_request_bytes=env.integer("IMPORT_MAX_BYTES", cls.max_request_bytes),
        )


@dataclass(frozen=True)
class BootstrapSettings:
    """Fixed first-start credentials of project 1 (random when empty)."""

    token: str = ""
    secret: str = ""
    sa_username: str = ""
    sa_secret: str = ""

    @classmethod
    def from_env(cls, env: Env) -> BootstrapSettings:
        return cls(
            token=env.text("BOOTSTRAP_TOKEN"),
            secret=env.text("BOOTSTRAP_SECRET"),
            sa_username=env.text("BOOTSTRAP_SA_USERNAME"),
            sa_secret=env.text("BOOTSTRAP_SA_SECRET"),
        )
