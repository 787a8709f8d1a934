"""Settings: every FOOTFALL_* variable the code reads is documented in the README, and bad
values are refused with a message naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from footfall.services.gateway.settings import GatewaySettings
from footfall.services.query.settings import QuerySettings
from footfall.services.standalone.settings import ServeSettings
from footfall.services.worker.settings import WorkerSettings
from footfall.shared.config import ConfigError

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


class RecordingEnv(dict):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return default


def test_every_variable_is_documented_in_the_readme() -> None:
    env = RecordingEnv()
    ServeSettings.from_env(env)  # every service's settings
    assert env.asked, "ServeSettings.from_env reads no variables?"
    missing = sorted(name for name in env.asked if f"`{name}`" not in README)
    assert not missing, f"undocumented in README: {missing}"


def test_defaults_match_the_interface_limits() -> None:
    gateway = GatewaySettings.from_env({})
    assert gateway.limits.max_events_per_request == 2000
    assert gateway.limits.max_request_bytes == 2 * 1024 * 1024
    query = QuerySettings.from_env({})
    assert query.rate_per_hour == 60 and query.concurrency == 5
    assert query.store.dsn.startswith("chdb:///") and query.store.dsn.endswith("/footfall-data/chdb")


def test_values_are_read_and_bad_ones_name_the_variable() -> None:
    gateway = GatewaySettings.from_env({"FOOTFALL_IMPORT_MAX_EVENTS": "10"})
    assert gateway.limits.max_events_per_request == 10
    assert QuerySettings.from_env({"FOOTFALL_WAREHOUSE_DSN": "http://h:8123/db"}).store.dsn == "http://h:8123/db"
    with pytest.raises(ConfigError, match="FOOTFALL_QUERY_CONCURRENCY"):
        QuerySettings.from_env({"FOOTFALL_QUERY_CONCURRENCY": "five"})
    with pytest.raises(ConfigError, match="FOOTFALL_WORKER_BATCH_SECONDS"):
        WorkerSettings.from_env({"FOOTFALL_WORKER_BATCH_SECONDS": "soon"})


class _Recording(dict):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return default


def _read_by(settings_class: type) -> set[str]:
    env = _Recording()
    settings_class.from_env(env)
    return env.asked


def test_each_service_reads_only_its_own_settings() -> None:
    gateway, query, worker = _read_by(GatewaySettings), _read_by(QuerySettings), _read_by(WorkerSettings)
    assert "FOOTFALL_KAFKA_BOOTSTRAP" in gateway and "FOOTFALL_IMPORT_MAX_EVENTS" in gateway
    assert not {"FOOTFALL_QUERY_RATE_PER_HOUR", "FOOTFALL_WAREHOUSE_DSN"} & gateway
    # Redis holds the import rate limit's window that every gateway shares
    rate = {"FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND", "FOOTFALL_IMPORT_RATE_BYTES_PER_MINUTE"}
    assert {"FOOTFALL_REDIS_URL", *rate} <= gateway
    assert "FOOTFALL_QUERY_RATE_PER_HOUR" in query
    assert not {"FOOTFALL_KAFKA_BOOTSTRAP", "FOOTFALL_REDIS_URL", "FOOTFALL_IMPORT_MAX_EVENTS"} & query
    assert {"FOOTFALL_REDIS_URL", "FOOTFALL_WORKER_BATCH_SIZE", "FOOTFALL_GEOIP_DB"} <= worker
    assert not {"FOOTFALL_QUERY_RATE_PER_HOUR", "FOOTFALL_IMPORT_MAX_EVENTS"} & worker
