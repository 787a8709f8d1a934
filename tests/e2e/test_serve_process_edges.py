"""`footfall serve` as a new user meets it: a missing GeoIP database is a warning, every
request is an `access` log line, a second serve on the same data folder and a serve on a
taken port each fail with one line, before anything is created."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.distributed import FOOTFALL, REPO, free_port, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def env_for(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")}
    env.update({"FOOTFALL_DATA_DIR": str(data), "FOOTFALL_LOG_FORMAT": "json", **extra})
    return env


def run_once(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FOOTFALL, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_serve_edges(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*FOOTFALL, "serve", "--port", str(port)],
            cwd=REPO,
            env=env_for(data, FOOTFALL_GEOIP_DB=str(tmp_path / "missing.mmdb")),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, 60, what="serve healthy")
        text = log_path.read_text()
        assert '"geoip_disabled"' in text and "missing.mmdb" in text and "Traceback" not in text
        httpx.get(f"http://127.0.0.1:{port}/api/2.0/events/names?api_secret=wrong", timeout=10)
        wait_for(lambda: '"path": "/api/2.0/events/names"' in log_path.read_text(), 5, what="its access line")
        assert "api_secret" not in log_path.read_text()

        # A second serve on the same data folder: one line, exit 1.
        second = run_once(["serve", "--port", str(free_port())], env_for(data))
        assert second.returncode == 1
        assert second.stderr.strip().count("\n") == 0, second.stderr
        assert "in use by another Footfall process" in second.stderr and "Traceback" not in second.stderr

        # A serve on the taken port (fresh folder): one line, and nothing created.
        other = tmp_path / "other"
        third = run_once(["serve", "--port", str(port)], env_for(other))
        assert third.returncode == 1
        assert third.stderr.strip() == f"footfall: cannot listen on 127.0.0.1:{port}: address already in use"
        assert not other.exists(), "credentials (or a store) were created before the port was checked"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
