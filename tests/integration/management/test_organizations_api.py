"""The organizations / projects / service-accounts routes of `/api/app` (semantics-2 §17, issue 12).

Driven in-process (httpx ASGI transport) over the in-memory store and, for the flows that
write, also over the warehouse store (`MetadataRepository` on chDB). The permission matrix
is written out below from §17.3 and the README's table, independently of
`footfall.shared.permissions`.
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from footfall.services.app.operations import Management, iso
from footfall.services.app.organizations import organization_routes
from footfall.services.app.saved import MANAGEMENT
from footfall.shared import credentials
from footfall.shared.auth import Authenticator
from footfall.shared.config import RegionSettings
from footfall.shared.errors import AuthError
from footfall.shared.metadata import MemoryMetadataStore, MetadataRepository, MetadataStore, UsageRecorder
from footfall.shared.web import build_starlette

SECRET = "seeded-account-secret"
REGION = RegionSettings("us", {"eu": "https://eu.footfall.example"})


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return datetime.now(UTC).timestamp() + self.offset


@dataclass
class Deployment:
    store: MetadataStore
    auth: Authenticator
    clock: Clock
    ids: dict[str, int] = field(default_factory=dict)
    _runner: asyncio.Runner = field(default_factory=asyncio.Runner)
    _client: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        async def changed() -> None:
            self.auth.replace(await asyncio.to_thread(self.store.load_directory))

        routes = organization_routes(self.auth, Management(self.store, REGION), changed=changed)
        app = build_starlette("management", routes, interfaces=[MANAGEMENT])
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test")

    def __call__(self, method: str, url: str, who: str | dict[str, str] = "owner", **kw: Any) -> httpx.Response:
        headers = basic(who, SECRET) if isinstance(who, str) else who
        if self._client is None:
            raise AssertionError("client closed")
        return self._runner.run(self._client.request(method, url, headers=headers, **kw))

    def close(self) -> None:
        if self._client is not None:
            self._runner.run(self._client.aclose())
        self._runner.close()


def seed(store: MetadataStore) -> dict[str, int]:
    """Org 1: projects 1 Default, 2 Other, 3 Third; org 2: project 4. Accounts by name."""
    for name, org in (("Default", 1), ("Other", 1), ("Third", 1), ("Elsewhere", 2)):
        store.create_project(name, "UTC", organization_id=org, region="us")
    store.add_project_credential(1, "secret", "project-1-secret")
    ids = {}
    layout: dict[str, tuple[int, dict[int, str]]] = {
        "owner": (1, {1: "owner", 2: "owner", 3: "owner"}),
        "admin": (1, {1: "admin", 2: "admin"}),
        "analyst": (1, {1: "analyst"}),
        "consumer": (1, {1: "consumer"}),
        "nobody": (1, {}),
        "stranger": (2, {4: "owner"}),
    }
    for username, (org, roles) in layout.items():
        sa = store.create_service_account(username, SECRET, organization_id=org)
        for pid, role in roles.items():
            store.grant(sa, pid, role)
        ids[username] = sa
    return ids


def _memory() -> MetadataStore:
    return MemoryMetadataStore(hash_secret=functools.cache(credentials.hash_secret))


@pytest.fixture(params=["memory", pytest.param("warehouse", marks=pytest.mark.warehouse)])
def deployment(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    store = _memory() if request.param == "memory" else MetadataRepository(request.getfixturevalue("clean_warehouse"))
    ids = seed(store)
    clock = Clock()
    d = Deployment(store, Authenticator(store.load_directory(), clock=clock, region=REGION), clock, ids)
    yield d
    d.close()


@pytest.fixture
def memory_deployment() -> Iterator[Deployment]:
    store = _memory()
    ids = seed(store)
    clock = Clock()
    d = Deployment(store, Authenticator(store.load_directory(), clock=clock, region=REGION), clock, ids)
    yield d
    d.close()


def error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error", "status"} and body["status"] == "error"
    return str(body["error"])


# -- the permission matrix --------------------------------------------------------------------

OK = "ok"
# (method, path, body, expected status per caller: owner, admin, analyst, consumer, nobody, stranger)
# Bodies touch project 1 (owner/admin/analyst/consumer members) so that roles decide.
MATRIX: list[tuple[str, str, Any, tuple[int, ...]]] = [
    ("GET", "/api/app/me", None, (200, 200, 200, 200, 200, 200)),
    ("GET", "/api/app/organizations/1/projects", None, (200, 200, 200, 200, 200, 403)),
    ("POST", "/api/app/organizations/1/projects", {"name": "P-{who}"}, (201, 201, 403, 403, 403, 403)),
    ("GET", "/api/app/projects/1", None, (200, 200, 200, 200, 403, 403)),
    ("PATCH", "/api/app/projects/1", {"timezone": "Europe/Paris"}, (200, 200, 403, 403, 403, 403)),
    ("POST", "/api/app/projects/1/rotate-token", None, (200, 403, 403, 403, 403, 403)),
    ("GET", "/api/app/projects/1/service-accounts", None, (200, 200, 403, 403, 403, 403)),
    ("GET", "/api/app/organizations/1/service-accounts", None, (200, 200, 403, 403, 403, 403)),
    ("GET", "/api/app/organizations/1/service-accounts/{nobody}", None, (200, 200, 403, 403, 403, 403)),
    (
        "POST",
        "/api/app/organizations/1/service-accounts",
        {"username": "new-{who}", "projects": [{"id": 1, "role": "analyst"}]},
        (201, 201, 403, 403, 403, 403),
    ),
    (
        "POST",
        "/api/app/organizations/1/service-accounts/add-to-project",
        {"projects": [{"id": 1, "role": "consumer"}], "service_account_ids": ["{nobody}"]},
        (200, 200, 403, 403, 403, 403),
    ),
    (
        "POST",
        "/api/app/organizations/1/service-accounts/remove-from-project",
        {"projects": [{"id": 1, "service_account_ids": ["{nobody}"]}]},
        (200, 200, 403, 403, 403, 403),
    ),
]
CALLERS = ("owner", "admin", "analyst", "consumer", "nobody", "stranger")


def _fill(value: Any, d: Deployment, who: str) -> Any:
    if isinstance(value, str):
        if value == "{nobody}":
            return d.ids["nobody"]
        return value.replace("{who}", who).replace("{nobody}", str(d.ids["nobody"]))
    if isinstance(value, list):
        return [_fill(v, d, who) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, d, who) for k, v in value.items()}
    return value


def test_permission_matrix(memory_deployment: Deployment) -> None:
    d = memory_deployment
    for method, path, body, expected in MATRIX:
        for who, status in zip(CALLERS, expected, strict=True):
            url = _fill(path, d, who)
            r = d(method, url, who, json=_fill(body, d, who)) if body is not None else d(method, url, who)
            assert r.status_code == status, (method, url, who, r.status_code, r.text)
            if status >= 400:
                error(r, status)
            elif url != f"/api/app/organizations/1/service-accounts/{d.ids['nobody']}":
                assert r.json()["status"] == "ok"


def test_delete_rules_and_documented_failures(memory_deployment: Deployment) -> None:
    d = memory_deployment
    sa = d.ids
    base = "/api/app/organizations/1/service-accounts"
    # 401: no credentials, wrong secret, a project secret
    error(d._runner.run(d._client.delete(f"{base}/{sa['nobody']}")), 401)  # type: ignore[union-attr]
    error(d("DELETE", f"{base}/{sa['nobody']}", basic("owner", "wrong")), 401)
    error(d("DELETE", f"{base}/{sa['nobody']}", basic("project-1-secret", "")), 401)
    # 403: another organization; a role too low; an admin acting on an owner
    error(d("DELETE", f"/api/app/organizations/2/service-accounts/{sa['stranger']}"), 403)
    error(d("DELETE", f"{base}/{sa['consumer']}", "analyst"), 403)
    error(d("DELETE", f"{base}/{sa['owner']}", "admin"), 403)
    # 404: unknown id, an account of another organization, a path id that is not an integer
    error(d("DELETE", f"{base}/999"), 404)
    error(d("GET", f"{base}/{2**70}"), 404)
    error(d("DELETE", f"{base}/{sa['stranger']}"), 404)
    assert d("DELETE", f"{base}/abc").status_code == 404
    # the last owner of projects cannot delete itself; the admin can delete the analyst
    assert "without an owner" in error(d("DELETE", f"{base}/{sa['owner']}"), 400)
    r = d("DELETE", f"{base}/{sa['analyst']}", "admin")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    error(d("GET", "/api/app/me", "analyst"), 401)  # revoked at once in this process
    error(d("DELETE", f"{base}/{sa['analyst']}"), 404)  # already deleted
    assert sa["analyst"] not in {a["id"] for a in d("GET", "/api/app/projects/1/service-accounts").json()["results"]}
    # deleting oneself is allowed, whatever the role (here a consumer), and holds at once
    assert d("DELETE", f"{base}/{sa['consumer']}", "consumer").status_code == 200
    error(d("GET", "/api/app/me", "consumer"), 401)
    # a member of no project cannot delete others
    error(d("DELETE", f"{base}/{sa['admin']}", "nobody"), 403)


def test_service_account_lifecycle(deployment: Deployment) -> None:
    d = deployment
    base = "/api/app/organizations/1/service-accounts"
    body = {"username": "ci-bot", "role": "analyst", "projects": [{"id": 1}, {"id": 2, "role": "admin"}]}
    r = d("POST", base, json=body)
    assert r.status_code == 201, r.text
    created = r.json()["results"]
    # never used, no expiry: those members are left out (the schema has no null for them)
    assert set(created) == {"token", "id", "username", "creator", "created", "user"}
    assert created["creator"] == d.ids["owner"] and created["user"] == created["id"]
    bot = basic("ci-bot", created["token"])
    me = d("GET", "/api/app/me", bot).json()["results"]
    assert me == {
        "id": created["id"],
        "username": "ci-bot",
        "organization_id": 1,
        "projects": {"1": "analyst", "2": "admin"},
    }
    one = d("GET", f"{base}/{created['id']}").json()
    assert "status" not in one and one["id"] == created["id"] and one["created"].endswith("Z")
    listed = d("GET", "/api/app/projects/2/service-accounts").json()["results"]
    entry = next(a for a in listed if a["id"] == created["id"])
    assert entry["role"] == "admin" and entry["role_order"] == 2 and entry["target_type"] == "individual"
    assert entry["hasSensitiveAccess"] is False and "email" not in entry
    # bad bodies: 400, nothing created
    before = len(d("GET", base).json()["results"])
    assert "already exists" in error(d("POST", base, json={"username": "ci-bot"}), 400)
    assert "past" in error(d("POST", base, json={"username": "x1", "expires": "2001-01-01T00:00:00Z"}), 400)
    assert "project 99" in error(d("POST", base, json={"username": "x2", "projects": [{"id": 99}]}), 400)
    error(d("POST", base, json={"username": "x5", "projects": [{"id": 2**70}]}), 400)
    error(d("POST", base, json={"username": "x6", "projects": "all"}), 400)
    error(d("POST", base, json=[]), 400)
    assert "role" in error(d("POST", base, json={"username": "x3", "role": "king"}), 400)
    error(d("POST", base, json={"username": ""}), 400)
    error(d("POST", base, content=b"[1"), 400)
    # an admin cannot grant a role above its own
    error(d("POST", base, "admin", json={"username": "x4", "projects": [{"id": 1, "role": "owner"}]}), 403)
    assert len(d("GET", base).json()["results"]) == before
    # add-to-project changes an existing membership's role; remove-from-project drops it
    add = {
        "projects": [{"id": 1, "role": "consumer"}, {"id": 3, "role": "analyst"}],
        "service_account_ids": [created["id"]],
    }
    assert d("POST", f"{base}/add-to-project", json=add).json() == {"status": "ok"}
    assert d("GET", "/api/app/me", bot).json()["results"]["projects"] == {"1": "consumer", "2": "admin", "3": "analyst"}
    remove = {"projects": [{"id": 2, "service_account_ids": [created["id"]]}]}
    assert d("POST", f"{base}/remove-from-project", json=remove).json() == {"status": "ok"}
    assert d("GET", "/api/app/me", bot).json()["results"]["projects"] == {"1": "consumer", "3": "analyst"}
    error(
        d(
            "POST",
            f"{base}/add-to-project",
            json={"projects": [{"id": 1, "role": "x"}], "service_account_ids": [created["id"]]},
        ),
        400,
    )
    error(
        d(
            "POST",
            f"{base}/add-to-project",
            json={"projects": [{"id": 1, "role": "admin"}], "service_account_ids": [999]},
        ),
        400,
    )
    # the last owner cannot be demoted
    demote = {"projects": [{"id": 3, "role": "admin"}], "service_account_ids": [d.ids["owner"]]}
    assert "without an owner" in error(d("POST", f"{base}/add-to-project", json=demote), 400)
    # delete: the secret stops working at once
    assert d("DELETE", f"{base}/{created['id']}").status_code == 200
    error(d("GET", "/api/app/me", bot), 401)


def test_projects_create_rename_rotate(deployment: Deployment) -> None:
    d = deployment
    r = d("POST", "/api/app/organizations/1/projects", json={"name": "Mobile", "timezone": "Asia/Tokyo"})
    assert r.status_code == 201, r.text
    p = r.json()["results"]
    assert {k: p[k] for k in ("name", "timezone", "region")} == {
        "name": "Mobile",
        "timezone": "Asia/Tokyo",
        "region": "us",
    }
    assert len(p["token"]) == 32 and p["secret"]
    pid = p["id"]
    assert d.auth.project_for_token(p["token"]) is not None
    # the creator is its owner; the project is listed with the caller's role; no credential is shown again
    listed = d("GET", "/api/app/organizations/1/projects").json()["results"]
    assert {
        "id": pid,
        "name": "Mobile",
        "timezone": "Asia/Tokyo",
        "region": "us",
        "organization_id": 1,
        "role": "owner",
    } in listed
    assert "token" not in d("GET", f"/api/app/projects/{pid}").json()["results"]
    # duplicate names are refused (case and edge blanks ignored), also on rename
    assert "already exists" in error(d("POST", "/api/app/organizations/1/projects", json={"name": " mobile "}), 400)
    assert "already exists" in error(d("PATCH", "/api/app/projects/1", json={"name": "MOBILE"}), 400)
    error(d("POST", "/api/app/organizations/1/projects", json={"name": "X", "timezone": "Mars/Base"}), 400)
    error(d("POST", "/api/app/organizations/1/projects", json={"name": "X", "region": "eu"}), 400)
    error(d("PATCH", f"/api/app/projects/{pid}", json={"region": "eu"}), 400)
    renamed = d("PATCH", f"/api/app/projects/{pid}", json={"name": "Mobile apps"}).json()["results"]
    assert renamed["name"] == "Mobile apps" and renamed["timezone"] == "Asia/Tokyo"
    # rotation: the new value works, the old one stops at once
    new_token = d("POST", f"/api/app/projects/{pid}/rotate-token").json()["results"]["token"]
    assert new_token != p["token"]
    assert d.auth.project_for_token(p["token"]) is None and d.auth.project_for_token(new_token) is not None
    new_secret = d("POST", f"/api/app/projects/{pid}/rotate-secret").json()["results"]["secret"]
    assert d.auth.for_query(basic(new_secret, "")["Authorization"], None).project.project_id == pid
    with pytest.raises(AuthError) as refused:
        d.auth.for_query(basic(p["secret"], "")["Authorization"], None)
    assert refused.value.status == 401


def test_expiry_is_checked_on_every_request(memory_deployment: Deployment) -> None:
    d = memory_deployment
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = d("POST", "/api/app/organizations/1/service-accounts", json={"username": "temp", "expires": expires})
    created = r.json()["results"]
    assert created["expires"] == expires
    temp = basic("temp", created["token"])
    assert d("GET", "/api/app/me", temp).status_code == 200
    d.clock.offset = 3601  # no reload in between: the snapshot is the same
    assert "expired" in error(d("GET", "/api/app/me", temp), 401)


def test_a_project_of_another_region_is_refused_with_its_url(memory_deployment: Deployment) -> None:
    d = memory_deployment
    eu = d.store.create_project("EU shop", "UTC", organization_id=1, region="eu")
    d.store.add_project_credential(eu.project_id, "secret", "eu-secret")
    d.store.grant(d.ids["owner"], eu.project_id, "owner")
    d.auth.replace(d.store.load_directory())
    message = error(d("GET", f"/api/app/projects/{eu.project_id}"), 403)
    assert "region eu" in message and "https://eu.footfall.example" in message
    with pytest.raises(AuthError) as refused:
        d.auth.for_query(basic("eu-secret", "")["Authorization"], None)
    assert refused.value.status == 403 and "https://eu.footfall.example" in refused.value.message
    # credentials unknown to the deployment stay 401
    with pytest.raises(AuthError) as unknown:
        d.auth.for_query(basic("nobody-knows", "")["Authorization"], None)
    assert unknown.value.status == 401


def test_last_used_is_written_at_most_once_a_minute(memory_deployment: Deployment) -> None:
    d = memory_deployment
    now = [1_800_000_000.0]
    writes: list[dict[int, datetime]] = []

    async def write(used: Mapping[int, datetime]) -> None:
        writes.append(dict(used))
        d.store.record_usage(used)

    recorder = UsageRecorder(write, clock=lambda: now[0])
    d.auth.on_login = recorder.note
    base = "/api/app/organizations/1/service-accounts"
    assert "last_used" not in d("GET", f"{base}/{d.ids['admin']}").json()
    d("GET", "/api/app/me", "admin")
    asyncio.run(recorder.flush())
    assert d("GET", f"{base}/{d.ids['admin']}").json()["last_used"] == iso(datetime.fromtimestamp(now[0], UTC))
    now[0] += 30  # within the minute: not noted again
    d("GET", "/api/app/me", "admin")
    writes.clear()
    asyncio.run(recorder.flush())
    assert all(d.ids["admin"] not in w for w in writes)
    now[0] += 31
    d("GET", "/api/app/me", "admin")
    asyncio.run(recorder.flush())
    assert writes[-1][d.ids["admin"]] == datetime.fromtimestamp(now[0], UTC)
