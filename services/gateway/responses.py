"""The response bodies existing clients parse (semantics §6.1, §6.2), errors included.

`INGESTION` is the ingestion interface of the one error model: every error on its paths
(`/import`, `/track`, and later `/engage`, `/groups`) is answered by `ingestion_error`:
`{"code", "error", "status"}`, or in form mode (`request.state.answer.legacy`) the
legacy `0` / `{"status": 0, "error"}` that old clients parse, or for `/track`
(`request.state.answer` a `TrackAnswer`) in the shape that request asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from footfall.shared.web import Interface


class Refusal(Protocol):
    """A refused item of a request (an event's `Failure`, an update's `UpdateFailure`)."""

    @property
    def message(self) -> str: ...

    def as_record(self) -> dict[str, Any]: ...


STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


class OrjsonResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def json_error(status: int, message: str, *, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    body = {"code": status, "error": message, "status": STATUS_TEXT.get(status, "Error")}
    return OrjsonResponse(body, status_code=status, headers=headers)


def strict_result(imported: int, failures: Sequence[Refusal]) -> Response:
    if not failures:
        return OrjsonResponse({"code": 200, "num_records_imported": imported, "status": "OK"})
    return OrjsonResponse(
        {
            "code": 400,
            "error": "some data points in the request failed validation",
            "failed_records": [f.as_record() for f in failures],
            "num_records_imported": imported,
            "status": "Bad Request",
        },
        status_code=400,
    )


def legacy_result(ok: bool, *, verbose: bool, error: str | None = None, status_code: int = 200) -> Response:
    """Form-mode answer: `1`/`0`, or `{"status": 1|0, "error": ...}` with verbose=1."""
    if verbose:
        return OrjsonResponse({"status": 1 if ok else 0, "error": None if ok else error}, status_code=status_code)
    return Response(b"1" if ok else b"0", status_code=status_code, media_type="text/plain")


@dataclass(frozen=True)
class Answer:
    """How this request wants its answer: form mode (`legacy`) and `verbose`."""

    legacy: bool
    verbose: bool


def client_address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


# -- /track answers (semantics §6.2) ---------------------------------------------------------

# A 1×1 transparent GIF (GIF89a, 2-colour table, graphic control extension: colour 0 transparent).
TRANSPARENT_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
    b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
# `name`, `a.b_1`, `mixpanel._jsc[12345]` (what mixpanel-js sends in its JSONP mode): ASCII
# identifiers joined by dots, with numeric indexes. Nothing else can reach the body.
_CALLBACK_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*|\[[0-9]{1,16}\])*", re.ASCII)
# mixpanel-js asks for this no-op when it wants verbose output without a callback.
NOOP_CALLBACK = "(function(){})"
MAX_CALLBACK_CHARS = 256
_RESERVED_WORDS = frozenset(
    {
        "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do",
        "else", "enum", "export", "extends", "false", "finally", "for", "function", "if", "implements", "import",
        "in", "instanceof", "interface", "let", "new", "null", "package", "private", "protected", "public",
        "return", "static", "super", "switch", "this", "throw", "true", "try", "typeof", "var", "void", "while",
        "with", "yield",
    }
)  # fmt: skip


def valid_callback(name: str) -> bool:
    """A JavaScript function to call: an identifier path (not starting with a reserved word)
    or mixpanel-js's no-op function expression."""
    if name == NOOP_CALLBACK:
        return True
    if len(name) > MAX_CALLBACK_CHARS or _CALLBACK_RE.fullmatch(name) is None:
        return False
    return re.split(r"[.\[]", name, maxsplit=1)[0] not in _RESERVED_WORDS


def _javascript_call(callback: str, value: Any, status: int) -> Response:
    # U+2028/U+2029 are valid in JSON strings but ended string literals before ES2019.
    payload = orjson.dumps(value).replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
    body = callback.encode() + b"(" + payload + b");"
    return Response(body, status_code=status, media_type="text/javascript")


