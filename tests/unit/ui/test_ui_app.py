"""The web UI's server side in-process: sign-in, cookies, CSRF, idle expiry, the session bound,
and the forwarding of `/ui/api/...` to the interface with the session's credentials."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.ui import UI, SessionStore, UiSettings, ui_routes
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import Directory
from footfall.shared.web import build_starlette, json_response
from tests.unit.conftest import CREDS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Ui:
    """The UI routes beside a stand-in query endpoint that authenticates like the real ones
    and echoes what it was asked."""

    def __init__(self, directory: Directory, *, max_sessions: int = 10, idle: float = 60.0, https: bool = False):
        self.clock = Clock()
        self.sessions = SessionStore(max_sessions, idle, clock=self.clock)
        authenticator = Authenticator(directory)

        async def echo(request: Request) -> Response:
            principal = await authenticator.for_query_async(
                request.headers.get("authorization"), request.query_params.get("project_id")
            )
            body = (await request.body()).decode()
            return json_response(
                {
                    "project": principal.project_id,
                    "via": principal.via,
                    "params": dict(request.query_params),
                    "body": body,
                }
            )

        routes = [
            Route("/api/query/echo", echo, methods=["GET", "POST"]),
            *ui_routes(authenticator, UiSettings(), sessions=self.sessions),
        ]
        app = build_starlette("test", routes, interfaces=[UI])
        self.runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        base = "https://footfall.test" if https else "http://footfall.test"
        self.client = httpx.AsyncClient(transport=transport, base_url=base, follow_redirects=False)

    def request(self, method: str, url: str, *, cookies: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if cookies:
            headers["cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        self.client.cookies.clear()  # only the cookies a test names are sent
        return self.runner.run(self.client.request(method, url, headers=headers, **kw))

    def login_token(self) -> str:
        page = self.request("GET", "/ui/signin")
        assert page.status_code == 200
        token = page.cookies["footfall_ui_login"]
        assert f'name="csrf" value="{token}"' in page.text
        return token

    def sign_in(self, **form: str) -> httpx.Response:
        token = self.login_token()
        return self.request("POST", "/ui/signin", data={"csrf": token, **form}, cookies={"footfall_ui_login": token})

    def session(self, **form: str) -> tuple[str, str]:
        """(session id, CSRF token) of a successful sign-in."""
        answer = self.sign_in(**form)
        assert answer.status_code == 303, answer.text
        sid = answer.cookies["footfall_ui"]
        page = self.request("GET", "/ui/segmentation", cookies={"footfall_ui": sid})
        match = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert match is not None
        return sid, match.group(1)

    def close(self) -> None:
        self.runner.run(self.client.aclose())
        self.runner.close()


@pytest.fixture
def ui(directory: Directory) -> Iterator[Ui]:
    made = Ui(directory)
    yield made
    made.close()


SA = {"mode": "service_account", "username": "analyst-sa", "secret": CREDS.sa_secret, "project_id": "1"}


def test_signin_sets_a_strict_httponly_session_cookie(ui: Ui) -> None:
    answer = ui.sign_in(**SA)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/segmentation"
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("footfall_ui="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/ui"} <= flags
    assert "secure" not in flags  # plain HTTP here; over TLS see the next test
    assert len(ui.sessions) == 1


def test_signin_over_tls_marks_the_cookie_secure(directory: Directory, ui: Ui) -> None:
    tls = Ui(directory, https=True)
    try:
        cookie = next(c for c in tls.sign_in(**SA).headers.get_list("set-cookie") if c.startswith("footfall_ui="))
        assert "secure" in {part.strip().lower() for part in cookie.split(";")}
    finally:
        tls.close()
    # behind a TLS-terminating proxy (Footfall itself speaks plain HTTP)
    token = ui.login_token()
    answer = ui.request(
        "POST",
        "/ui/signin",
        data={"csrf": token, **SA},
        cookies={"footfall_ui_login": token},
        headers={"x-forwarded-proto": "https"},
    )
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("footfall_ui="))
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}


@pytest.mark.parametrize(
    ("form", "status", "message"),
    [
        ({**SA, "secret": "wrong"}, 401, "Invalid credentials"),
        ({**SA, "username": "outsider-sa"}, 403, "not a member of project 1"),
        ({**SA, "project_id": "x1"}, 400, "project id is a number"),
        ({**SA, "secret": ""}, 400, "enter the secret"),
        ({"mode": "secret", "secret": CREDS.secret, "project_id": "2"}, 403, "do not belong to project 2"),
    ],
    ids=["wrong-secret", "not-a-member", "bad-project-id", "no-secret", "secret-of-another-project"],
)
def test_signin_refusals_show_the_form_again(ui: Ui, form: dict[str, str], status: int, message: str) -> None:
    answer = ui.sign_in(**form)
    assert answer.status_code == status
    assert message in answer.text and '<form method="post" action="/ui/signin">' in answer.text
    assert "footfall_ui=" not in answer.headers.get("set-cookie", "").replace("footfall_ui_login=", "")
    assert len(ui.sessions) == 0


def test_signin_without_the_form_token_is_refused(ui: Ui) -> None:
    answer = ui.request("POST", "/ui/signin", data={**SA, "csrf": "forged"}, cookies={"footfall_ui_login": "other"})
    assert answer.status_code == 403 and len(ui.sessions) == 0
    assert (
        ui.request("POST", "/ui/signin", content=b"{}", headers={"content-type": "application/json"}).status_code == 415
    )
    big = ui.request("POST", "/ui/signin", data={"secret": "x" * 20_000})
    assert big.status_code == 413


def test_the_api_is_forwarded_with_the_sessions_credentials_and_project(ui: Ui) -> None:
    sid, _ = ui.session(mode="secret", secret=CREDS.secret)
    answer = ui.request("GET", "/ui/api/query/echo?event=a&project_id=2", cookies={"footfall_ui": sid})
    assert answer.status_code == 200
    assert answer.json() == {"project": 1, "via": "secret", "params": {"event": "a", "project_id": "1"}, "body": ""}
    assert ui.request("GET", "/ui/api/query/echo").status_code == 401  # no session
    metrics = ui.request("GET", "/ui/api/metrics", cookies={"footfall_ui": sid})  # the operators' page
    assert metrics.status_code == 200 and "footfall_http_requests_total" in metrics.text
    for path in ("/ui/api/healthz", "/ui/api/query/../../metrics", "/ui/api/ingest", "/ui/api/metrics/x"):
        assert ui.request("GET", path, cookies={"footfall_ui": sid}).status_code == 404, path


def test_state_changes_need_the_csrf_token(ui: Ui) -> None:
    sid, csrf = ui.session(**SA)
    cookies = {"footfall_ui": sid}
    assert ui.request("POST", "/ui/api/query/echo", cookies=cookies, content=b"x").status_code == 403
    wrong = {"x-csrf-token": "nope"}
    assert ui.request("POST", "/ui/api/query/echo", cookies=cookies, content=b"x", headers=wrong).status_code == 403
    ok = ui.request("POST", "/ui/api/query/echo", cookies=cookies, content=b"x", headers={"x-csrf-token": csrf})
    assert ok.status_code == 200 and ok.json()["body"] == "x"
    # sign-out is a state change too: without the token the session survives
    assert ui.request("POST", "/ui/signout", cookies=cookies, data={"csrf": "nope"}).status_code == 403
    assert ui.request("GET", "/ui/api/query/echo", cookies=cookies).status_code == 200
    out = ui.request("POST", "/ui/signout", cookies=cookies, data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/ui/signin"
    assert ui.request("GET", "/ui/api/query/echo", cookies=cookies).status_code == 401
    assert len(ui.sessions) == 0


def test_an_idle_session_expires_and_a_used_one_lives_on(ui: Ui) -> None:
    sid, _ = ui.session(**SA)
    cookies = {"footfall_ui": sid}
    ui.clock.now += 50
    assert ui.request("GET", "/ui/api/query/echo", cookies=cookies).status_code == 200  # resets the idle clock
    ui.clock.now += 50
    assert ui.request("GET", "/ui/segmentation", cookies=cookies).status_code == 200
    ui.clock.now += 61
    page = ui.request("GET", "/ui/segmentation", cookies=cookies)
    assert page.status_code == 303 and page.headers["location"] == "/ui/signin?expired=1"
    assert ui.request("GET", "/ui/api/query/echo", cookies=cookies).status_code == 401
    assert "session expired" in ui.request("GET", "/ui/signin?expired=1").text


def test_the_store_keeps_at_most_max_sessions_least_recently_used_out_first() -> None:
    clock = Clock()
    store = SessionStore(2, 60.0, clock=clock)
    a, b = store.create("h", 1, "a"), store.create("h", 1, "b")
    clock.now += 1
    assert store.get(a.sid) is a  # a is now the most recently used
    c = store.create("h", 1, "c")
    assert store.get(b.sid) is None and store.get(a.sid) is a and store.get(c.sid) is c
    clock.now += 61
    store.create("h", 1, "d")  # creating forgets the idle ones
    assert len(store) == 1


def test_pages_and_assets(ui: Ui) -> None:
    assert ui.request("GET", "/ui").headers["location"] == "/ui/signin"
    assert ui.request("GET", "/ui/segmentation").headers["location"] == "/ui/signin"
    js = ui.request("GET", "/ui/static/ui.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert ui.request("GET", "/ui/static/../app.py").status_code == 404
    assert ui.request("GET", "/ui/static/pages.py").status_code == 404
    missing = ui.request("GET", "/ui/nowhere")  # a page's error is a page, in the UI's shape
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert ui.request("DELETE", "/ui/signin").status_code == 405
    sid, _ = ui.session(**SA)
    page = ui.request("GET", "/ui/segmentation", cookies={"footfall_ui": sid})
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<label for="event">' in page.text and 'aria-current="page"' in page.text


def test_a_session_reaches_only_its_own_projects_management_paths(ui: Ui) -> None:
    sid, _ = ui.session(**SA)
    cookies = {"footfall_ui": sid}
    for path in ("/ui/api/app/projects/2/funnels", "/ui/api/app/projects/12/funnels", "/ui/api/app/projects/1x"):
        assert ui.request("GET", path, cookies=cookies).status_code == 403, path
    # the UI's own 401 is marked (a page goes to the sign-in form); the interface's 401s are not
    signed_out = ui.request("GET", "/ui/api/query/echo")
    assert signed_out.status_code == 401 and signed_out.headers["x-footfall-signed-out"] == "1"
