"""Real Kafka and Redis for tests: session fixtures and fault-test helpers.

Use from ``tests/conftest.py``::

    pytest_plugins = ["tests.services"]

Fixtures (session-scoped):

- ``kafka_bootstrap`` -> ``"host:port"`` of a Kafka broker (PLAINTEXT)
- ``redis_url``       -> ``"redis://host:port/0"``

Each service is found, in this order:

1. the environment: ``FOOTFALL_KAFKA_BOOTSTRAP`` / ``FOOTFALL_REDIS_URL``
   (``make test`` sets them from ``deploy/local/services.sh start``);
2. testcontainers, where a Docker engine answers (``apache/kafka`` as a
   generic container, ``redis``); images can be overridden with
   ``FOOTFALL_TEST_KAFKA_IMAGE`` / ``FOOTFALL_TEST_REDIS_IMAGE``;
3. the local scripts ``deploy/local/kafka.sh`` / ``deploy/local/redis.sh``
   (a real Kafka from Maven jars, Debian's redis-server);
4. otherwise the tests that need it are skipped, with the reason. When the
   environment variable ``CI`` is ``true`` that is a failure instead: CI must
   never go green by skipping the tests of a required service.

What a fixture started, it stops at the end of the session; what it found
running (or was given) it leaves alone. A service that cannot be had is
tried once per session; later tests get the same skip/failure at once.

Fault-test helpers (plain functions, call them from a test that uses the
matching fixture): ``stop_kafka()``, ``start_kafka()``, ``stop_redis()``,
``start_redis()``, and the context managers ``kafka_down()`` /
``redis_down()`` that always bring the service back. The address stays the
same across a restart and Kafka keeps its data (topics, committed offsets);
Redis has no persistence, so it restarts empty. They work for the local
scripts (also when the environment names the address the scripts serve, as
in CI) and for containers; for any other address given through the
environment they skip (fail under CI=true), since these fixtures did not
start that service and cannot stop it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "kafka_bootstrap",
    "kafka_down",
    "redis_down",
    "redis_url",
    "start_kafka",
    "start_redis",
    "stop_kafka",
    "stop_redis",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_DIR = REPO_ROOT / "deploy" / "local"

KAFKA_ENV = "FOOTFALL_KAFKA_BOOTSTRAP"
REDIS_ENV = "FOOTFALL_REDIS_URL"
KAFKA_IMAGE = os.environ.get("FOOTFALL_TEST_KAFKA_IMAGE", "apache/kafka:4.4.0")
REDIS_IMAGE = os.environ.get("FOOTFALL_TEST_REDIS_IMAGE", "redis:7.4")

# Kafka: fetching jars (cold) + the script's own 90 s readiness timeout.
_SCRIPT_TIMEOUT = {"kafka": 420, "redis": 300}
_READY_TIMEOUT = {"kafka": 90.0, "redis": 30.0}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def _unavailable(reason: str) -> None:
    """Skip — or, under CI=true, fail: a required service must not be skipped."""
    if _in_ci():
        pytest.fail(f"{reason} (CI=true: a missing required service fails the run)", pytrace=False)
    pytest.skip(reason)


# --------------------------------------------------------------------------
# Readiness probes (no client library needed)
# --------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _kafka_call(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client = b"footfall-tests"
    msg = struct.pack(">hhih", api_key, version, corr, len(client)) + client + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    data = _recv_exact(sock, size)
    if struct.unpack(">i", data[:4])[0] != corr:
        raise ConnectionError("correlation id mismatch")
    return data[4:]


def kafka_metadata_ok(bootstrap: str, timeout: float = 3.0) -> bool:
    """True when a broker of ``bootstrap`` answers a Metadata request with a live broker."""
    for hostport in bootstrap.split(","):
        host, _, port = hostport.strip().rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as s:
                s.settimeout(timeout)
                r = _kafka_call(s, 18, 0, 1, b"")  # ApiVersions v0
                err, n = struct.unpack(">hi", r[:6])
                if err:
                    continue
                versions = {}
                for i in range(n):
                    k, lo, hi = struct.unpack(">hhh", r[6 + 6 * i : 12 + 6 * i])
                    versions[k] = (lo, hi)
                lo, hi = versions[3]
                v = max(lo, min(hi, 8))  # 4..8 share the non-flexible encoding
                if not 4 <= v <= 8:
                    continue
                body = struct.pack(">i?", -1, False)
                if v >= 8:
                    body += struct.pack(">??", False, False)
                r = _kafka_call(s, 3, v, 2, body)
                _throttle, brokers = struct.unpack(">ii", r[:8])
                if brokers >= 1:
                    return True
        except (OSError, ConnectionError, KeyError, struct.error, ValueError):
            continue
    return False


def redis_ping_ok(url: str, timeout: float = 2.0) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


_PROBES = {"kafka": kafka_metadata_ok, "redis": redis_ping_ok}


def _wait_ready(name: str, address: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if _PROBES[name](address):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


# --------------------------------------------------------------------------
# Providers
# --------------------------------------------------------------------------


@dataclass
class _Service:
    name: str  # "kafka" | "redis"
    address: str
    source: str  # "env" | "container" | "local"
    # True when deploy/local/<name>.sh manages this address (also for an env
    # address equal to the script's own, as under `make test`).
    scripted: bool = False
    started_here: bool = False
    container: Any = None
    stopped: bool = False
    notes: list[str] = field(default_factory=list)


_services: dict[str, _Service] = {}
_failures: dict[str, str] = {}


def _script(name: str) -> Path:
    return LOCAL_DIR / f"{name}.sh"


def _run_script(name: str, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(_script(name)), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout or _SCRIPT_TIMEOUT[name],
        check=False,
    )


def _script_address(name: str) -> str | None:
    """What ``<name>.sh env`` prints (honours FOOTFALL_LOCAL_*_PORT)."""
    if not _script(name).exists():
        return None
    try:
        out = _run_script(name, "env", timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.partition("=")[2] or None


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _docker_answers() -> bool:
    if os.environ.get("FOOTFALL_TEST_NO_DOCKER", "").lower() in ("1", "true", "yes"):
        return False
    try:
        import docker  # installed with testcontainers

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no engine, no socket, no permission: all mean "no Docker"
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _norm(address: str) -> str:
    return address.replace("localhost", "127.0.0.1").rstrip("/")


def _from_env(name: str, var: str) -> _Service | None:
    address = os.environ.get(var, "").strip()
    if not address:
        return None
    if not _wait_ready(name, address, timeout=15.0):
        raise _Unavailable(f"{var}={address} is set but {name} does not answer there")
    scripted = _norm(address) == _norm(_script_address(name) or "")
    return _Service(name, address, "env", scripted=scripted)


def _kafka_container() -> _Service:
    from testcontainers.core.container import DockerContainer

    port = _free_port()
    c = DockerContainer(KAFKA_IMAGE)
    host = "127.0.0.1"
    with contextlib.suppress(Exception):
        host = c.get_container_host_ip()
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_NUM_PARTITIONS": "4",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "true",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": "-Xms256m -Xmx512m",
    }
    for k, v in env.items():
        c = c.with_env(k, v)
    # A fixed host port: the advertised address must be known before start and
    # must survive a container stop/start in fault tests.
    c = c.with_bind_ports(9092, port)
    c.start()
    address = f"{host}:{port}"
    svc = _Service("kafka", address, "container", started_here=True, container=c)
    if not _wait_ready("kafka", address, _READY_TIMEOUT["kafka"]):
        _stop_container(svc, remove=True)
        raise _Unavailable(f"the {KAFKA_IMAGE} container did not answer on {address}")
    return svc


def _redis_container() -> _Service:
    from testcontainers.core.container import DockerContainer

    port = _free_port()
    c = DockerContainer(REDIS_IMAGE).with_bind_ports(6379, port)
    c = c.with_command('redis-server --save "" --appendonly no --maxmemory 256mb --maxmemory-policy volatile-ttl')
    c.start()
    host = c.get_container_host_ip()
    address = f"redis://{host}:{port}/0"
    svc = _Service("redis", address, "container", started_here=True, container=c)
    if not _wait_ready("redis", address, _READY_TIMEOUT["redis"]):
        _stop_container(svc, remove=True)
        raise _Unavailable(f"the {REDIS_IMAGE} container did not answer on {address}")
    return svc


def _local(name: str) -> _Service:
    script = _script(name)
    if not script.exists():
        raise _Unavailable(f"no {script}")
    address = _script_address(name)
    if not address:
        raise _Unavailable(f"{script} env printed no address")
    was_running = _run_script(name, "status", timeout=60).returncode == 0
    try:
        res = _run_script(name, "start")
    except subprocess.TimeoutExpired:
        raise _Unavailable(f"{script} start did not finish in {_SCRIPT_TIMEOUT[name]} s") from None
    if res.returncode != 0:
        raise _Unavailable(f"{script} start failed (exit {res.returncode}):\n{_tail(res.stderr)}")
    return _Service(name, address, "local", scripted=True, started_here=not was_running)


class _Unavailable(Exception):
    pass


_CONTAINERS = {"kafka": _kafka_container, "redis": _redis_container}
_ENV_VARS = {"kafka": KAFKA_ENV, "redis": REDIS_ENV}


def _resolve(name: str) -> _Service:
    """The service for this session: found once, then cached (so are failures)."""
    if name in _services:
        return _services[name]
    if name in _failures:
        _unavailable(_failures[name])
    tried: list[str] = []
    svc: _Service | None = None
    try:
        svc = _from_env(name, _ENV_VARS[name])
        if svc is None:
            tried.append(f"{_ENV_VARS[name]} not set")
            if _docker_answers():
                try:
                    svc = _CONTAINERS[name]()
                except _Unavailable:
                    raise
                except Exception as exc:  # image pull, engine errors: fall through to the scripts
                    tried.append(f"testcontainers: {type(exc).__name__}: {exc}")
            else:
                tried.append("no Docker engine answers")
        if svc is None:
            svc = _local(name)
    except _Unavailable as exc:
        tried.append(str(exc))
        _failures[name] = f"{name} unavailable: " + "; ".join(tried)
    if svc is None:  # outside the except block: no chained traceback in the report
        _unavailable(_failures[name])
    assert svc is not None
    _services[name] = svc
    return svc


def _stop_container(svc: _Service, remove: bool) -> None:
    with contextlib.suppress(Exception):
        if remove:
            svc.container.stop()
        else:
            svc.container.get_wrapped_container().stop(timeout=10)


def _cleanup(name: str) -> None:
    """End of session: stop what this module started; restart what a fault test left down."""
    svc = _services.pop(name, None)
    if svc is None:
        return
    if svc.source == "container":
        _stop_container(svc, remove=True)
    elif svc.scripted and svc.started_here:
        with contextlib.suppress(Exception):
            _run_script(name, "stop", timeout=120)
    elif svc.scripted and svc.stopped:
        # Someone else's (e.g. services.sh's) service, left down by a fault
        # test that did not restart it: bring it back as it was found.
        with contextlib.suppress(Exception):
            _run_script(name, "start")


atexit.register(lambda: [_cleanup(n) for n in list(_services)])


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address ``host:port`` of a real Kafka broker (PLAINTEXT, auto-create on)."""
    svc = _resolve("kafka")
    yield svc.address
    _cleanup("kafka")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """``redis://host:port/0`` of a real Redis (no persistence, maxmemory volatile-ttl)."""
    svc = _resolve("redis")
    yield svc.address
    _cleanup("redis")


