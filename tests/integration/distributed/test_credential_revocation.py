"""Revocation and rotation reach a separate `footfall gateway` within 10 s (issue 12).

`footfall serve` with Kafka owns the store and the management API; a management change
reloads its directory and publishes the snapshot at once; the gateway follows the directory
topic. Measured: seconds from the management answer to the gateway's first changed answer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import httpx
import orjson
import pytest

from tests.distributed import SA_SECRET, SA_USER, TOKEN, Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(180)]

LIMIT_SECONDS = 10.0


def _import(base: str, auth: tuple[str, str], params: dict[str, str] | None = None) -> int:
    event = {
        "event": "E",
        "properties": {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": uuid.uuid4().hex},
    }
    r = httpx.post(
        base + "/import",
        params={"strict": "1", **(params or {})},
        content=orjson.dumps([event]),
        headers={"content-type": "application/json"},
        auth=auth,
        timeout=10,
    )
    return r.status_code


def _until(predicate: Callable[[], bool], limit: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit + 5:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"not within {limit + 5} s")


def test_gateway_follows_delete_and_rotation_within_ten_seconds(cluster: Cluster) -> None:
    serve = cluster.serve()
    gateway = cluster.gateway()
    owner = (SA_USER, SA_SECRET)
    assert _import(gateway.base, (TOKEN, "")) == 200
    created = httpx.post(
        serve.base + "/api/app/organizations/1/service-accounts",
        json={"username": "importer", "projects": [{"id": 1, "role": "admin"}]},
        auth=owner,
        timeout=30,
    )
    assert created.status_code == 201, created.text
    bot = ("importer", created.json()["results"]["token"])
    appeared = _until(lambda: _import(gateway.base, bot, {"project_id": "1"}) == 200, LIMIT_SECONDS)

    deleted = httpx.delete(
        f"{serve.base}/api/app/organizations/1/service-accounts/{created.json()['results']['id']}",
        auth=owner,
        timeout=30,
    )
    assert deleted.status_code == 200 and deleted.json() == {"status": "ok"}
    revoked = _until(lambda: _import(gateway.base, bot, {"project_id": "1"}) == 401, LIMIT_SECONDS)

    rotated = httpx.post(serve.base + "/api/app/projects/1/rotate-token", auth=owner, timeout=30)
    assert rotated.status_code == 200, rotated.text
    new_token = rotated.json()["results"]["token"]
    old_refused = _until(lambda: _import(gateway.base, (TOKEN, "")) == 401, LIMIT_SECONDS)
    assert _import(gateway.base, (new_token, "")) == 200
    print(f"gateway propagation: create {appeared:.2f}s, delete {revoked:.2f}s, rotate-token {old_refused:.2f}s")
    assert max(appeared, revoked, old_refused) < LIMIT_SECONDS
