"""Data-deletion API (`services/app/data_deletion.py`) over the in-memory store, with a stand-in
for the warehouse erasure: bad input is a 400 that stores nothing, owner/admin only, the task moves
PENDING → STARTED → SUCCESS (or FAILURE when the erasure fails), unknown tasks are 404, and a
restarted runner picks up the tasks left unfinished. The erasure itself is checked against the
report oracles in tests/integration/app/test_data_deletion.py."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.app.data_deletion import (
    MAX_IDS,
    DeletionRunner,
    MemoryDeletionStore,
    data_deletion_routes,
)
from footfall.services.app.saved import MANAGEMENT
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import Directory
from footfall.shared.web import build_starlette

URL = "/api/app/data-deletions/v3.0/"


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:service-account-secret".encode()).decode()}


OWNER, ADMIN, ANALYST, CONSUMER = (basic(u) for u in ("owner-sa", "admin-sa", "analyst-sa", "consumer-sa"))


class Env:
    def __init__(self, directory: Directory) -> None:
        self.erased: list[tuple[int, tuple[str, ...]]] = []
        self.fail = False
        self.store = MemoryDeletionStore()

        async def erase(project_id: int, ids: tuple[str, ...]) -> None:
            if self.fail:
                raise RuntimeError("the store refused")
            self.erased.append((project_id, ids))

        self.runner = DeletionRunner(self.store, erase, lambda: [1, 2])
        app = build_starlette(
            "management",
            data_deletion_routes(Authenticator(directory), self.store, self.runner),
            interfaces=[MANAGEMENT],
        )
        self.loop = asyncio.Runner()
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://t"
        )
        self.loop.run(self.runner.start())

    def __call__(self, method: str, url: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        response = self.loop.run(self.client.request(method, url, headers=headers or OWNER, **kw))
        assert response.status_code < 500, response.text
        return response

    def settle(self) -> None:
        self.loop.run(asyncio.sleep(0.05))

    def close(self) -> None:
        self.loop.run(self.runner.stop())
        self.loop.run(self.client.aclose())
        self.loop.close()


@pytest.fixture
def env(directory: Directory) -> Iterator[Env]:
    e = Env(directory)
    yield e
    e.close()


@pytest.mark.parametrize(
    ("body", "member"),
    [
        (b"not json", "JSON object"),
        (b"[]", "JSON object"),
        (b"{}", "distinct_ids"),
        (b'{"distinct_ids": []}', "distinct_ids"),
        (b'{"distinct_ids": "u1"}', "distinct_ids"),
        (b'{"distinct_ids": ["u1", 2]}', "distinct_ids[1]"),
        (b'{"distinct_ids": [""]}', "distinct_ids[0]"),
        (b'{"distinct_ids": ["u1"], "compliance_type": "HIPAA"}', "compliance_type"),
        (b'{"distinct_ids": ["u1"], "extra": 1}', "extra"),
        (orjson.dumps({"distinct_ids": ["x"] * (MAX_IDS + 1)}), "at most 2000"),
    ],
    ids=["not-json", "array", "missing", "empty", "string", "number", "blank", "compliance", "unknown", "too-many"],
)
def test_bad_input_is_400_and_stores_nothing(env: Env, body: bytes, member: str) -> None:
    r = env("POST", URL + "?project_id=1", content=body)
    assert r.status_code == 400 and member in r.json()["error"], r.text
    env.settle()
    assert env.store.unfinished(1) == [] and env.erased == []


def test_roles_and_credentials(env: Env) -> None:
    body = {"distinct_ids": ["u1"]}
    assert env("POST", URL + "?project_id=1", headers=ANALYST, json=body).status_code == 403
    assert env("POST", URL + "?project_id=1", headers=CONSUMER, json=body).status_code == 403
    assert env("POST", URL + "?project_id=1", headers={"Authorization": ""}, json=body).status_code == 401
    assert env("POST", URL, json=body).status_code == 400  # project_id is required
    assert env("POST", URL + "?project_id=1", headers=ADMIN, json=body).status_code == 200


def test_task_runs_to_success_or_failure(env: Env) -> None:
    r = env("POST", URL + "?project_id=1", json={"distinct_ids": ["u1", "u2", "u1"], "compliance_type": "CCPA"})
    task_id = r.json()["results"]["task_id"]
    env.settle()
    got = env("GET", f"{URL}{task_id}?project_id=1").json()
    assert got["status"] == "ok"
    results = got["results"]
    assert results["status"] == "SUCCESS" and results["distinct_ids"] == ["u1", "u2"]
    assert results["compliance_type"] == "CCPA" and results["finished"] >= results["created"]
    assert env.erased == [(1, ("u1", "u2"))]
    env.fail = True
    failed = env("POST", URL + "?project_id=1", json={"distinct_ids": ["u3"]}).json()["results"]["task_id"]
    env.settle()
    assert env("GET", f"{URL}{failed}?project_id=1").json()["results"]["status"] == "FAILURE"
    assert env("GET", f"{URL}nope?project_id=1").status_code == 404
    assert env("GET", f"{URL}{task_id}?project_id=2").status_code == 403  # not a member of project 2


def test_a_restarted_runner_resumes_unfinished_tasks(env: Env) -> None:
    env.loop.run(env.runner.stop())
    task_id = env("POST", URL + "?project_id=1", json={"distinct_ids": ["late"]}).json()["results"]["task_id"]
    env.settle()
    assert env("GET", f"{URL}{task_id}?project_id=1").json()["results"]["status"] == "PENDING"
    fresh = DeletionRunner(env.store, env.runner.erase_ids, lambda: [1, 2])
    env.loop.run(fresh.start())
    env.settle()
    assert env.store.get(1, task_id) is not None
    assert env("GET", f"{URL}{task_id}?project_id=1").json()["results"]["status"] == "SUCCESS"
    env.loop.run(fresh.stop())
