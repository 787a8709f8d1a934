"""The response bodies existing clients parse (semantics §6.1), errors included.

`INGESTION` is the ingestion interface of the one error model: every error on its paths
(`/import`, and later `/track`, `/engage`, `/groups`) is answered by `ingestion_error`:
`{"code", "error", "status"}`, or in form mode (`request.state.answer.legacy`) the
legacy `0` / `{"status": 0, "error"}` that old clients parse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from footfall.shared.events import Failure
from footfall.shared.web import Interface

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


def strict_result(imported: int, failures: list[Failure]) -> Response:
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


def ingestion_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    answer = getattr(request.state, "answer", None)
    if isinstance(answer, Answer) and answer.legacy:
        response = legacy_result(False, verbose=answer.verbose, error=message, status_code=status)
    else:
        response = json_error(status, message)
    response.headers.update(headers)
    return response


INGESTION = Interface("ingestion", ("/import", "/track", "/engage", "/groups"), ingestion_error)