# --------------------------------------------------------------------------
# Fault-test helpers
# --------------------------------------------------------------------------


def _controllable(name: str) -> _Service:
    svc = _resolve(name)
    if svc.source == "env" and not svc.scripted:
        _unavailable(
            f"cannot stop/start {name}: its address comes from {_ENV_VARS[name]}={svc.address}, "
            f"which deploy/local/{name}.sh does not manage"
        )
    return svc


def _stop(name: str) -> None:
    svc = _controllable(name)
    if svc.source == "container":
        _stop_container(svc, remove=False)
    else:
        res = _run_script(name, "stop", timeout=120)
        if res.returncode != 0:
            pytest.fail(f"{name}.sh stop failed:\n{_tail(res.stderr)}", pytrace=False)
    svc.stopped = True


def _start(name: str) -> str:
    svc = _controllable(name)
    if svc.source == "container":
        svc.container.get_wrapped_container().start()
        if not _wait_ready(name, svc.address, _READY_TIMEOUT[name]):
            pytest.fail(f"{name} container did not come back on {svc.address}", pytrace=False)
    else:
        res = _run_script(name, "start")
        if res.returncode != 0:
            pytest.fail(f"{name}.sh start failed:\n{_tail(res.stderr)}", pytrace=False)
    svc.stopped = False
    return svc.address


def stop_kafka() -> None:
    """Stop the session's Kafka broker (SIGTERM; data kept). Returns when it is down."""
    _stop("kafka")


def start_kafka() -> str:
    """Start the session's Kafka broker again on the same address and data; waits until ready."""
    return _start("kafka")


def stop_redis() -> None:
    """Stop the session's Redis. It has no persistence: it comes back empty."""
    _stop("redis")


def start_redis() -> str:
    """Start the session's Redis again on the same address; waits for PING."""
    return _start("redis")


@contextlib.contextmanager
def kafka_down() -> Iterator[None]:
    """``with kafka_down(): ...`` — Kafka is stopped inside the block and restarted after it, always."""
    stop_kafka()
    try:
        yield
    finally:
        start_kafka()


@contextlib.contextmanager
def redis_down() -> Iterator[None]:
    """``with redis_down(): ...`` — Redis is stopped inside the block and restarted after it, always."""
    stop_redis()
    try:
        yield
    finally:
        start_redis()
