"""Settings from `FOOTFALL_*` environment variables, read once into frozen objects.

Every variable is documented in the README's configuration table; `tests/unit/test_config.py`
checks that the two stay in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "FOOTFALL_"


class ConfigError(ValueError):
    """A FOOTFALL_* variable holds a value that cannot be used."""


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(PREFIX + name, default)


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(env, name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{PREFIX}{name} must be an integer, got {raw!r}") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(env, name, str(default))
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{PREFIX}{name} must be a number, got {raw!r}") from None


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
    def from_env(cls, env: Mapping[str, str]) -> ImportLimits:
        return cls(
            max_events_per_request=_int(env, "IMPORT_MAX_EVENTS", cls.max_events_per_request),
            max_request_bytes=_int(env, "IMPORT_MAX_BYTES", cls.max_request_bytes),
        )


@dataclass(frozen=True)
class Settings:
    """Everything a Footfall process reads from its environment."""

    data_dir: Path = Path("footfall-data")
    warehouse_dsn: str = ""  # empty: chdb://<data_dir>/chdb
    geoip_db: str = ""
    log_level: str = "info"
    log_format: str = "json"
    limits: ImportLimits = field(default_factory=ImportLimits)
    kafka_bootstrap: str = ""
    kafka_topic_prefix: str = ""
    kafka_publish_timeout: float = 10.0
    redis_url: str = ""
    dedup_ttl_seconds: int = 6 * 3600
    worker_batch_size: int = 5000
    worker_batch_seconds: float = 0.5
    worker_consumers: int = 1
    query_rate_per_hour: int = 60
    query_concurrency: int = 5
    bootstrap_token: str = ""
    bootstrap_secret: str = ""
    bootstrap_sa_username: str = ""
    bootstrap_sa_secret: str = ""

    @property
    def dsn(self) -> str:
        if self.warehouse_dsn:
            return self.warehouse_dsn
        return f"chdb://{(self.data_dir / 'chdb').resolve()}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = dict(
            data_dir=Path(_get(env, "DATA_DIR", "footfall-data")),
            warehouse_dsn=_get(env, "WAREHOUSE_DSN", ""),
            geoip_db=_get(env, "GEOIP_DB", ""),
            log_level=_get(env, "LOG_LEVEL", "info"),
            log_format=_get(env, "LOG_FORMAT", "json"),
            limits=ImportLimits.from_env(env),
            kafka_bootstrap=_get(env, "KAFKA_BOOTSTRAP", ""),
            kafka_topic_prefix=_get(env, "KAFKA_TOPIC_PREFIX", ""),
            kafka_publish_timeout=_float(env, "KAFKA_PUBLISH_TIMEOUT", 10.0),
            redis_url=_get(env, "REDIS_URL", ""),
            dedup_ttl_seconds=_int(env, "DEDUP_TTL_SECONDS", 6 * 3600),
            worker_batch_size=_int(env, "WORKER_BATCH_SIZE", 5000),
            worker_batch_seconds=_float(env, "WORKER_BATCH_SECONDS", 0.5),
            worker_consumers=_int(env, "WORKER_CONSUMERS", 1),
            query_rate_per_hour=_int(env, "QUERY_RATE_PER_HOUR", 60),
            query_concurrency=_int(env, "QUERY_CONCURRENCY", 5),
            bootstrap_token=_get(env, "BOOTSTRAP_TOKEN", ""),
            bootstrap_secret=_get(env, "BOOTSTRAP_SECRET", ""),
            bootstrap_sa_username=_get(env, "BOOTSTRAP_SA_USERNAME", ""),
            bootstrap_sa_secret=_get(env, "BOOTSTRAP_SA_SECRET", ""),
        )
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
