"""`footfall.testing`: the pytest plugin's `footfall` fixture and the testcontainers class.

* The plugin is registered through the `pytest11` entry point (no conftest here defines
  `footfall`: this module's tests get it from the installed plugin).
* The README's example, written into a fresh folder (no conftest, no ini file), passes under
  a separate pytest: that is how a user of the package meets the fixture.
* The fixture's server takes every credential it announces: the token (mixpanel-python's
  `track`), the service account (`/import`) and the project secret (`/api/2.0/export`), and its
  data lives under pytest's temporary folder.
* `FootfallContainer` passes the same check where a Docker engine answers (building the image
  from `deploy/Dockerfile` when it is missing); it is skipped, with the reason, otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel import Consumer, Mixpanel

from footfall.testing import FootfallInstance

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
README_EXAMPLE = """
import httpx
from mixpanel import Consumer, Mixpanel

def test_signup_is_tracked(footfall):
    Mixpanel(footfall.token, consumer=Consumer(events_url=footfall.url + "/track")).track("u1", "Signed up")
    export = httpx.get(footfall.url + "/api/2.0/export", params={"project_id": 1, "from_date": "2020-01-01",
                       "to_date": "2099-12-31"}, auth=footfall.auth)
    assert '"Signed up"' in export.text
"""


def exercise(instance: FootfallInstance) -> None:
    """Events in with the token and with the service account, back out with the project secret."""
    run = uuid.uuid4().hex[:8]
    Mixpanel(instance.token, consumer=Consumer(events_url=instance.url + "/track")).track("u1", "Tracked", {"run": run})
    now = int(datetime.now(UTC).timestamp())
    batch = [
        {"event": "Imported", "properties": {"distinct_id": f"u{i}", "time": now, "$insert_id": f"{run}-{i}"}}
        for i in range(3)
    ]
    answer = httpx.post(
        instance.url + "/import",
        params={"project_id": instance.project_id, "strict": 1},
        content=orjson.dumps(batch),
        headers={"Content-Type": "application/json"},
        auth=instance.auth,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["num_records_imported"] == 3
    today = datetime.now(UTC).date().isoformat()
    export = httpx.get(
        instance.url + "/api/2.0/export",
        params={"project_id": instance.project_id, "from_date": "2020-01-01", "to_date": today},
        auth=(instance.secret, ""),
        timeout=30,
    )
    assert export.status_code == 200, export.text
    rows: list[dict[str, Any]] = [orjson.loads(line) for line in export.content.splitlines() if line.strip()]
    mine = sorted(
        (r["event"], r["properties"]["distinct_id"])
        for r in rows
        if r["properties"].get("run") == run or str(r["properties"].get("$insert_id", "")).startswith(run)
    )
    assert mine == [("Imported", "u0"), ("Imported", "u1"), ("Imported", "u2"), ("Tracked", "u1")]


def test_plugin_is_a_pytest11_entry_point(pytestconfig: pytest.Config) -> None:
    registered = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert registered.get("footfall") == "footfall.testing.plugin"
    assert pytestconfig.pluginmanager.has_plugin("footfall")


def test_footfall_fixture_serves_its_credentials(footfall: FootfallInstance, tmp_path_factory: Any) -> None:
    assert footfall.url.startswith("http://127.0.0.1:")
    assert footfall.data_dir is not None
    assert footfall.data_dir.is_relative_to(tmp_path_factory.getbasetemp())
    exercise(footfall)
    wrong = httpx.get(footfall.url + "/api/2.0/events/names", params={"project_id": 1}, auth=("nobody", "x"))
    assert wrong.status_code == 401


def test_readme_example_passes_in_a_fresh_project(tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(README_EXAMPLE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-4000:] + run.stderr[-4000:]


def _docker_or_skip() -> Any:
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as error:  # any failure means "no engine answers"
        pytest.skip(f"no Docker engine answers ({type(error).__name__}); FootfallContainer is tested where one does")
    return client


@pytest.mark.docker
def test_container_class_has_the_fixture_shape() -> None:
    client = _docker_or_skip()
    from footfall.testing.container import DEFAULT_IMAGE, FootfallContainer

    try:
        client.images.get(DEFAULT_IMAGE)
    except Exception:  # docker.errors.ImageNotFound
        client.images.build(path=str(REPO), dockerfile="deploy/Dockerfile", tag=DEFAULT_IMAGE, rm=True)
    with FootfallContainer(DEFAULT_IMAGE) as container:
        instance = container.instance()
        assert instance.url.startswith("http://")
        exercise(instance)
