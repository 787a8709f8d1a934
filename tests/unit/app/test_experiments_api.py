"""The experiments API (`services/app/experiments`, semantics-2.md §16) over the in-memory store.

Contract: every route and role, the §16.3 lifecycle with its `invalid_state` errors, validation
errors naming the member, the record's fields (§16.4), soft delete, archive, and the frozen caches
at conclusion (the results come from a stand-in that counts its calls; the SQL is checked against
the oracle in tests/integration/app/).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from footfall.services.app.experiments import MemoryExperimentStore, experiment_routes
from footfall.services.app.experiments.results import Analysis, VariantSums
from footfall.services.app.saved import MANAGEMENT
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import Directory
from footfall.shared.web import build_starlette

SA_SECRET = "service-account-secret"


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{SA_SECRET}".encode()).decode()}


OWNER, ADMIN, ANALYST, CONSUMER, OUTSIDER = (
    basic(u) for u in ("owner-sa", "admin-sa", "analyst-sa", "consumer-sa", "outsider-sa")
)
BASE = "/api/app/workspaces/1/experiments"
VARIANTS = [{"key": "control", "is_control": True}, {"key": "b"}]
METRICS = [{"event": "Purchase"}, {"id": "rev", "type": "total", "event": "Purchase", "kind": "secondary"}]
FIELDS = {
    "id", "name", "content_type", "description", "created", "creator_id", "creator_name", "creator_email",
    "modified", "deleted", "is_favorited", "pinned_date", "tags", "last_modified_by_id", "last_modified_by_name",
    "can_view", "can_update_basic", "can_update_restricted", "can_update_visibility",
    "is_superadmin", "allow_staff_override", "can_share", "is_shared_with_project", "hypothesis", "status",
    "variants", "metrics", "settings", "exposures_cache", "results_cache", "start_date", "end_date", "feature_flag",
}  # fmt: skip


class Client:
    def __init__(self, directory: Directory, calls: list[Analysis]) -> None:
        async def results(analysis: Analysis) -> dict[str, VariantSums]:
            calls.append(analysis)
            n = len(calls)  # every computation gives other numbers: a recomputation is visible
            return {k: VariantSums(10 * n, tuple((n, n, n) for _ in analysis.metrics)) for k in analysis.variants}

        routes = experiment_routes(Authenticator(directory), MemoryExperimentStore(), results)
        app = build_starlette("management", routes, interfaces=[MANAGEMENT])
        self._runner = asyncio.Runner()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://footfall.test"
        )

    def __call__(self, method: str, url: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        response = self._runner.run(self._client.request(method, url, headers=headers or OWNER, **kw))
        assert response.status_code < 500, response.text
        return response

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


@pytest.fixture
def calls() -> list[Analysis]:
    return []


@pytest.fixture
def call(directory: Directory, calls: list[Analysis]) -> Iterator[Client]:
    client = Client(directory, calls)
    yield client
    client.close()


def create(call: Client, **body: Any) -> dict[str, Any]:
    response = call("POST", BASE, json={"name": "Checkout", "variants": VARIANTS, "metrics": METRICS, **body})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()["results"]
    return result


def error(response: httpx.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "error" and body["type"] == kind, body
    assert "x-footfall-error-type" not in response.headers
    message: str = body["error"]
    return message


def test_create_answers_the_record_with_every_field(call: Client) -> None:
    e = create(call, description="d", tags=["t", "t"])
    assert set(e) == FIELDS
    assert uuid.UUID(e["id"]) and e["status"] == "draft" and e["content_type"] == "experiment"
    assert e["start_date"] is None and e["end_date"] is None and e["deleted"] is None
    assert e["creator_id"] == 1 and e["creator_name"] == "owner-sa" and e["tags"] == ["t"]
    assert e["variants"][1] == {"key": "b", "is_control": False, "split": 0.5, "value": None, "description": None}
    assert [m["id"] for m in e["metrics"]] == ["m1", "rev"]
    assert e["settings"]["exposure_event"] == "$experiment_started"
    assert e["settings"]["experiment_name"] == "Checkout" and e["settings"]["confidence"] == 0.95
    assert e["exposures_cache"] == {} and e["results_cache"] == {}
    assert call("GET", f"{BASE}/{e['id']}").json()["results"]["id"] == e["id"]
    # the alias is the same resource
    assert call("GET", f"/api/app/projects/1/experiments/{e['id']}").json()["results"]["name"] == "Checkout"


def test_lifecycle_draft_active_concluded_decided_and_back(call: Client, calls: list[Analysis]) -> None:
    e = create(call)
    url = f"{BASE}/{e['id']}"
    assert "cannot force conclude an experiment in state draft" in error(
        call("PUT", url + "/force_conclude", json={}), 400, "invalid_state"
    )
    error(call("PATCH", url + "/decide", json={"success": True}), 400, "invalid_state")
    launched = call("PUT", url + "/launch").json()["results"]
    assert launched["status"] == "active" and launched["start_date"] is not None
    assert launched["exposures_cache"]["total"] == 20 and len(calls) == 1
    call("GET", url)
    assert len(calls) == 1  # active caches are kept (at most 60 s per version)
    error(call("PUT", url + "/launch"), 400, "invalid_state")
    error(call("PUT", url + "/force_conclude", json={"end_date": "2000-01-01"}), 400, "validation_error")

    concluded = call("PUT", url + "/force_conclude", json={"end_date": "2099-01-01T00:00:00Z"}).json()["results"]
    assert concluded["status"] == "concluded" and concluded["end_date"] == "2099-01-01T00:00:00Z"
    frozen = concluded["results_cache"]
    assert frozen["model"] == "frequentist" and [m["id"] for m in frozen["metrics"]] == ["m1", "rev"]
    computed = len(calls)
    assert call("GET", url).json()["results"]["results_cache"] == frozen and len(calls) == computed
    # conclude again (POST accepted): idempotent, a new end date replaces the old, results recomputed
    again = call("POST", url + "/force_conclude", json={"end_date": "2098-06-01"}).json()["results"]
    assert again["end_date"] == "2098-06-01T23:59:59Z" and len(calls) == computed + 1

    decided = call("PATCH", url + "/decide", json={"success": True, "variant": "b", "message": "ship"})
    d = decided.json()["results"]
    assert d["status"] == "success" and d["settings"]["decision"]["variant"] == "b"
    error(call("PATCH", url + "/decide", json={"success": False}), 400, "invalid_state")
    error(call("PUT", url + "/force_conclude", json={}), 400, "invalid_state")
    undone = call("PATCH", url, json={"status": "concluded"}).json()["results"]
    assert undone["status"] == "concluded" and "decision" not in undone["settings"]
    failed = call("PATCH", url + "/decide", json={"success": False}).json()["results"]
    assert failed["status"] == "fail"
    # a change of the analysis reopens a decided experiment and recomputes its frozen results
    before = len(calls)
    reopened = call("PATCH", url, json={"settings": {"confidence": 0.9}}).json()["results"]
    assert reopened["status"] == "concluded" and len(calls) == before + 1
    assert "decision" not in reopened["settings"] and reopened["settings"]["confidence"] == 0.9
    message = error(call("PATCH", url, json={"status": "active"}), 400, "invalid_state")
    assert message == "cannot set status 'active' on an experiment in state concluded"


def test_validation_errors_name_the_member(call: Client) -> None:
    cases = [
        ({"name": ""}, "name"),
        ({"name": "x" * 256}, "name"),
        ({"name": "n", "variants": [{"key": "a"}, {"key": "b"}]}, "variants"),
        ({"name": "n", "variants": [{"key": "a", "is_control": True}, {"key": "a"}]}, "variants[1].key"),
        ({"name": "n", "metrics": [{"event": "e", "type": "sum"}]}, "metrics[0].type"),
        ({"name": "n", "metrics": [{"event": "e", "selector": 'properties["x" =='}]}, "metrics[0].selector"),
        ({"name": "n", "settings": {"confidence": 2}}, "settings.confidence"),
        ({"name": "n", "colour": "red"}, "colour"),
        ({"description": "no name"}, "name"),
    ]
    for body, member in cases:
        assert error(call("POST", BASE, json=body), 400, "validation_error").startswith(member), body
    error(call("POST", BASE, content=b"[1]"), 400, "validation_error")
    draft = create(call, variants=[{"key": "only", "is_control": True}])
    assert "two variants" in error(call("PUT", f"{BASE}/{draft['id']}/launch"), 400, "validation_error")
    e = create(call)
    url = f"{BASE}/{e['id']}"
    error(call("PATCH", url, json={"start_date": "2024-02-01", "end_date": "2024-01-01"}), 400, "validation_error")
    error(call("PATCH", url, json={"end_date": "tomorrow"}), 400, "validation_error")
    error(call("PATCH", url + "/decide", json={"success": "yes"}), 400, "validation_error")
    call("PUT", url + "/launch")
    call("PUT", url + "/force_conclude", json={})
    error(call("PATCH", url + "/decide", json={"success": True, "variant": "z"}), 400, "validation_error")
    error(call("PATCH", url, json={"end_date": None}), 400, "validation_error")


def test_not_found_archive_and_soft_delete(call: Client) -> None:
    error(call("GET", f"{BASE}/{uuid.uuid4()}"), 404, "not_found")
    error(call("GET", "/api/app/workspaces/99/experiments"), 404, "not_found")
    e = create(call)
    url = f"{BASE}/{e['id']}"
    assert call("POST", url + "/archive").json() == {"status": "ok", "results": {}}
    assert call("GET", BASE).json()["results"] == []
    assert [x["id"] for x in call("GET", BASE, params={"include_archived": "true"}).json()["results"]] == [e["id"]]
    assert call("DELETE", url + "/archive").json()["results"]["id"] == e["id"]
    assert len(call("GET", BASE).json()["results"]) == 1
    assert call("DELETE", url).json() == {"status": "ok", "results": {}}
    error(call("GET", url), 404, "not_found")
    error(call("DELETE", url), 404, "not_found")
    assert call("GET", BASE, params={"include_archived": "true"}).json()["results"] == []


@pytest.mark.parametrize(
    ("headers", "read", "write", "delete"),
    [(OWNER, 200, 201, 200), (ADMIN, 200, 201, 200), (ANALYST, 200, 201, 403), (CONSUMER, 200, 403, 403)],
    ids=["owner", "admin", "analyst", "consumer"],
)
def test_roles(call: Client, headers: dict[str, str], read: int, write: int, delete: int) -> None:
    e = create(call)
    url = f"{BASE}/{e['id']}"
    got = call("GET", url, headers=headers)
    assert got.status_code == read
    may_write = write == 201
    assert got.json()["results"]["can_update_basic"] is may_write
    assert call("POST", BASE, headers=headers, json={"name": "x"}).status_code == write
    for method, path, body in (("PATCH", url, {"description": "x"}), ("PUT", url + "/launch", None)):
        assert call(method, path, headers=headers, json=body).status_code == (200 if may_write else 403)
    response = call("DELETE", url, headers=headers)
    assert response.status_code == delete
    if delete == 403:
        assert set(response.json()) == {"error", "status"}  # 401/403 keep the plain shape


def test_outsiders_and_secrets_are_refused(call: Client) -> None:
    assert call("GET", BASE, headers=OUTSIDER).status_code == 403
    assert call("GET", BASE, headers={"Authorization": "Basic bm9ib2R5Ong="}).status_code == 401
    assert call("GET", BASE, headers={"Authorization": ""}).status_code == 401
    assert call("GET", "/api/app/workspaces/abc/experiments").status_code == 404


def test_the_project_has_one_workspace(call: Client) -> None:
    listed = call("GET", "/api/app/projects/1/workspaces/public", headers=CONSUMER).json()["results"]
    assert [(w["id"], w["project_id"], w["is_global"]) for w in listed] == [(1, 1, True)]
    assert call("GET", "/api/app/workspaces/1").json()["results"] == listed[0]
    error(call("GET", "/api/app/workspaces/7"), 404, "not_found")
    assert call("GET", "/api/app/projects/2/workspaces", headers=CONSUMER).status_code == 403
