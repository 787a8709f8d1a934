"""`footfall projects create` / `service-accounts create`: the printed credentials work
against `footfall serve`, scoped to their project."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import orjson
import pytest

from tests.e2e.conftest import REPO, ServeProcess

pytestmark = pytest.mark.e2e


def footfall(data: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", *args, "--data", str(data)],
        cwd=REPO,
        capture_output=True,
        timeout=120,
    )


def created(data: Path, *args: str) -> dict[str, Any]:
    done = footfall(data, *args)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return orjson.loads(done.stdout)


@pytest.mark.slow
def test_new_project_and_service_account_work_and_stay_scoped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServeProcess(data)
    server.start()  # bootstraps project 1
    server.stop()
    web = created(data, "projects", "create", "--name", "Web", "--timezone", "Europe/Berlin")
    assert web["project_id"] == 2 and web["timezone"] == "Europe/Berlin"
    admin = created(data, "service-accounts", "create", "--project", "2", "--role", "admin")
    analyst = created(data, "service-accounts", "create", "--project", "2", "--role", "analyst")
    listed = created(data, "projects", "list")
    assert [p["name"] for p in listed] == ["Default", "Web"]
    refused = footfall(data, "service-accounts", "create", "--project", "9")
    assert refused.returncode == 1 and b"project 9 does not exist" in refused.stderr

    server.start()
    try:
        event = {
            "event": "E",
            "properties": {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": uuid.uuid4().hex},
        }
        body = orjson.dumps([event])
        headers = {"Content-Type": "application/json"}
        r = httpx.post(server.base + "/import?strict=1", content=body, headers=headers, auth=(web["project_token"], ""))
        assert r.status_code == 200
        r = httpx.post(
            server.base + "/import?strict=1&project_id=2",
            content=body,
            headers=headers,
            auth=(admin["username"], admin["secret"]),
        )
        assert r.status_code == 200
        r = httpx.post(
            server.base + "/import?strict=1&project_id=2",
            content=body,
            headers=headers,
            auth=(analyst["username"], analyst["secret"]),
        )
        assert r.status_code == 403  # analysts may query, not import
        r = httpx.post(
            server.base + "/import?strict=1&project_id=1",
            content=body,
            headers=headers,
            auth=(admin["username"], admin["secret"]),
        )
        assert r.status_code == 403  # not a member of project 1
        # Export dates are the project's days: Berlin's today (UTC's date is yesterday there
        # between 23:00 and 24:00 UTC, when the event would fall outside the range).
        today = datetime.now(ZoneInfo("Europe/Berlin")).date().isoformat()
        export = httpx.get(
            server.base + "/api/2.0/export",
            params={"from_date": "2020-01-01", "to_date": today},
            auth=(web["project_secret"], ""),
        )
        assert [orjson.loads(line)["event"] for line in export.content.splitlines()] == ["E"]
    finally:
        server.stop()
