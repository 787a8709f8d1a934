"""`footfall serve` as a real subprocess on a free port, restartable on the same data."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]

CREDS = {
    "FOOTFALL_BOOTSTRAP_TOKEN": "e2e-token-0123456789abcdef",
    "FOOTFALL_BOOTSTRAP_SECRET": "e2e-project-secret",
    "FOOTFALL_BOOTSTRAP_SA_USERNAME": "e2e-sa",
    "FOOTFALL_BOOTSTRAP_SA_SECRET": "e2e-sa-secret",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeProcess:
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.port = free_port()
        self.log_path = self.data_dir.parent / f"serve-{self.port}.log"
        env = {**os.environ, **CREDS, "FOOTFALL_LOG_FORMAT": "json", **self.env}
        env.pop("FOOTFALL_KAFKA_BOOTSTRAP", None)  # embedded path unless a test asks otherwise
        env.pop("FOOTFALL_REDIS_URL", None)
        env.update(self.env)
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "footfall.services.cli",
                "serve",
                "--port",
                str(self.port),
                "--data",
                str(self.data_dir),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"footfall serve exited early:\n{self.log()}")
            try:
                if httpx.get(self.base + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"footfall serve did not become healthy:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[ServeProcess]:
    server = ServeProcess(tmp_path / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()
