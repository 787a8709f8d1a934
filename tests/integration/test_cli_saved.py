"""`footfall funnels …` and `footfall bookmarks …` against a real (chDB) data folder.

Each command is a subprocess, as an operator runs it: chDB opens one folder per process,
and the test process may hold another one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.warehouse

REPO = Path(__file__).resolve().parents[2]
SETUP = """
import sys
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import open_warehouse
from footfall.shared.metadata import MetadataRepository
w = open_warehouse(sys.argv[1])
apply_migrations(w)
MetadataRepository(w).create_project("CLI", "UTC", project_id=3)
w.close()
"""


def run(data: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FOOTFALL_LOG_LEVEL": "warning"}
    return subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", *args, "--data", str(data)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    subprocess.run(
        [sys.executable, "-c", SETUP, f"chdb://{folder / 'chdb'}"],
        cwd=REPO,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return folder


@pytest.mark.slow
def test_funnels_lifecycle(data: Path, tmp_path: Path) -> None:
    created = ok(
        run(
            data,
            "funnels",
            "create",
            "--project",
            "3",
            "--name",
            "Signup",
            "--step",
            "Sign Up",
            "--step",
            "Purchase",
            "--length",
            "2",
            "--length-unit",
            "hour",
        )
    )
    fid = created["funnel_id"]
    assert created["steps"] == [{"event": "Sign Up"}, {"event": "Purchase"}]
    assert (created["length"], created["length_unit"]) == (2, "hour")

    definition = tmp_path / "funnel.json"
    definition.write_text(
        json.dumps(
            {
                "name": "Custom",
                "steps": [
                    {"event": "App Open"},
                    {
                        "custom_event": {"id": 5, "name": "Any view", "events": ["View Item", "page view"]},
                        "selector": 'properties["plan"] == "pro"',
                    },
                ],
            }
        )
    )
    custom = ok(run(data, "funnels", "create", "--project", "3", "--definition", f"@{definition}"))
    assert custom["steps"][1]["event"] == "$custom_event:5" and (custom["length"], custom["length_unit"]) == (7, "day")

    listed = ok(run(data, "funnels", "list", "--project", "3"))
    assert [f["name"] for f in listed] == ["Signup", "Custom"]

    renamed = ok(run(data, "funnels", "update", str(fid), "--project", "3", "--name", "Renamed"))
    assert renamed["name"] == "Renamed" and renamed["steps"] == created["steps"]
    assert ok(run(data, "funnels", "show", str(fid), "--project", "3"))["name"] == "Renamed"

    bad = run(
        data,
        "funnels",
        "update",
        str(fid),
        "--project",
        "3",
        "--definition",
        '{"steps": [{"event": "A", "selector": "properties[\\"x\\"] =="}]}',
    )
    assert bad.returncode == 1 and "steps[0].selector: syntax error at position" in bad.stderr
    assert ok(run(data, "funnels", "show", str(fid), "--project", "3"))["steps"] == created["steps"]

    assert ok(run(data, "funnels", "delete", str(fid), "--project", "3")) == {"status": "ok", "deleted": fid}
    gone = run(data, "funnels", "show", str(fid), "--project", "3")
    assert gone.returncode == 1 and "not found" in gone.stderr


def test_bookmarks_lifecycle(data: Path) -> None:
    created = ok(
        run(
            data,
            "bookmarks",
            "create",
            "--project",
            "3",
            "--name",
            "Logins",
            "--params",
            "-",
            stdin='{"events": ["Logged in"], "unit": "week", "last_days": 28}',
        )
    )
    bid = created["id"]
    assert created["params"]["last_days"] == 28
    updated = ok(
        run(
            data,
            "bookmarks",
            "update",
            str(bid),
            "--project",
            "3",
            "--params",
            '{"events": ["A", "B"], "from_date": "2024-01-01", "to_date": "2024-01-31"}',
        )
    )
    assert updated["params"]["from_date"] == "2024-01-01" and "last_days" not in updated["params"]
    assert [b["id"] for b in ok(run(data, "bookmarks", "list", "--project", "3"))] == [bid]
    assert run(data, "bookmarks", "delete", str(bid), "--project", "3").returncode == 0
    assert ok(run(data, "bookmarks", "list", "--project", "3")) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["funnels", "list", "--project", "99"], "project 99 does not exist"),
        (["funnels", "show", "--project", "3"], "needs the id"),
        (["funnels", "create", "--project", "3", "--name", "x"], "steps"),
        (["bookmarks", "create", "--project", "3", "--name", "x", "--params", "{not json"], "invalid JSON"),
    ],
    ids=["unknown-project", "missing-id", "no-steps", "bad-json"],
)
def test_cli_errors(data: Path, args: list[str], message: str) -> None:
    result = run(data, *args)
    assert result.returncode == 1 and message in result.stderr