@dataclass(frozen=True)
class TrackAnswer:
    """How a `/track` request wants its answer, errors included (first match wins):

    * `img=1` → the transparent GIF, with the request's status;
    * `callback=fn` → `text/javascript` `fn(1|0)`, or `fn({"status", "error"})` with
      `verbose=1`; status 200 for client errors too, since a browser runs a script only
      from a 2xx answer (5xx keep their status);
    * `strict=1` with a JSON or NDJSON body → `/import`'s strict JSON shapes;
    * 401 / 403 → `{"error", "status": "error"}` (the ingestion spec's `ErrorResponse`);
    * `verbose=1` → `{"status": 1|0, "error": null|"..."}`;
    * otherwise `text/plain` `1` (at least one event accepted) or `0`.

    Every answer carries `Cache-Control: no-store` (a cached pixel or script is a lost
    event) and, when the request had an `Origin`, CORS headers echoing it with credentials
    allowed (mixpanel-js sends `withCredentials`) and `Retry-After` exposed.
    """

    verbose: bool = False
    img: bool = False
    callback: str | None = None
    strict: bool = False
    origin: str | None = None

    def headers(self) -> dict[str, str]:
        headers = {"Cache-Control": "no-store", "Vary": "Origin", "X-Content-Type-Options": "nosniff"}
        if self.origin is not None:
            headers.update(cors_headers(self.origin))
        return headers

    def _legacy_value(self, ok: bool, error: str | None) -> Any:
        if self.verbose:
            return {"status": 1 if ok else 0, "error": None if ok else error}
        return 1 if ok else 0

    def _finish(self, response: Response, extra: Mapping[str, str] | None = None) -> Response:
        response.headers.update(self.headers())
        if extra:
            response.headers.update(extra)
        return response

    def result(self, imported: int, failures: Sequence[Refusal]) -> Response:
        """The answer of a request that was read: `imported` events accepted, `failures`."""
        ok = imported > 0
        error = failures[0].message if failures else None if ok else "no events in the request"
        if self.img:
            return self._finish(Response(TRANSPARENT_GIF, media_type="image/gif"))
        if self.callback is not None:
            return self._finish(_javascript_call(self.callback, self._legacy_value(ok, error), 200))
        if self.strict:
            return self._finish(strict_result(imported, failures))
        return self._finish(legacy_result(ok, verbose=self.verbose, error=error))

    def error(self, status: int, message: str, headers: Mapping[str, str]) -> Response:
        """The answer of a request refused as a whole (the renderer's)."""
        if self.img:
            response = Response(TRANSPARENT_GIF, status_code=status, media_type="image/gif")
        elif self.callback is not None:
            code = status if status >= 500 else 200
            response = _javascript_call(self.callback, self._legacy_value(False, message), code)
        elif status in (401, 403):
            response = OrjsonResponse({"error": message, "status": "error"}, status_code=status)
        elif self.strict:
            response = json_error(status, message)
        else:
            response = legacy_result(False, verbose=self.verbose, error=message, status_code=status)
        return self._finish(response, headers)


_HEADER_LIST_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*")
_DEFAULT_ALLOWED_HEADERS = "Content-Type, Content-Encoding, Authorization, X-Requested-With"


def cors_headers(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Expose-Headers": "Retry-After",
    }


def preflight(origin: str | None, requested_headers: str | None) -> Response:
    """The answer to a CORS preflight (`OPTIONS`): any origin, the methods of `/track`, the
    headers asked for (when they are a well-formed list of names)."""
    allowed = _DEFAULT_ALLOWED_HEADERS
    if requested_headers and len(requested_headers) <= 1024 and _HEADER_LIST_RE.fullmatch(requested_headers.strip()):
        allowed = requested_headers.strip()
    headers = {
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": allowed,
        "Access-Control-Max-Age": "86400",
        "Vary": "Origin, Access-Control-Request-Headers",
    }
    if origin is not None:
        headers.update(cors_headers(origin))
    return Response(status_code=204, headers=headers)


def ingestion_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    answer = getattr(request.state, "answer", None)
    if isinstance(answer, TrackAnswer):
        return answer.error(status, message, headers)
    if isinstance(answer, Answer) and answer.legacy:
        response = legacy_result(False, verbose=answer.verbose, error=message, status_code=status)
    else:
        response = json_error(status, message)
    response.headers.update(headers)
    return response


INGESTION = Interface("ingestion", ("/import", "/track", "/engage", "/groups"), ingestion_error)
