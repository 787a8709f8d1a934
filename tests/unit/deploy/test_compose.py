"""docker-compose.yml and deploy/Dockerfile agree with the code (no Docker engine here to
run them): every Footfall service's command parses with the real CLI, every variable it
sets is one the code reads, and published ports match the ports the commands listen on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from footfall.services.cli import COMMANDS, build_parser
from footfall.services.standalone.settings import ServeSettings
from footfall.shared.config import PREFIX

REPO = Path(__file__).resolve().parents[3]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
FOOTFALL = {name: svc for name, svc in SERVICES.items() if svc.get("image") == "footfall:local"}


class RecordingEnv(dict):  # type: ignore[type-arg]
    """Records every variable name the settings ask for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return default


def variables_read_by_code() -> set[str]:
    env = RecordingEnv()
    ServeSettings.from_env(env)  # composes every service's settings
    return env.asked


def test_every_expected_service_is_defined() -> None:
    assert {"kafka", "redis", "clickhouse", "gateway", "worker", "query"} <= set(SERVICES)
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:")
    assert set(FOOTFALL) == {"init", "gateway", "worker", "query"}
    assert FOOTFALL["init"]["command"] == ["directory", "publish"]
    assert FOOTFALL["gateway"]["depends_on"]["init"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("name", sorted(FOOTFALL), ids=sorted(FOOTFALL))
def test_command_parses_with_the_cli(name: str) -> None:
    command = FOOTFALL[name]["command"]
    assert command[0] in COMMANDS
    args = build_parser().parse_args(command)
    assert args.command == command[0]
    if name != "init":
        assert args.command == name
        assert args.host == "0.0.0.0"  # noqa: S104 - compose publishes the container port


@pytest.mark.parametrize("name", sorted(FOOTFALL), ids=sorted(FOOTFALL))
def test_environment_uses_only_known_footfall_variables(name: str) -> None:
    known = variables_read_by_code()
    env = FOOTFALL[name]["environment"]
    assert env, "every Footfall service is configured through FOOTFALL_* variables"
    for key in env:
        assert key.startswith(PREFIX), key
        assert key in known, f"{name} sets {key}, which the code never reads"


@pytest.mark.parametrize("name", sorted(FOOTFALL), ids=sorted(FOOTFALL))
def test_published_ports_match_the_listening_port(name: str) -> None:
    svc = FOOTFALL[name]
    args = build_parser().parse_args(svc["command"])
    for mapping in svc.get("ports", []):
        assert hasattr(args, "port"), name
        container_port = int(str(mapping).rsplit(":", 1)[1])
        assert container_port == args.port


def test_each_service_reaches_what_it_needs() -> None:
    gateway_env = FOOTFALL["gateway"]["environment"]
    assert "FOOTFALL_WAREHOUSE_DSN" not in gateway_env, "the gateway never talks to ClickHouse"
    assert gateway_env["FOOTFALL_KAFKA_BOOTSTRAP"] == "kafka:9092"
    worker_env = FOOTFALL["worker"]["environment"]
    assert worker_env["FOOTFALL_WAREHOUSE_DSN"].startswith("http://")
    assert worker_env["FOOTFALL_REDIS_URL"].startswith("redis://redis:")
    assert FOOTFALL["query"]["environment"]["FOOTFALL_WAREHOUSE_DSN"].startswith("http://")
    for name, svc in FOOTFALL.items():
        assert set(svc["depends_on"]) <= set(SERVICES), name


def test_kafka_advertises_the_address_the_services_use() -> None:
    env = SERVICES["kafka"]["environment"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]


def test_dockerfile_runs_the_cli() -> None:
    lines = (REPO / "deploy" / "Dockerfile").read_text().splitlines()
    entry = next(line for line in lines if line.startswith("ENTRYPOINT"))
    cmd = next(line for line in lines if line.startswith("CMD"))
    assert yaml.safe_load(entry.split(" ", 1)[1]) == ["footfall"]
    args = build_parser().parse_args(yaml.safe_load(cmd.split(" ", 1)[1]))
    assert args.command == "serve"
    assert any(line.startswith("RUN pip install .") for line in lines)


def test_every_long_running_footfall_service_has_a_healthcheck_on_its_port() -> None:
    for name, svc in FOOTFALL.items():
        if name == "init":
            continue  # one-shot
        port = build_parser().parse_args(svc["command"]).port
        probe = " ".join(svc["healthcheck"]["test"])
        assert f"127.0.0.1:{port}/healthz" in probe, name


def test_query_waits_for_init_and_the_worker_metrics_port_is_published() -> None:
    assert FOOTFALL["query"]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert any(str(m).endswith(":9100") for m in FOOTFALL["worker"]["ports"])


def test_no_password_is_written_in_the_compose_file() -> None:
    """Passwords are ${VARIABLES} from .env, and .env.example names every one of them."""
    example = (REPO / ".env.example").read_text()
    defined = {line.split("=", 1)[0] for line in example.splitlines() if "=" in line and not line.startswith("#")}
    required: set[str] = set()
    for name, svc in SERVICES.items():
        for key, value in (svc.get("environment") or {}).items():
            text = str(value)
            if "PASSWORD" in key or ("://" in text and "@" in text):
                assert "${" in text, f"{name}.{key} holds a literal credential"
                required |= {part.split("}")[0].split(":")[0] for part in text.split("${")[1:]}
    assert "CLICKHOUSE_PASSWORD" in required
    assert required <= defined, f".env.example lacks {required - defined}"


def test_geoip_is_optional() -> None:
    """The database is not in the repository: the folder compose mounts says where it goes."""
    assert (REPO / "deploy" / "geoip" / "README.md").exists()
    assert FOOTFALL["worker"]["environment"]["FOOTFALL_GEOIP_DB"] == "/geoip/city.mmdb"
