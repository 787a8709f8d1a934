"""What the management commands read (`footfall projects|service-accounts|funnels|bookmarks|
directory`): the store, first-start credentials and, for `directory publish`, Kafka; and what
`footfall cohorts` (a client of the running server's HTTP API) reads: its address and credentials."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from footfall.shared.config import BootstrapSettings, Env, KafkaSettings, LogSettings, RegionSettings, StoreSettings

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class ManagementSettings:
    log: LogSettings = field(default_factory=LogSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    region: RegionSettings = field(default_factory=RegionSettings)  # FOOTFALL_REGION, FOOTFALL_REGION_URLS
    url: str = DEFAULT_URL  # FOOTFALL_URL: the server of `projects`/`service-accounts` over HTTP
    user: str = ""  # FOOTFALL_USER: USERNAME:SECRET of a service account; set = over HTTP

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None, *, data_dir: Path | None = None) -> ManagementSettings:
        env = Env(values)
        return cls(
            LogSettings.from_env(env),
            StoreSettings.from_env(env, data_dir),
            KafkaSettings.from_env(env),
            BootstrapSettings.from_env(env),
            RegionSettings.from_env(env),
            env.text("URL", DEFAULT_URL) or DEFAULT_URL,
            env.text("USER"),
        )


@dataclass(frozen=True)
class ClientSettings:
    """What `footfall cohorts …` reads: the running server's address and service-account
    credentials (each overridden by the command's options)."""

    log: LogSettings = field(default_factory=LogSettings)
    url: str = DEFAULT_URL
    username: str = ""
    secret: str = ""

    @classmethod
    def from_env(cls, values: Mapping[str, str] | None = None) -> ClientSettings:
        env = Env(values)
        return cls(
            LogSettings.from_env(env),
            env.text("URL", DEFAULT_URL) or DEFAULT_URL,
            env.text("SA_USERNAME"),
            env.text("SA_SECRET"),
        )
