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
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson

__all__ = [
    "DEFAULT_HOT_PROPERTIES",
    "PREFIX",
    "BootstrapSettings",
    "ConfigError",
    "Env",
    "HotSettings",
    "ImportLimits",
    "KafkaSettings",
    "LogSettings",
    "RegionSettings",
    "StoreSettings",
]

PREFIX = "FOOTFALL_"


class ConfigError(ValueError):
    """A FOOTFALL_* variable holds a value that cannot be used."""


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


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

    def flag(self, name: str, default: bool) -> bool:
        """1/0, true/false, yes/no, on/off (any case); anything else is a `ConfigError`."""
        raw = self.text(name, "1" if default else "0").strip().lower()
        if raw not in _TRUE + _FALSE:
            raise ConfigError(f"{PREFIX}{name} must be 1 or 0 (true/false, on/off), got {raw!r}")
        return raw in _TRUE

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
    access: bool = True  # one structured `access` line per request (FOOTFALL_ACCESS_LOG=0 turns it off)

    @classmethod
    def from_env(cls, env: Env) -> LogSettings:
        return cls(
            level=env.text("LOG_LEVEL", "info"),
            format=env.text("LOG_FORMAT", "json"),
            access=env.flag("ACCESS_LOG", True),
        )


@dataclass(frozen=True)
class StoreSettings:
    """Where the warehouse is: a ClickHouse server's DSN, else chDB in the data folder."""

    data_dir: Path = Path("footfall-data")
    warehouse_dsn: str = ""  # empty: chdb://<data_dir>/chdb
    backup_dir: Path | None = None  # FOOTFALL_BACKUP_DIR; None: footfall-backups beside the data folder

    @property
    def embedded(self) -> bool:
        return not self.warehouse_dsn

    @property
    def backups(self) -> Path:
        """The only folder `footfall backup` writes into (footfall.shared.backup), absolute."""
        folder = self.backup_dir if self.backup_dir is not None else self.data_dir.parent / "footfall-backups"
        return folder.resolve()

    @property
    def dsn(self) -> str:
        if self.warehouse_dsn:
            return self.warehouse_dsn
        return f"chdb://{(self.data_dir / 'chdb').resolve()}"

    def make_data_dir(self) -> Path:
        """Create the data folder as 0700, or tighten an existing one to 0700, so that nothing
        below it (chDB files, the bootstrap credentials) is readable by other users."""
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.data_dir.stat().st_mode & 0o077:
            os.chmod(self.data_dir, 0o700)
        return self.data_dir

    @classmethod
    def from_env(cls, env: Env, data_dir: Path | None = None) -> StoreSettings:
        return cls(
            data_dir=data_dir if data_dir is not None else Path(env.text("DATA_DIR", "footfall-data")),
            warehouse_dsn=env.text("WAREHOUSE_DSN"),
            backup_dir=Path(env.text("BACKUP_DIR")) if env.text("BACKUP_DIR") else None,
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
    # the per-project rolling one-minute ingest budget (services/gateway/ratelimit.py); 0: none
    rate_events_per_second: int = 30_000
    rate_bytes_per_minute: int = 2 * 1024**3

    @classmethod
    def from_env(cls, env: Env) -> ImportLimits:
        rates = {
            name: env.integer(name, default)
            for name, default in (
                ("IMPORT_RATE_EVENTS_PER_SECOND", cls.rate_events_per_second),
                ("IMPORT_RATE_BYTES_PER_MINUTE", cls.rate_bytes_per_minute),
            )
        }
        for name, value in rates.items():
            if value < 0:
                raise ConfigError(f"{PREFIX}{name} must be 0 (no limit) or more, got {value}")
        return cls(
            max_events_per_request=env.integer("IMPORT_MAX_EVENTS", cls.max_events_per_request),
            max_request_bytes=env.integer("IMPORT_MAX_BYTES", cls.max_request_bytes),
            rate_events_per_second=rates["IMPORT_RATE_EVENTS_PER_SECOND"],
            rate_bytes_per_minute=rates["IMPORT_RATE_BYTES_PER_MINUTE"],
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


REGIONS = ("us", "eu", "in")


@dataclass(frozen=True)
class RegionSettings:
    """The deployment's data-residency region (semantics-2 §15) and, optionally, the base URL
    of every region's deployment, so that a refusal can name the host to use instead."""

    region: str = "us"
    urls: Mapping[str, str] = field(default_factory=dict)

    def url_of(self, region: str) -> str | None:
        return self.urls.get(region)

    @classmethod
    def from_env(cls, env: Env) -> RegionSettings:
        region = env.text("REGION", "us").strip().lower() or "us"
        if region not in REGIONS:
            raise ConfigError(f"{PREFIX}REGION must be one of {', '.join(REGIONS)}, got {region!r}")
        raw = env.text("REGION_URLS").strip()
        urls: dict[str, str] = {}
        if raw:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise ConfigError(f"{PREFIX}REGION_URLS must be a JSON object (region -> base URL)") from None
            if not isinstance(value, dict):
                raise ConfigError(f"{PREFIX}REGION_URLS must be a JSON object (region -> base URL)")
            for key, url in value.items():
                if key not in REGIONS:
                    raise ConfigError(f"{PREFIX}REGION_URLS: unknown region {key!r} (one of {', '.join(REGIONS)})")
                parts = urlsplit(url) if isinstance(url, str) else None
                if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                    raise ConfigError(f"{PREFIX}REGION_URLS: the URL of {key!r} must be an http(s) URL")
                urls[key] = url.rstrip("/")
        return cls(region, urls)


# The interface's common properties that reports filter and break down by: the default
# properties the SDKs and the geo lookup set, and the campaign source.
DEFAULT_HOT_PROPERTIES: tuple[str, ...] = (
    "$browser",
    "$os",
    "$device",
    "$city",
    "$region",
    "mp_country_code",
    "$current_url",
    "$referring_domain",
    "utm_source",
)
MAX_HOT_PROPERTIES = 64


@dataclass(frozen=True)
class HotSettings:
    """The event properties with a materialised column (`footfall.shared.schema.hot`).

    FOOTFALL_HOT_PROPERTIES: unset, the defaults; a comma list, exactly those; a list
    starting with `+`, the defaults and those; empty or `none`, no hot columns.

    FOOTFALL_HOT_AUTO (default 0: off): how many more properties the query processes may
    make hot by themselves (`footfall.shared.schema.hot_auto`): every FOOTFALL_HOT_AUTO_SECONDS
    (600), the event properties that reports read from the JSON text at least
    FOOTFALL_HOT_AUTO_READS times (20) in that time, most read first."""

    names: tuple[str, ...] = DEFAULT_HOT_PROPERTIES
    auto: int = 0
    auto_reads: int = 20
    auto_seconds: float = 600.0

    @classmethod
    def from_env(cls, env: Env) -> HotSettings:
        auto = env.integer("HOT_AUTO", 0)
        if not 0 <= auto <= MAX_HOT_PROPERTIES:
            raise ConfigError(f"{PREFIX}HOT_AUTO is a number of properties from 0 to {MAX_HOT_PROPERTIES}")
        reads, seconds = env.integer("HOT_AUTO_READS", 20), env.number("HOT_AUTO_SECONDS", 600.0)
        if reads < 1 or seconds < 1:
            raise ConfigError(f"{PREFIX}HOT_AUTO_READS and {PREFIX}HOT_AUTO_SECONDS are at least 1")
        return cls(cls._names(env), auto, reads, seconds)

    @staticmethod
    def _names(env: Env) -> tuple[str, ...]:
        if PREFIX + "HOT_PROPERTIES" not in env.values:
            return DEFAULT_HOT_PROPERTIES
        raw = env.text("HOT_PROPERTIES").strip()
        if raw.lower() in ("", "none"):
            return ()
        base: tuple[str, ...] = ()
        if raw.startswith("+"):
            base, raw = DEFAULT_HOT_PROPERTIES, raw[1:]
        names = [n.strip() for n in raw.split(",") if n.strip()]
        for name in names:
            if len(name) > 255 or any(ord(c) < 32 or ord(c) == 127 for c in name):
                raise ConfigError(f"{PREFIX}HOT_PROPERTIES: {name[:40]!r} is not a property name")
        merged = tuple(dict.fromkeys((*base, *names)))
        if len(merged) > MAX_HOT_PROPERTIES:
            raise ConfigError(f"{PREFIX}HOT_PROPERTIES names at most {MAX_HOT_PROPERTIES} properties")
        return merged
