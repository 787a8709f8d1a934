"""The UI's calls to the HTTP interface: `/ui/api/<path>` is forwarded, inside the process, to
`/api/<path>` with the session's credentials and project, so a page gets exactly the answers,
permissions, limits and errors of the interface (no second implementation of a report).

Only the query interface (`/api/query/...`, `/api/2.0/export`), the management interface
(`/api/app/...`, the session's project only) and the process's `/metrics` are reachable this
way; any method but GET needs the session's CSRF token in the `X-CSRF-Token` header.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

import httpx
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.ui.sessions import Session, SessionStore
from footfall.shared.errors import AuthError, FootfallError, NotFoundError
from footfall.shared.web import read_body

COOKIE = "footfall_ui"
CSRF_HEADER = "x-csrf-token"
SIGNED_OUT_HEADER = "X-Footfall-Signed-Out"
FORWARDED_PREFIXES = ("query/", "app/")
FORWARDED_PATHS = ("2.0/export",)
MAX_BODY = 256 * 1024
PASSED_HEADERS = ("content-type", "retry-after")


class SignedOutError(AuthError):
    """401 for a request without a live session, marked so that a page tells it from a 401 of
    the interface (credentials the interface refuses) and goes to the sign-in form."""

    def __init__(self) -> None:
        super().__init__(401, "not signed in, or the session expired: sign in again")

    @property
    def headers(self) -> dict[str, str]:
        return {SIGNED_OUT_HEADER: "1"}


def session_of(request: Request, sessions: SessionStore) -> Session:
    """The request's live session, else 401 (the page sends the browser to the sign-in form)."""
    session = sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise SignedOutError
    return session


def check_csrf(request: Request, session: Session, sent: str | None) -> None:
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise AuthError(403, "missing or wrong CSRF token: reload the page")


def _target(path: str, session: Session) -> str:
    if path == "metrics":  # the process's own metrics (the operators' page), as /metrics serves them
        return "/metrics"
    if ".." in path or "//" in path or not (path.startswith(FORWARDED_PREFIXES) or path in FORWARDED_PATHS):
        raise NotFoundError(f"no UI route /ui/api/{path}")
    # a management path names its project: the session's only (the interface would check the
    # credentials' membership anyway; the UI keeps a session to the project it signed in to)
    parts = path.split("/")
    if path.startswith("app/projects/") and (len(parts) < 3 or parts[2] != str(session.project_id)):
        raise AuthError(403, f"this session is signed in to project {session.project_id}")
    return "/api/" + path


async def forward(request: Request, sessions: SessionStore) -> Response:
    session = session_of(request, sessions)
    if request.method != "GET":
        check_csrf(request, session, request.headers.get(CSRF_HEADER))
    target = _target(request.path_params["path"], session)
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "project_id"]
    params.append(("project_id", str(session.project_id)))
    body = b"" if request.method == "GET" else await read_body(request, MAX_BODY)
    headers = {"authorization": session.authorization}
    if "content-type" in request.headers:
        headers["content-type"] = request.headers["content-type"]
    client = (request.client.host, request.client.port) if request.client else ("127.0.0.1", 0)
    transport = httpx.ASGITransport(app=request.app, client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://footfall-ui") as http:
        try:
            answer = await http.request(request.method, target, params=urlencode(params), content=body, headers=headers)
        except httpx.HTTPError as exc:  # the in-process call itself failed (not an answer)
            raise FootfallError(502, f"the UI could not reach the interface: {exc}") from exc
    passed = {k: v for k, v in answer.headers.items() if k in PASSED_HEADERS}
    return Response(answer.content, status_code=answer.status_code, headers=passed)
