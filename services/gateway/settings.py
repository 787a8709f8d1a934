"""What `footfall gateway` reads from its environment: logging, Kafka, the import limits, the
trusted proxies (`FOOTFALL_TRUSTED_PROXIES`, see `addresses.py`) and Redis
(`FOOTFALL_REDIS_URL`: the import rate limit's shared window, see `ratelimit.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from footfall.services.gateway.addresses import Network, parse_networks
from footfall.shared.config import PREFIX, ConfigError, Env, ImportLimits, KafkaSettings, LogSettings, RegionSettings


@dataclass(frozen=True)
class GatewaySettings:
    log: LogSettings = field(default_factory=LogSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    limits: ImportLimits = field(default_factory=ImportLimits)
    trusted_proxies: tuple[Network, ...] = ()  # peers whose X-Forwarded-For is believed
    region: RegionSettings = field(default_factory=RegionSettings)  # projects of another region: 403
    redis_url: str = ""  # the import rate limit's window, shared by every gateway
    # FOOTFALL_IMPORT_FAST_PATH (default on): `serve` stores plain /import batches through the Rust
    # fast path (`footfall.shared.events.fast_import`) where it is installed; 0 turns it off.
    import_fast_path: bool = True

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None) -> GatewaySettings:
        env = Env(values)
        try:
            trusted_proxies = parse_networks(env.text("TRUSTED_PROXIES"))
        except ValueError as exc:
            raise ConfigError(f"{PREFIX}TRUSTED_PROXIES: {exc}") from None
        return cls(
            LogSettings.from_env(env),
            KafkaSettings.from_env(env),
            ImportLimits.from_env(env),
            trusted_proxies=trusted_proxies,
            redis_url=env.text("REDIS_URL"),
            import_fast_path=env.flag("IMPORT_FAST_PATH", True),
        )
