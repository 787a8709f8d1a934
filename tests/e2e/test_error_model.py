"""One error model through `footfall serve`: every interface answers its own body shape, for
its own errors and for unknown routes, wrong methods and oversized bodies; a wrong
service-account secret never stalls the event loop for other requests."""

from __future__ import annotations

import concurrent.futures
import statistics
import time

import httpx
import pytest

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = [pytest.mark.e2e]

SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
SECRET = (CREDS["FOOTFALL_BOOTSTRAP_SECRET"], "")


def query_shape(r: httpx.Response, status: int, path: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"request", "error"} and body["request"].startswith(path), body
    return str(body["error"])


def management_shape(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "status"} and body["status"] == "error", body
    return str(body["error"])


def ingestion_shape(r: httpx.Response, status: int, status_text: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"code", "error", "status"} and (body["code"], body["status"]) == (status, status_text)
    return str(body["error"])


def test_each_interface_answers_in_its_own_shape(serve_process: ServeProcess) -> None:
    base = serve_process.base
    # query interface: its own errors, unknown routes and wrong methods
    assert "from_date" in query_shape(
        httpx.get(base + "/api/2.0/segmentation", params={"event": "x"}, auth=SECRET), 400, "/api/2.0/segmentation"
    )
    query_shape(httpx.get(base + "/api/2.0/segmentation", params={"event": "x"}), 401, "/api/2.0/segmentation")
    query_shape(httpx.get(base + "/api/2.0/no-such-report", auth=SECRET), 404, "/api/2.0/no-such-report")
    query_shape(httpx.delete(base + "/api/query/segmentation", auth=SECRET), 405, "/api/query/segmentation")
    form = {"content-type": "application/x-www-form-urlencoded"}
    oversized = httpx.post(base + "/api/2.0/segmentation", content=b"a" * (2 << 20), headers=form, auth=SECRET)
    query_shape(oversized, 413, "/api/2.0/segmentation")

    # management interface
    funnels = base + "/api/app/projects/1/funnels"
    assert "JSON object" in management_shape(httpx.post(funnels, content=b"[1]", auth=SA), 400)
    management_shape(httpx.get(funnels, auth=SECRET), 401)  # not a service account
    management_shape(httpx.get(funnels + "/999", auth=SA), 404)
    management_shape(httpx.get(base + "/api/app/projects/1/nothing-here", auth=SA), 404)
    management_shape(httpx.put(funnels, json={}, auth=SA), 405)
    big = b'{"name": "' + b"x" * (300 * 1024) + b'"}'
    assert "larger than" in management_shape(httpx.post(funnels, content=big, auth=SA), 413)

    # ingestion interface: JSON errors, and the legacy form mode's own answers
    ingestion_shape(httpx.post(base + "/import", json=[], auth=("nope", "")), 401, "Unauthorized")
    ingestion_shape(httpx.delete(base + "/import"), 405, "Method Not Allowed")
    assert "POST" in ingestion_shape(httpx.get(base + "/import"), 405, "Method Not Allowed")  # no credentials
    token = (CREDS["FOOTFALL_BOOTSTRAP_TOKEN"], "")
    oversized = httpx.post(
        base + "/import", content=b" " * (3 << 20), headers={"content-type": "application/json"}, auth=token
    )
    ingestion_shape(oversized, 413, "Request Entity Too Large")
    no_type = httpx.post(base + "/import", content=b"[]", auth=token)
    assert "Content-Type" in ingestion_shape(no_type, 415, "Unsupported Media Type")
    ingestion_shape(httpx.post(base + "/import/nested/path"), 404, "Not Found")
    legacy = httpx.post(base + "/import", data={"data": "[]", "verbose": "1"}, auth=("nope", ""))
    assert (legacy.status_code, legacy.json()) == (401, {"status": 0, "error": "Invalid credentials"})

    # anything else: the plain shape
    management_shape(httpx.get(base + "/no/such/route"), 404)


def _healthz_ms(base: str, n: int) -> list[float]:
    samples = []
    with httpx.Client(base_url=base, timeout=10) as client:
        for _ in range(n):
            started = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            samples.append((time.perf_counter() - started) * 1000)
            time.sleep(0.02)
    return samples


def test_wrong_service_account_secrets_do_not_stall_other_requests(serve_process: ServeProcess) -> None:
    """Four clients sending wrong secrets (first each costs a scrypt, then the throttle refuses
    without one): /healthz keeps answering at its idle pace. Before the checks ran off the
    loop, the same load put its median at 415 ms."""
    base = serve_process.base
    idle = statistics.median(_healthz_ms(base, 20))
    stop = time.monotonic() + 4.0
    statuses: list[int] = []

    def attacker(k: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while time.monotonic() < stop:
                r = client.get("/api/app/projects/1/funnels", auth=(f"{SA[0]}", f"wrong-{k}"))
                statuses.append(r.status_code)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        attackers = [pool.submit(attacker, k) for k in range(4)]
        loaded = statistics.median(_healthz_ms(base, 40))
        for a in attackers:
            a.result()
    assert set(statuses) <= {401, 429} and 429 in statuses  # throttled after the first failures
    assert loaded < max(50.0, 5 * idle), (idle, loaded)
