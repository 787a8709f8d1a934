"""Management of cohorts (`services/app/cohorts.py`, semantics-2.md §13.7) over the in-memory store.

Auth: a service account that is a member of the path's project; every role reads and writes; a
project secret is not a management credential. Errors are `{"error", "status": "error"}` with
400/401/403/404; the alias `/api/app/workspaces/{id}` is the same resource.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from footfall.services.app.cohorts import MAX_BODY, cohort_routes
from footfall.services.app.saved import MANAGEMENT
from footfall.shared.auth import Authenticator
from footfall.shared.cohorts import Cohort, MemoryCohortStore
from footfall.shared.metadata import Directory, Project
from footfall.shared.web import build_starlette

SA_SECRET = "service-account-secret"


def basic(user: str, password: str = "") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


OWNER, ADMIN, ANALYST, CONSUMER, OUTSIDER = (
    basic(u, SA_SECRET) for u in ("owner-sa", "admin-sa", "analyst-sa", "consumer-sa", "outsider-sa")
)
BASE = "/api/app/projects/1/cohorts"

DYNAMIC: dict[str, Any] = {
    "name": "Buyers",
    "description": "bought 3 times in 30 days",
    "is_visible": True,
    "selector": {
        "operator": "and",
        "children": [
            {"property": "behaviors", "value": "bhvr_0", "operator": ">=", "operand": 3},
            {"property": "user", "value": "plan", "operator": "==", "operand": "pro"},
        ],
    },
    "behaviors": {
        "bhvr_0": {
            "count": {"event_selector": {"event": "Purchase", "selector": None}, "type": "absolute"},
            "window": {"unit": "day", "value": 30},
        }
    },
}
STATIC: dict[str, Any] = {"name": "Imported", "distinct_ids": ["u2", "u1", "u1", ""]}


class Client:
    def __init__(self, app: Starlette) -> None:
        self._runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test")

    def __call__(self, method: str, url: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        response = self._runner.run(
            self._client.request(method, url, headers=OWNER if headers is None else headers, **kw)
        )
        assert response.status_code < 500, response.text
        return response

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


@pytest.fixture
def store() -> MemoryCohortStore:
    return MemoryCohortStore()


async def zero_counts(project: Project, cohorts: list[Cohort]) -> dict[int, int]:
    return {c.id: 0 for c in cohorts}


def app(directory: Directory, store: MemoryCohortStore, count_of: Any = zero_counts) -> Starlette:
    routes = cohort_routes(Authenticator(directory), store, count_of)
    return build_starlette("management", routes, interfaces=[MANAGEMENT])


@pytest.fixture
def call(directory: Directory, store: MemoryCohortStore) -> Iterator[Client]:
    client = Client(app(directory, store))
    yield client
    client.close()


def create(
    call: Client, body: dict[str, Any], base: str = BASE, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = call("POST", base, headers, json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()["results"]
    return result


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "error" and set(body) == {"error", "status"}
    message: str = body["error"]
    return message


def test_crud_round_trip(call: Client) -> None:
    record = create(call, DYNAMIC)
    cid = record["id"]
    assert record == {
        "id": cid,
        "project_id": 1,
        "name": "Buyers",
        "description": "bought 3 times in 30 days",
        "created": record["created"],
        "is_visible": 1,
        "count": 0,
        "data_group_id": None,
        "is_static": False,
        "selector": {
            "operator": "and",
            "children": [
                {"property": "behaviors", "value": "bhvr_0", "operator": ">=", "operand": 3},
                {"property": "user", "value": "plan", "operator": "==", "operand": "pro", "type": "string"},
            ],
        },
        "behaviors": DYNAMIC["behaviors"],
    }
    assert len(record["created"]) == 19 and record["created"][10] == " "

    assert call("GET", f"{BASE}/{cid}").json() == {"status": "ok", "results": record}
    assert call("GET", BASE + "/").json() == {"status": "ok", "results": [record]}

    patched = call("PATCH", f"{BASE}/{cid}", json={"name": "Renamed", "is_visible": 0, "count": 99})
    assert patched.status_code == 200, patched.text
    assert patched.json()["results"] == {**record, "name": "Renamed", "is_visible": 0}

    assert call("DELETE", f"{BASE}/{cid}").json() == {"status": "ok"}
    assert "not found" in error(call("GET", f"{BASE}/{cid}"), 404)
    assert call("GET", BASE).json()["results"] == []


def test_static_cohorts_and_list_omits_ids(call: Client) -> None:
    record = create(call, STATIC)
    assert record["is_static"] is True and record["distinct_ids"] == ["u1", "u2"]
    assert "selector" not in record and "behaviors" not in record
    listed = call("GET", BASE).json()["results"]
    assert listed == [{k: v for k, v in record.items() if k != "distinct_ids"}]
    cid = record["id"]
    edited = call("PATCH", f"{BASE}/{cid}", json={"add_distinct_ids": ["u3", 4], "remove_distinct_ids": ["u1"]})
    assert edited.json()["results"]["distinct_ids"] == ["4", "u2", "u3"]
    dynamic = call("PATCH", f"{BASE}/{cid}", json={"selector": 'user["plan"] == "pro"'})
    assert dynamic.json()["results"]["is_static"] is False
    assert dynamic.json()["results"]["selector"] == 'user["plan"] == "pro"'
    assert dynamic.json()["results"]["behaviors"] == {}


def test_ids_filter(call: Client) -> None:
    ids = [create(call, {**STATIC, "name": f"c{i}"})["id"] for i in range(4)]
    assert [c["id"] for c in call("GET", f"{BASE}?ids={ids[2]},{ids[0]},999").json()["results"]] == [ids[0], ids[2]]
    assert [c["id"] for c in call("GET", f"{BASE}?ids=[{ids[1]}]").json()["results"]] == [ids[1]]
    assert len(call("GET", f"{BASE}?ids=").json()["results"]) == 4
    assert error(call("GET", f"{BASE}?ids=1,x"), 400).startswith("ids:")


def test_workspace_alias(call: Client) -> None:
    record = create(call, STATIC, base="/api/app/workspaces/1/cohorts")
    assert record["project_id"] == 1
    assert call("GET", f"{BASE}/{record['id']}").json()["results"] == record
    alias = "/api/app/workspaces/1/cohorts"
    assert call("GET", f"{alias}/{record['id']}/").json()["results"] == record
    assert call("PATCH", f"{alias}/{record['id']}", json={"name": "n"}).json()["results"]["name"] == "n"
    assert call("POST", f"{alias}/bulk-delete", json={"cohort_ids": [record["id"]]}).json() == {"status": "ok"}
    assert call("GET", alias).json()["results"] == []
    assert error(call("GET", "/api/app/workspaces/2/cohorts"), 403)


def test_ids_are_unique_across_projects_and_reads_are_scoped(call: Client, store: MemoryCohortStore) -> None:
    first = create(call, STATIC)
    other = create(call, STATIC, base="/api/app/projects/2/cohorts", headers=OUTSIDER)
    assert other["id"] != first["id"] and other["project_id"] == 2
    assert [c["id"] for c in call("GET", "/api/app/projects/2/cohorts", OUTSIDER).json()["results"]] == [other["id"]]
    for method in ("GET", "PATCH", "DELETE"):
        response = call(method, f"/api/app/projects/2/cohorts/{first['id']}", OUTSIDER, json={"name": "x"})
        error(response, 404)
    # a cohort of another project cannot be referenced
    body = {"name": "ref", "selector": {"operator": "and", "children": [cohort(other["id"])]}}
    assert "unknown cohort" in error(call("POST", BASE, json=body), 400)
    assert store.get(1, first["id"]) is not None


def cohort(ref: int, operator: str = "in") -> dict[str, Any]:
    return {"property": "cohort", "value": ref, "operator": operator}


def test_references_block_deletes_and_cycles(call: Client) -> None:
    base = create(call, STATIC)["id"]
    user = create(call, {"name": "uses base", "selector": {"operator": "or", "children": [cohort(base)]}})["id"]
    user2 = create(call, {"name": "also", "selector": {"operator": "or", "children": [cohort(base, "not in")]}})["id"]
    message = error(call("DELETE", f"{BASE}/{base}"), 400)
    assert f"cohort {base} is referenced by cohort(s) {user} (uses base), {user2} (also)" in message
    message = error(call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": [base, user]}), 400)
    assert f"{user2} (also)" in message
    assert len(call("GET", BASE).json()["results"]) == 3  # all or nothing

    cycle = call("PATCH", f"{BASE}/{base}", json={"selector": {"operator": "and", "children": [cohort(user)]}})
    assert "reference cycle" in error(cycle, 400)
    itself = call("PATCH", f"{BASE}/{user}", json={"selector": {"operator": "and", "children": [cohort(user)]}})
    assert error(itself, 400).startswith("selector.children[0].value: reference cycle")

    assert call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": [base, user, user2, user]}).json() == {
        "status": "ok"
    }
    assert call("GET", BASE).json()["results"] == []


def test_bulk_update(call: Client) -> None:
    a = create(call, STATIC)["id"]
    b = create(call, {**STATIC, "name": "b"})["id"]
    done = call(
        "POST",
        f"{BASE}/bulk-update",
        json={"cohorts": [{"id": a, "name": "A", "add_distinct_ids": ["u9"]}, {"id": b, "selector": "true"}]},
    )
    assert done.json() == {"status": "ok"}
    assert call("GET", f"{BASE}/{a}").json()["results"]["distinct_ids"] == ["u1", "u2", "u9"]
    assert call("GET", f"{BASE}/{a}").json()["results"]["name"] == "A"
    assert call("GET", f"{BASE}/{b}").json()["results"]["selector"] == "true"

    # items see the items before them: a cycle across two items is caught, and nothing is written
    cycle = {
        "cohorts": [
            {"id": a, "selector": {"operator": "and", "children": [cohort(b)]}},
            {"id": b, "selector": {"operator": "and", "children": [cohort(a)]}},
        ]
    }
    assert error(call("POST", f"{BASE}/bulk-update", json=cycle), 400).startswith(
        "cohorts[1].selector: reference cycle"
    )
    assert call("GET", f"{BASE}/{a}").json()["results"]["is_static"] is True
    bad = {"cohorts": [{"id": a, "name": "fine"}, {"id": b, "behaviors": {"k": {"count": {}}}}]}
    assert error(call("POST", f"{BASE}/bulk-update", json=bad), 400).startswith("cohorts[1].behaviors.k.count")
    assert call("GET", f"{BASE}/{a}").json()["results"]["name"] == "A"
    assert "999" in error(call("POST", f"{BASE}/bulk-update", json={"cohorts": [{"id": 999, "name": "x"}]}), 404)
    assert error(call("POST", f"{BASE}/bulk-update", json={"cohorts": [{"name": "x"}]}), 400).startswith(
        "cohorts[0].id"
    )
    assert error(call("POST", f"{BASE}/bulk-update", json={"cohorts": {}}), 400).startswith("cohorts")
    assert call("POST", f"{BASE}/bulk-update", json={"cohorts": []}).json() == {"status": "ok"}


def test_bulk_delete_validation(call: Client) -> None:
    a = create(call, STATIC)["id"]
    assert error(call("POST", f"{BASE}/bulk-delete", json={}), 400).startswith("cohort_ids")
    assert error(call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": "1"}), 400).startswith("cohort_ids")
    assert error(call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": [a, True]}), 400).startswith("cohort_ids[1]")
    assert "998, 999" in error(call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": [a, 998, 999]}), 404)
    assert len(call("GET", BASE).json()["results"]) == 1
    assert call("POST", f"{BASE}/bulk-delete", json={"cohort_ids": []}).json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("body", "member"),
    [
        ({"distinct_ids": []}, "name: required"),
        ({**STATIC, "data_group_id": 4}, "data_group_id:"),
        ({**STATIC, "is_visible": "yes"}, "is_visible:"),
        ({**DYNAMIC, "selector": 'user["plan"] == "pro" and )'}, "selector: syntax error at position 26"),
        (
            {
                **DYNAMIC,
                "behaviors": {"bhvr_0": {**DYNAMIC["behaviors"]["bhvr_0"], "window": {"unit": "day", "value": 0}}},
            },
            "behaviors.bhvr_0.window.value:",
        ),
        (
            {
                **DYNAMIC,
                "selector": {"operator": "and", "children": [{"property": "user", "value": "x", "operator": "~"}]},
            },
            "selector.children[0].operator:",
        ),
        (
            {
                **DYNAMIC,
                "behaviors": {
                    "bhvr_0": {
                        **DYNAMIC["behaviors"]["bhvr_0"],
                        "count": {"event_selector": {"event": "A"}, "aggregationOperator": "sum"},
                    }
                },
            },
            "behaviors.bhvr_0.count.aggregationOperator: not supported",
        ),
        ({**STATIC, "add_distinct_ids": ["x"]}, "add_distinct_ids:"),
    ],
    ids=["no-name", "group", "visible", "selector-syntax", "window", "operator", "aggregation", "add-at-create"],
)
def test_invalid_definitions_are_400_naming_the_member(call: Client, body: dict[str, Any], member: str) -> None:
    assert error(call("POST", BASE, json=body), 400).startswith(member)
    assert call("GET", BASE).json()["results"] == []


@pytest.mark.parametrize(
    "content", [b"not json", b"[1, 2]", b"", b"{" * 2000], ids=["garbage", "array", "empty", "deep"]
)
def test_non_object_body_is_400(call: Client, content: bytes) -> None:
    assert error(call("POST", BASE, content=content), 400) == "the request body must be a JSON object"


def test_oversized_body_is_413(call: Client) -> None:
    error(call("POST", BASE, content=b"x" * (MAX_BODY + 1)), 413)


def test_patch_revalidates_the_whole_cohort(call: Client) -> None:
    record = create(call, DYNAMIC)
    cid = record["id"]
    bad = call("PATCH", f"{BASE}/{cid}", json={"behaviors": {"other": DYNAMIC["behaviors"]["bhvr_0"]}})
    assert error(bad, 400).startswith("selector.children[0].value: behaviour 'bhvr_0' is not defined")
    assert error(call("PATCH", f"{BASE}/{cid}", json={"add_distinct_ids": ["x"]}), 400).startswith("add_distinct_ids")
    assert call("GET", f"{BASE}/{cid}").json()["results"] == record
    for method in ("GET", "PATCH", "DELETE"):
        error(call(method, f"{BASE}/999", json={"name": "x"}), 404)
    error(call("GET", f"{BASE}/{2**64}"), 404)
    error(call("GET", f"{BASE}/abc"), 404)
    error(call("PUT", f"{BASE}/{cid}", json={"name": "x"}), 405)


@pytest.mark.parametrize("headers", [ANALYST, CONSUMER, ADMIN, OWNER], ids=["analyst", "consumer", "admin", "owner"])
def test_every_role_reads_and_writes(call: Client, headers: dict[str, str]) -> None:
    record = create(call, STATIC, headers=headers)
    assert call("GET", BASE, headers).status_code == 200
    assert call("PATCH", f"{BASE}/{record['id']}", headers, json={"name": "x"}).status_code == 200
    assert call("DELETE", f"{BASE}/{record['id']}", headers).status_code == 200


def test_non_members_are_403(call: Client) -> None:
    record = create(call, STATIC)
    for method, url in [
        ("GET", BASE),
        ("POST", BASE),
        ("GET", f"{BASE}/{record['id']}"),
        ("POST", f"{BASE}/bulk-delete"),
    ]:
        assert "not a member" in error(call(method, url, OUTSIDER, json={"cohort_ids": [record["id"]]}), 403)
    assert call("GET", f"{BASE}/{record['id']}").status_code == 200


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
def test_bad_credentials_are_401(call: Client, headers: dict[str, str]) -> None:
    error(call("GET", BASE, headers), 401)
    error(call("POST", BASE, headers, json=STATIC), 401)


def test_counts_come_from_the_injected_counter(directory: Directory, store: MemoryCohortStore) -> None:
    asked: list[tuple[int, list[int]]] = []

    async def count_of(project: Project, cohorts: list[Cohort]) -> dict[int, int]:
        asked.append((project.project_id, [c.id for c in cohorts]))
        return {c.id: 10 * c.id for c in cohorts}

    client = Client(app(directory, store, count_of=count_of))
    try:
        record = create(client, STATIC)
        assert record["count"] == 10 * record["id"]
        second = create(client, STATIC)
        assert [c["count"] for c in client("GET", BASE).json()["results"]] == [10 * record["id"], 10 * second["id"]]
        assert asked[-1] == (1, [record["id"], second["id"]])
    finally:
        client.close()
