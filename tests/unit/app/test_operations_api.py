"""`POST /api/app/backups` and `GET /api/app/status` (`services/app/backup.py`): who may call them
and the bad-input cases (a clear 4xx, nothing written, never a 500). A stand-in warehouse records
what would have run; the real backup, restore and status are checked end to end in
tests/e2e/test_backup.py."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from footfall.services.app.backup import operation_routes
from footfall.services.app.saved import MANAGEMENT
from footfall.shared import backup as backup_module
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import AccountRecord, Directory
from footfall.shared.web import build_starlette


def basic(user: str, secret: str = "service-account-secret") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


class Store:
    """The two reads the routes make of the metadata store, from the test directory."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory

    def get_service_account(self, sa_id: int) -> AccountRecord | None:
        for a in self.directory.accounts.values():
            if a.sa_id == sa_id:
                return AccountRecord(a.sa_id, a.organization_id, a.username, datetime.now(UTC), roles=dict(a.roles))
        return None

    def list_projects(self) -> list[Any]:
        return list(self.directory.projects.values())


class Warehouse:
    def __init__(self) -> None:
        self.backups: list[Path] = []

    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


@pytest.fixture
def call(directory: Directory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    warehouse = Warehouse()

    def fake_backup(_warehouse: Any, dest: Path, **_: Any) -> dict[str, Any]:
        warehouse.backups.append(dest)
        return {"path": str(dest), "schema_version": 15, "bytes": 1, "files": {"a": [1, "x"]}}

    monkeypatch.setattr("footfall.services.app.backup.take_backup", fake_backup)
    monkeypatch.setattr("footfall.services.app.backup.store_status", lambda w, r: {"projects": []})
    routes = operation_routes(Authenticator(directory), Store(directory), warehouse, tmp_path / "backups")  # type: ignore[arg-type]
    app = build_starlette("management", routes, interfaces=[MANAGEMENT])
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://t")
    (tmp_path / "backups" / "taken").mkdir(parents=True)

    def request(method: str, url: str, user: str = "owner-sa", **kw: Any) -> httpx.Response:
        headers = basic(user) if user else {}
        response = asyncio.run(client.request(method, url, headers=headers, **kw))
        assert response.status_code < 500, response.text
        return response

    request.warehouse = warehouse  # type: ignore[attr-defined]
    return request


def test_only_an_owner_may_back_up_or_read_the_status(call: Any) -> None:
    for user in ("admin-sa", "analyst-sa", "consumer-sa"):
        r = call("POST", "/api/app/backups", user, json={"path": "nightly"})
        assert r.status_code == 403 and "Owner" in r.json()["error"], r.text
        assert call("GET", "/api/app/status", user).status_code == 403
    assert call("POST", "/api/app/backups", "", json={"path": "nightly"}).status_code == 401
    assert call("GET", "/api/app/status", "owner-sa").json()["results"] == {"projects": [], "consumer_lag": None}
    r = call("POST", "/api/app/backups", "owner-sa", json={"path": "nightly"})
    assert r.status_code == 200 and r.json()["results"]["files"] == 1
    assert [p.name for p in call.warehouse.backups] == ["nightly"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"not json", 400, "JSON object"),
        (b'["nightly"]', 400, '{"path": "NAME"}'),
        (b'{"path": ""}', 400, '{"path": "NAME"}'),
        (b'{"path": "a", "more": 1}', 400, '{"path": "NAME"}'),
        (b'{"path": 7}', 400, '{"path": "NAME"}'),
        (b'{"path": "/etc/footfall"}', 400, "inside"),
        (b'{"path": "../escape"}', 400, "inside"),
        (b'{"path": "."}', 400, "inside"),
        (b'{"path": "it\'s"}', 400, "quotes"),
        (b'{"path": "taken"}', 409, "already exists"),
    ],
)
def test_a_bad_destination_is_refused_and_nothing_is_written(call: Any, body: bytes, status: int, words: str) -> None:
    r = call("POST", "/api/app/backups", content=body)
    assert r.status_code == status and words in r.json()["error"], r.text
    assert call.warehouse.backups == []


def test_the_release_schema_version_is_the_highest_migration() -> None:
    from footfall.shared.schema import migrations

    numbers = [int(p.name[1:5]) for p in Path(migrations.__file__).parent.glob("m[0-9][0-9][0-9][0-9]_*.py")]
    assert backup_module.release_schema_version() == max(numbers)
