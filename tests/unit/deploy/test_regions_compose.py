"""deploy/regions/docker-compose.yml (two regional stacks) agrees with the code: the commands
parse with the real CLI, every variable is one the code reads and accepts, each stack has its
own region and volume, and the published ports differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from footfall.services.cli import build_parser
from footfall.services.standalone.settings import ServeSettings
from footfall.shared.config import ConfigError, Env, RegionSettings

REPO = Path(__file__).resolve().parents[3]
SERVICES: dict[str, Any] = yaml.safe_load((REPO / "deploy/regions/docker-compose.yml").read_text())["services"]


class RecordingEnv(dict):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return default


def test_two_stacks_of_different_regions_with_their_own_data() -> None:
    known = RecordingEnv()
    ServeSettings.from_env(known)
    regions, volumes, ports = set(), set(), set()
    for svc in SERVICES.values():
        args = build_parser().parse_args(svc["command"])
        assert args.command == "serve" and args.data == Path("/data")
        env = {k: str(v) for k, v in svc["environment"].items()}
        assert set(env) <= known.asked
        settings = ServeSettings.from_env(env)
        assert settings.management.region.url_of("eu") == "https://eu.example.com"
        regions.add(settings.management.region.region)
        volumes.add(svc["volumes"][0].split(":")[0])
        ports.add(svc["ports"][0].split(":")[0])
    assert regions == {"us", "eu"} and len(volumes) == 2 and len(ports) == 2
    assert RegionSettings().region == "us"


def test_bad_region_settings_are_refused_with_the_variable_named() -> None:
    bad = [
        {"FOOTFALL_REGION": "mars"},
        {"FOOTFALL_REGION_URLS": "[1]"},
        {"FOOTFALL_REGION_URLS": "{not json"},
        {"FOOTFALL_REGION_URLS": '{"xx": "https://x.example"}'},
        {"FOOTFALL_REGION_URLS": '{"eu": "ftp://x.example"}'},
    ]
    for values in bad:
        with pytest.raises(ConfigError, match="FOOTFALL_REGION"):
            RegionSettings.from_env(Env(values))
    ok = RegionSettings.from_env(Env({"FOOTFALL_REGION": "EU", "FOOTFALL_REGION_URLS": '{"in": "https://in.x/"}'}))
    assert ok.region == "eu" and ok.url_of("in") == "https://in.x" and ok.url_of("us") is None
