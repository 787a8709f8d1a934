"""Settings: every FOOTFALL_* variable the code reads is documented in the README, and bad
values are refused with a message naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from footfall.shared.config import ConfigError, Settings

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
    Settings.from_env(env)
    assert env.asked, "Settings.from_env reads no variables?"
    missing = sorted(name for name in env.asked if f"`{name}`" not in README)
    assert not missing, f"undocumented in README: {missing}"


def test_defaults_match_the_interface_limits() -> None:
    settings = Settings.from_env({})
    assert settings.limits.max_events_per_request == 2000
    assert settings.limits.max_request_bytes == 2 * 1024 * 1024
    assert settings.query_rate_per_hour == 60 and settings.query_concurrency == 5
    assert settings.dsn.startswith("chdb:///") and settings.dsn.endswith("/footfall-data/chdb")


def test_values_are_read_and_bad_ones_name_the_variable() -> None:
    settings = Settings.from_env({"FOOTFALL_IMPORT_MAX_EVENTS": "10", "FOOTFALL_WAREHOUSE_DSN": "http://h:8123/db"})
    assert settings.limits.max_events_per_request == 10 and settings.dsn == "http://h:8123/db"
    with pytest.raises(ConfigError, match="FOOTFALL_QUERY_CONCURRENCY"):
        Settings.from_env({"FOOTFALL_QUERY_CONCURRENCY": "five"})
    with pytest.raises(ConfigError, match="FOOTFALL_WORKER_BATCH_SECONDS"):
        Settings.from_env({"FOOTFALL_WORKER_BATCH_SECONDS": "soon"})
