"""Management of saved funnels and reports (`services/app/saved.py`) over the in-memory store.

Auth: a service account that is a member of the path's project; every role reads, Owner
and Admin write; a project secret is not a management credential. Errors are
`{"error", "status": "error"}` with 400/401/403/404.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import Directory
from footfall.shared.saved import MemorySavedStore
from footfall.shared.web import build_starlette

SA_SECRET = "service-account-secret"


def basic(user: str, password: str = "") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


OWNER, ADMIN, ANALYST, CONSUMER, OUTSIDER = (
    basic(u, SA_SECRET) for u in ("owner-sa", "admin-sa", "analyst-sa", "consumer-sa", "outsider-sa")
)

FUNNEL = {
    "name": "Signup to purchase",
    "steps": [
        {"event": "Sign Up"},
        {"custom_event": {"id": 101, "name": "Any View", "events": ["View Item", "page view"]}},
        {"event": "Purchase", "selector": 'number(properties["price"]) > 10'},
    ],
    "length": 1,
    "length_unit": "day",
}
BOOKMARK = {
    "name": "Logins",
    "params": {
        "type": "insights",
        "events": ["Logged in"],
        "unit": "week",
        "from_date": "2024-03-04",
        "to_date": "2024-03-31",
    },
}


class Client:
    def __init__(self, app: Starlette) -> None:
        self._runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test")

    def __call__(self, method: str, url: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        return self._runner.run(self._client.request(method, url, headers=headers or OWNER, **kw))

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


@pytest.fixture
def store() -> MemorySavedStore:
    return MemorySavedStore()


@pytest.fixture
def call(directory: Directory, store: MemorySavedStore) -> Iterator[Client]:
    client = Client(
        build_starlette("management", saved_routes(Authenticator(directory), store), interfaces=[MANAGEMENT])
    )
    yield client
    client.close()


def test_funnel_crud_round_trip(call: Client) -> None:
    created = call("POST", "/api/app/projects/1/funnels", json=FUNNEL)
    assert created.status_code == 201, created.text
    record = created.json()["results"]
    fid = record["funnel_id"]
    assert record["name"] == FUNNEL["name"]
    assert record["steps"][1] == {"event": "$custom_event:101", "custom_event": FUNNEL["steps"][1]["custom_event"]}
    assert record["steps"][2]["selector"] == FUNNEL["steps"][2]["selector"]
    assert (record["length"], record["length_unit"]) == (1, "day")

    listed = call("GET", "/api/app/projects/1/funnels/").json()
    assert listed["status"] == "ok" and [f["funnel_id"] for f in listed["results"]] == [fid]
    assert call("GET", f"/api/app/projects/1/funnels/{fid}").json()["results"] == record

    patched = call("PATCH", f"/api/app/projects/1/funnels/{fid}", json={"name": "Renamed", "length": 2})
    assert patched.status_code == 200
    assert patched.json()["results"]["name"] == "Renamed"
    assert patched.json()["results"]["length"] == 2
    assert patched.json()["results"]["steps"] == record["steps"]

    put = call(
        "PUT", f"/api/app/projects/1/funnels/{fid}", json={"name": "Two", "steps": [{"event": "A"}, {"event": "B"}]}
    )
    assert put.status_code == 200
    assert put.json()["results"]["steps"] == [{"event": "A"}, {"event": "B"}]
    assert (put.json()["results"]["length"], put.json()["results"]["length_unit"]) == (7, "day")

    assert call("DELETE", f"/api/app/projects/1/funnels/{fid}").json() == {"status": "ok"}
    gone = call("GET", f"/api/app/projects/1/funnels/{fid}")
    assert gone.status_code == 404 and gone.json()["status"] == "error"
    assert call("GET", "/api/app/projects/1/funnels").json()["results"] == []


def test_bookmark_crud_round_trip(call: Client) -> None:
    created = call("POST", "/api/app/projects/1/bookmarks", json=BOOKMARK)
    assert created.status_code == 201, created.text
    record = created.json()["results"]
    assert record["params"] == {**BOOKMARK["params"], "type_of_count": "general"}
    bid = record["id"]
    patched = call(
        "PATCH", f"/api/app/projects/1/bookmarks/{bid}", json={"params": {"events": ["A", "B"], "last_days": 14}}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["results"]["params"] == {
        "type": "insights",
        "events": ["A", "B"],
        "unit": "day",
        "type_of_count": "general",
        "last_days": 14,
    }
    assert call("DELETE", f"/api/app/projects/1/bookmarks/{bid}").status_code == 200
    assert call("DELETE", f"/api/app/projects/1/bookmarks/{bid}").status_code == 404


def test_items_are_scoped_to_their_project(call: Client, store: MemorySavedStore) -> None:
    fid = call("POST", "/api/app/projects/1/funnels", json=FUNNEL).json()["results"]["funnel_id"]
    # outsider-sa owns project 2 only: project 2 sees nothing of project 1
    assert call("GET", "/api/app/projects/2/funnels", OUTSIDER).json()["results"] == []
    assert call("GET", f"/api/app/projects/2/funnels/{fid}", OUTSIDER).status_code == 404
    assert call("DELETE", f"/api/app/projects/2/funnels/{fid}", OUTSIDER).status_code == 404
    assert store.get_funnel(1, fid) is not None


@pytest.mark.parametrize(
    ("headers", "read", "write"),
    [(OWNER, 200, 201), (ADMIN, 200, 201), (ANALYST, 200, 403), (CONSUMER, 200, 403), (OUTSIDER, 403, 403)],
    ids=["owner", "admin", "analyst", "consumer", "outsider"],
)
def test_roles(call: Client, headers: dict[str, str], read: int, write: int) -> None:
    assert call("GET", "/api/app/projects/1/funnels", headers).status_code == read
    response = call("POST", "/api/app/projects/1/funnels", headers, json=FUNNEL)
    assert response.status_code == write
    if write != 201:
        assert response.json()["status"] == "error" and response.json()["error"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        basic("owner-sa", "wrong"),
        basic("nobody", SA_SECRET),
        basic("project-1-secret-value", ""),
        {"Authorization": "Bearer abc"},
    ],
    ids=["none", "bad-secret", "unknown-user", "project-secret", "bearer"],
)
def test_bad_credentials_are_401(directory: Directory, headers: dict[str, str]) -> None:
    client = Client(
        build_starlette(
            "management", saved_routes(Authenticator(directory), MemorySavedStore()), interfaces=[MANAGEMENT]
        )
    )
    try:
        response = client._runner.run(client._client.get("/api/app/projects/1/bookmarks", headers=headers))
    finally:
        client.close()
    assert response.status_code == 401
    assert response.json()["status"] == "error"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "x"}, "steps"),
        ({"name": "", "steps": [{"event": "A"}]}, "name"),
        ({"name": "x", "steps": []}, "steps"),
        (
            {"name": "x", "steps": [{"event": "A", "selector": 'properties["a" == 1'}]},
            "steps[0].selector: syntax error at position",
        ),
        (
            {"name": "x", "steps": [{"event": "A", "selector": "nosuch(1)"}]},
            "steps[0].selector: invalid expression at position 0",
        ),
        ({"name": "x", "steps": [{"event": "A"}], "length": 91, "length_unit": "day"}, "90 days"),
        ({"name": "x", "steps": [{"event": "A"}], "length": 0}, "length"),
        ({"name": "x", "steps": [{"event": "A"}], "length_unit": "week"}, "length_unit"),
        ({"name": "x", "steps": [{"custom_event": {"id": 1, "name": "c", "events": []}}]}, "custom_event.events"),
        ({"name": "x", "steps": [{"event": "A", "extra": 1}]}, "unknown member 'extra'"),
        ({"name": "x", "steps": [{"event": "A"}] * 33}, "steps"),
    ],
    ids=[
        "no-steps",
        "empty-name",
        "zero-steps",
        "selector-syntax",
        "selector-function",
        "window-over-90-days",
        "zero-length",
        "bad-unit",
        "empty-custom-event",
        "unknown-member",
        "too-many-steps",
    ],
)
def test_invalid_funnel_is_400(call: Client, body: dict[str, Any], message: str) -> None:
    response = call("POST", "/api/app/projects/1/funnels", json=body)
    assert response.status_code == 400
    assert response.json()["status"] == "error"
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"events": ["A"]}, "either from_date and to_date, or last_days"),
        ({"events": ["A"], "last_days": 7, "from_date": "2024-01-01", "to_date": "2024-01-02"}, "either"),
        ({"events": [], "last_days": 7}, "params.events"),
        ({"events": ["A"], "from_date": "2024-02-01", "to_date": "2024-01-01"}, "params.to_date"),
        ({"events": ["A"], "from_date": "2024-02-30", "to_date": "2024-03-01"}, "params.from_date"),
        ({"events": ["A"], "last_days": 7, "unit": "year"}, "params.unit"),
        ({"events": ["A"], "last_days": 7, "type_of_count": "sum"}, "params.type_of_count"),
        ({"events": ["A"], "last_days": 7, "where": "1 +"}, "params.where: syntax error"),
        ({"events": ["A"], "last_days": 7, "type": "funnels"}, "params.type"),
    ],
    ids=[
        "no-dates",
        "both-dates",
        "no-events",
        "reversed",
        "bad-date",
        "bad-unit",
        "bad-count",
        "bad-where",
        "bad-type",
    ],
)
def test_invalid_bookmark_is_400(call: Client, params: dict[str, Any], message: str) -> None:
    response = call("POST", "/api/app/projects/1/bookmarks", json={"name": "b", "params": params})
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b""], ids=["garbage", "array", "empty"])
def test_non_object_body_is_400(call: Client, content: bytes) -> None:
    response = call("POST", "/api/app/projects/1/funnels", content=content)
    assert response.status_code == 400
    assert response.json() == {"error": "the request body must be a JSON object", "status": "error"}


def test_patch_revalidates_and_unknown_ids_are_404(call: Client) -> None:
    record = call("POST", "/api/app/projects/1/funnels", json=FUNNEL).json()["results"]
    fid = record["funnel_id"]
    bad = call("PATCH", f"/api/app/projects/1/funnels/{fid}", json={"steps": [{"event": "A", "selector": ")"}]})
    assert bad.status_code == 400
    assert call("GET", f"/api/app/projects/1/funnels/{fid}").json()["results"] == record
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        response = call(method, "/api/app/projects/1/funnels/999", json=FUNNEL)
        assert response.status_code == 404, method


def test_ids_are_not_reused_after_delete(call: Client) -> None:
    first = call("POST", "/api/app/projects/1/funnels", json=FUNNEL).json()["results"]["funnel_id"]
    call("DELETE", f"/api/app/projects/1/funnels/{first}")
    second = call("POST", "/api/app/projects/1/funnels", json=FUNNEL).json()["results"]["funnel_id"]
    assert second > first
