"""`ui_routes(...)`: the web UI under `/ui`, and `UI`, its interface (errors as pages or JSON).

Sign-in checks the credentials with the query interface's own check (`for_query_async`:
throttled, off the loop), then keeps them in a server-side session (`sessions.py`); the
browser holds only the session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` over TLS).
The sign-in form carries a one-time token matched with a cookie (login CSRF); every later
state change (sign-out, any non-GET call) carries the session's CSRF token.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import URLPath
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send

from footfall.services.ui.forward import COOKIE, check_csrf, forward, session_of
from footfall.services.ui.pages import PAGES, app_page, error_page, html, signin_page
from footfall.services.ui.sessions import SessionStore
from footfall.services.ui.settings import UiSettings
from footfall.shared.auth import Authenticator
from footfall.shared.errors import AuthError, FootfallError, NotFoundError, ParamError
from footfall.shared.web import Interface, plain_error, read_body

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"ui.js": "text/javascript", "ui.css": "text/css"}  # all the UI serves besides its pages
LOGIN_COOKIE = "footfall_ui_login"
MAX_FORM = 16 * 1024


def _secure(request: Request) -> bool:
    """Over TLS: served as https, or behind a proxy that says so. The header needs no trust:
    a forged one only makes the sender's own cookie stricter."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def _with_login_token(request: Request, message: str = "", status: int = 200) -> Response:
    """The sign-in form with a fresh one-time token, also set as a cookie (login CSRF)."""
    token = secrets.token_urlsafe(24)
    response = html(signin_page(token, message), status)
    response.set_cookie(
        LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/ui/signin"
    )
    return response


def render_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    """`/ui/api/...` answers errors in the plain JSON shape; the sign-in form shows its own
    error on a fresh form; any other page shows an error page."""
    path = request.url.path
    if path.startswith("/ui/api/"):
        return plain_error(request, status, message, headers)
    if path == "/ui/signin":
        return _with_login_token(request, message, status)
    return html(error_page(status, message), status, dict(headers))


UI = Interface("ui", ("/ui",), render_error)


async def _form(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form (the first value of each), the body read within `MAX_FORM`."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise FootfallError(415, "send the form as application/x-www-form-urlencoded")
    body = await read_body(request, MAX_FORM)
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ParamError(f"the form cannot be read: {exc}") from None
    return {name: values[0] for name, values in fields.items()}


def _field(form: dict[str, str], name: str) -> str:
    return form.get(name, "").strip()


def ui_routes(
    authenticator: Authenticator, settings: UiSettings, *, sessions: SessionStore | None = None
) -> list[BaseRoute]:
    store = SessionStore(settings.max_sessions, settings.idle_seconds) if sessions is None else sessions

    async def index(request: Request) -> Response:
        signed_in = store.get(request.cookies.get(COOKIE)) is not None
        return RedirectResponse("/ui/segmentation" if signed_in else "/ui/signin", 303)

    async def signin_form(request: Request) -> Response:
        message = "Your session expired: sign in again." if request.query_params.get("expired") else ""
        return _with_login_token(request, message)

    async def signin(request: Request) -> Response:
        form = await _form(request)
        sent, expected = _field(form, "csrf"), request.cookies.get(LOGIN_COOKIE, "")
        if not sent or not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
            raise AuthError(403, "the sign-in form expired: try again")
        secret, username, project = _field(form, "secret"), _field(form, "username"), _field(form, "project_id")
        if not secret:
            raise ParamError("enter the secret")
        if project and not project.isdigit():
            raise ParamError("the project id is a number")
        if _field(form, "mode") == "secret":
            credentials, who = f"{secret}:", "project secret"
        else:
            if not username or not project:
                raise ParamError("a service account signs in with its username, secret and a project id")
            credentials, who = f"{username}:{secret}", username
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode()
        client = request.client.host if request.client else None
        principal = await authenticator.for_query_async(authorization, project or None, client=client)
        session = store.create(authorization, principal.project_id, who)
        response = RedirectResponse("/ui/segmentation", 303)
        response.set_cookie(COOKIE, session.sid, httponly=True, samesite="strict", secure=_secure(request), path="/ui")
        response.delete_cookie(LOGIN_COOKIE, path="/ui/signin")
        return response

    async def signout(request: Request) -> Response:
        session = session_of(request, store)
        check_csrf(request, session, _field(await _form(request), "csrf"))
        store.drop(session.sid)
        response = RedirectResponse("/ui/signin", 303)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    def page(name: str) -> Route:
        async def endpoint(request: Request) -> Response:
            session = store.get(request.cookies.get(COOKIE))
            if session is None:
                return RedirectResponse("/ui/signin?expired=1" if COOKIE in request.cookies else "/ui/signin", 303)
            return html(app_page(name, session))

        return Route(f"/ui/{name}", endpoint, methods=["GET"])

    async def api(request: Request) -> Response:
        return await forward(request, store)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            raise NotFoundError(f"no UI file {name}")
        return FileResponse(STATIC / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"})

    routes = [
        Route("/ui", index, methods=["GET"]),
        Route("/ui/signin", signin_form, methods=["GET"]),
        Route("/ui/signin", signin, methods=["POST"]),
        Route("/ui/signout", signout, methods=["POST"]),
        *(page(name) for name, _ in PAGES),
        Route("/ui/api/{path:path}", api, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/ui/static/{name}", static, methods=["GET"]),
    ]
    return [UiRoutes(routes)]


class UiRoutes(BaseRoute):
    """Every path under `/ui`, routed by its own router. Not a `Route` or `Mount`, so the
    pages stay out of `/openapi.json`, which documents the HTTP interface (a page answers
    HTML and redirects, not the interface's shapes). Errors still reach the app's handlers."""

    def __init__(self, routes: list[Route]) -> None:
        self.router = Router(routes)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/ui" or path.startswith("/ui/")):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        return self.router.url_path_for(name, **path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.router(scope, receive, send)
