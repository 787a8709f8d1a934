"""`footfall serve` as a child process for a test: a free port, a temporary data folder, fixed
credentials, the embedded store (no Kafka, no Redis), stopped with the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Credentials", "FootfallInstance", "FootfallStartError", "run_footfall"]

# the settings that would send an embedded test server to shared infrastructure
DISTRIBUTED = ("FOOTFALL_KAFKA_BOOTSTRAP", "FOOTFALL_REDIS_URL", "FOOTFALL_WAREHOUSE_DSN")
START_ATTEMPTS = 3
SERVE = (sys.executable, "-m", "footfall.services.cli", "serve")


class FootfallStartError(RuntimeError):
    """The server did not become healthy; the message ends with its log."""


@dataclass(frozen=True)
class Credentials:
    """Project 1's credentials, fixed at the server's first start (`FOOTFALL_BOOTSTRAP_*`)."""

    # fixed on purpose: a test server's credentials are known to its tests
    token: str = "footfall-test-token-0123456789abcdef"  # noqa: S105
    secret: str = "footfall-test-project-secret"  # noqa: S105
    service_account: str = "footfall-test-sa"
    service_account_secret: str = "footfall-test-sa-secret"  # noqa: S105

    def env(self) -> dict[str, str]:
        return {
            "FOOTFALL_BOOTSTRAP_TOKEN": self.token,
            "FOOTFALL_BOOTSTRAP_SECRET": self.secret,
            "FOOTFALL_BOOTSTRAP_SA_USERNAME": self.service_account,
            "FOOTFALL_BOOTSTRAP_SA_SECRET": self.service_account_secret,
        }


@dataclass(frozen=True)
class FootfallInstance:
    """A running Footfall: its base URL and project 1's credentials."""

    url: str
    credentials: Credentials = field(default_factory=Credentials)
    project_id: int = 1
    data_dir: Path | None = None

    @property
    def host(self) -> str:
        """`host:port` of the server."""
        return self.url.split("://", 1)[1]

    @property
    def token(self) -> str:
        return self.credentials.token

    @property
    def secret(self) -> str:
        return self.credentials.secret

    @property
    def auth(self) -> tuple[str, str]:
        """HTTP basic credentials of the service account (an Owner of project 1)."""
        return (self.credentials.service_account, self.credentials.service_account_secret)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def process_alive(process: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: process.poll() is None


def wait_healthy(url: str, timeout: float, alive: Callable[[], bool] | None = None) -> bool:
    """Polls `url/healthz` until it answers 200 or `timeout` seconds pass (or `alive()` is false)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            return False
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as response:  # noqa: S310 - http://host:port
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


@contextmanager
def run_footfall(
    data_dir: Path,
    *,
    credentials: Credentials | None = None,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 90.0,
) -> Iterator[FootfallInstance]:
    """Starts `footfall serve` on a free port of `host` with its data in `data_dir` (created),
    yields it once `/healthz` answers, and stops it (SIGTERM, then SIGKILL after 30 s).
    `env` adds settings (`FOOTFALL_*`) to the server's environment."""
    credentials = credentials or Credentials()
    data_dir.mkdir(parents=True, exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED}
    child_env.update(credentials.env())
    child_env.update(env or {})
    failure, exited = "", False
    for _ in range(START_ATTEMPTS):  # another process may take the free port before the server does
        port = free_port(host)
        log_path = data_dir.parent / f"footfall-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
                [*SERVE, "--host", host, "--port", str(port), "--data", str(data_dir)],
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://{host}:{port}"
        try:
            if wait_healthy(url, timeout, alive=process_alive(process)):
                yield FootfallInstance(url, credentials, 1, data_dir)
                return
            exited = process.poll() is not None
            failure = log_path.read_text(errors="replace")[-4000:]
        finally:
            _stop(process)
        if not exited or "in use" not in failure:
            break  # not a lost race for the port: starting again would fail the same way
    raise FootfallStartError(f"footfall serve did not become healthy in {data_dir}:\n{failure}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
