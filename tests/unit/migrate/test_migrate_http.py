"""The migration service's synchronous answers (§14.1) and job reads (§14.2), in-process: the
routes over an in-memory job store, the source a mock transport that answers 404 (empty)."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.migrate.http import MIGRATE, migrate_routes
from footfall.services.migrate.model import new_job
from footfall.services.migrate.runner import Runner
from footfall.services.migrate.settings import MigrateSettings
from footfall.services.migrate.store import Cipher, MemoryJobStore
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import Directory
from footfall.shared.streams import Stream
from footfall.shared.web import build_starlette
from tests.unit.conftest import Creds

KEY = b"ZmRmZGZkZmRmZGZkZmRmZGZkZmRmZGZkZmRmZGZkZmQ="
TODAY = date(2026, 11, 26)


class NoSink:
    async def publish(self, stream: Stream[Any], items: list[Any]) -> dict[int, str]:
        raise AssertionError("nothing is published for an empty source")


class Service:
    def __init__(self, directory: Directory) -> None:
        self.store = MemoryJobStore()
        self.seen: list[httpx.Request] = []

        def answer(request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            return httpx.Response(404)

        settings = MigrateSettings(source_allowlist=frozenset({"old.example.com"}))
        self.loop = asyncio.Runner()
        self.runner = Runner(
            self.store, asyncio.to_thread, NoSink(), settings, Cipher(KEY), transport=httpx.MockTransport(answer)
        )
        routes = migrate_routes(Authenticator(directory), self.runner, today=lambda: TODAY)
        app = build_starlette("migrate", routes, interfaces=[MIGRATE])
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test")

    def call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self.loop.run(self.client.request(method, url, **kwargs))

    def settle(self) -> None:
        async def wait() -> None:
            for task in list(self.runner.tasks.values()):
                await task

        self.loop.run(wait())


@pytest.fixture
def service(directory: Directory) -> Any:
    s = Service(directory)
    yield s
    s.loop.run(s.client.aclose())
    s.loop.close()


def amplitude(creds: Creds, **over: Any) -> dict[str, Any]:
    return {"AMPLITUDE_API_KEY": "k", "AMPLITUDE_API_SECRET": "very-secret", "MIXPANEL_TOKEN": creds.token} | over


@pytest.mark.parametrize(
    ("tool", "body", "status", "names"),
    [
        ("segment", {}, 404, "segment"),
        ("amplitude", b"{not json", 400, "JSON"),
        ("amplitude", [1], 400, "JSON object"),
        ("amplitude", {"AMPLITUDE_API_KEY": None}, 400, "AMPLITUDE_API_KEY"),
        ("amplitude", {"MIXPANEL_TOKEN": None}, 400, "MIXPANEL_TOKEN"),
        ("amplitude", {"START_DATE": "2026-13-01"}, 400, "START_DATE"),
        ("amplitude", {"END_DATE": "2026-11-27"}, 400, "END_DATE"),
        ("amplitude", {"START_DATE": "2026-11-20", "END_DATE": "2026-11-10"}, 400, "START_DATE"),
        ("amplitude", {"START_DATE": "2024-01-01", "END_DATE": "2026-01-01"}, 400, "START_DATE"),
        ("amplitude", {"DRY_RUN": "maybe"}, 400, "DRY_RUN"),
        ("amplitude", {"REGION": "mars"}, 400, "REGION"),
        ("amplitude", {"REGION": "in"}, 400, "India"),
        ("amplitude", {"MIXPANEL_TOKEN": "no-such-token"}, 401, "MIXPANEL_TOKEN"),
        ("mixpanel", {"MIXPANEL_API_SECRET": "s", "SOURCE_URL": "https://evil.example.com"}, 400, "SOURCE_URL"),
        ("mixpanel", {"MIXPANEL_API_SECRET": "s", "MIXPANEL_API_KEY": "u"}, 400, "MIXPANEL_PROJECT_ID"),
        ("mixpanel", {"MIXPANEL_API_SECRET": "s", "MIXPANEL_PROJECT_ID": "x1"}, 400, "MIXPANEL_PROJECT_ID"),
    ],
)
def test_bad_requests_get_a_clear_4xx_and_start_nothing(
    service: Service, creds: Creds, tool: str, body: Any, status: int, names: str
) -> None:
    if isinstance(body, dict):
        base = amplitude(creds) if tool != "mixpanel" else {"MIXPANEL_TOKEN": creds.token}
        body = {k: v for k, v in (base | body).items() if v is not None}
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    r = service.call("POST", f"/migrate/{tool}", content=content)
    assert r.status_code == status, r.text
    answer = r.json()
    assert answer["status"] == "error" and names in answer["error"]
    assert service.store.rows == {} and service.seen == []


def test_a_job_is_accepted_read_back_per_project_and_never_shows_credentials(service: Service, creds: Creds) -> None:
    r = service.call("POST", "/migrate/amplitude", json=amplitude(creds, start_date="2026-11-20", DRY_RUN=1))
    assert r.status_code == 202, r.text
    job = r.json()["results"]
    assert (job["state"], job["project_id"], job["dry_run"], job["start_date"]) == ("queued", 1, True, "2026-11-20")
    assert job["end_date"] == TODAY.isoformat() and job["source_tool"] == "amplitude"
    service.settle()
    read = service.call("GET", f"/migrate/jobs/{job['id']}", auth=(creds.token, ""))
    assert read.status_code == 200
    done = read.json()["results"]
    assert done["state"] == "succeeded" and done["counts"]["chunks_done"] == done["counts"]["chunks_total"] == 7
    assert all(req.url.path == "/api/2/export" and req.url.host == "amplitude.com" for req in service.seen)
    assert "very-secret" not in read.text and "very-secret" not in r.text
    assert service.call("GET", f"/migrate/jobs/{job['id']}", auth=(creds.token2, "")).status_code == 404
    assert service.call("GET", f"/migrate/jobs/{job['id']}").status_code == 401
    as_analyst = service.call(
        "GET", f"/migrate/jobs/{job['id']}", params={"project_id": "1"}, auth=("analyst-sa", creds.sa_secret)
    )
    assert as_analyst.status_code == 200 and as_analyst.json()["results"]["id"] == job["id"]
    outsider = service.call(
        "GET", f"/migrate/jobs/{job['id']}", params={"project_id": "1"}, auth=("outsider-sa", creds.sa_secret)
    )
    assert outsider.status_code == 403
    assert service.call("GET", "/migrate/jobs/not-a-job", auth=(creds.secret, "")).status_code == 404
    cancelled = service.call("POST", f"/migrate/jobs/{job['id']}/cancel", auth=(creds.token, ""))
    assert cancelled.status_code == 200 and cancelled.json()["results"]["state"] == "succeeded"  # already over


def test_one_queued_or_running_job_per_project(service: Service, creds: Creds) -> None:
    now = datetime(2026, 11, 26, tzinfo=UTC)
    running = new_job(
        source_tool="amplitude",
        project_id=2,
        dry_run=False,
        region="US",
        source_region="US",
        region_explicit=False,
        source_url=None,
        start=TODAY,
        end=TODAY,
        now=now,
    )
    running.state = "running"
    service.store.save(running, "")
    r = service.call("POST", "/migrate/amplitude", json=amplitude(creds, MIXPANEL_TOKEN=creds.token2))
    assert r.status_code == 409 and r.json()["status"] == "error"
    cancelled = service.call("POST", f"/migrate/jobs/{running.id}/cancel", auth=(creds.secret2, ""))
    assert cancelled.json()["results"]["state"] == "cancelled"
    assert (
        service.call("POST", "/migrate/amplitude", json=amplitude(creds, MIXPANEL_TOKEN=creds.token2)).status_code
        == 202
    )
    service.settle()
