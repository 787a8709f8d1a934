"""Starlette plumbing every service shares: the one error model, request metrics, health.

Errors: code raises a `FootfallError` (or lets Starlette raise its 404/405); the handlers
installed here answer in the body shape of the interface the request addressed. An
`Interface` names its path prefixes and its renderer; each composition root passes the
interfaces it serves to `build_starlette`, and a path that belongs to none gets the
plain `{"error", "status": "error"}` shape. A bug is logged with its trace and answered
500 without one; a warehouse failure is logged and answered 503 with `Retry-After`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Lifespan, Message, Receive, Scope, Send

from footfall.shared import metrics
from footfall.shared.errors import FootfallError, ParamError
from footfall.shared.openapi import OPENAPI_PATH, openapi_endpoint
from footfall.shared.warehouse import WarehouseError

__all__ = ["Background", "Interface", "build_starlette", "json_response", "plain_error", "read_body"]

log = structlog.get_logger(__name__)


class Background(Protocol):
    """A service a process runs beside its HTTP app (started and stopped by its lifespan)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


Renderer = Callable[[Request, int, str, Mapping[str, str]], Response]
STORE_RETRY_AFTER = 5


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def plain_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    """The shape of the management interface and of service routes: `{"error", "status": "error"}`."""
    return json_response({"error": message, "status": "error"}, status, headers)


@dataclass(frozen=True)
class Interface:
    """An HTTP interface: the path prefixes it owns and how it renders an error."""

    name: str
    prefixes: tuple[str, ...]
    render: Renderer

    def owns(self, path: str) -> bool:
        return any(path == p.rstrip("/") or path.startswith(p) for p in self.prefixes)


class _ErrorHandlers:
    """The exception handlers of one app: the interface is found by the request path."""

    def __init__(self, interfaces: Sequence[Interface]) -> None:
        self.interfaces = tuple(interfaces)

    def _render(self, request: Request) -> Renderer:
        path = request.url.path
        for interface in self.interfaces:
            if interface.owns(path):
                return interface.render
        return plain_error

    async def footfall(self, request: Request, exc: Exception) -> Response:
        if not isinstance(exc, FootfallError):
            raise AssertionError("invariant: isinstance(exc, FootfallError)")
        return self._render(request)(request, exc.status, exc.message, exc.headers)

    async def http(self, request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException):
            raise AssertionError("invariant: isinstance(exc, HTTPException)")
        return self._render(request)(request, exc.status_code, str(exc.detail), dict(exc.headers or {}))

    async def store(self, request: Request, exc: Exception) -> Response:
        log.error("warehouse_failed", path=request.url.path, error=str(exc)[:2000])
        message = "the store could not serve this request, retry with backoff"
        return self._render(request)(request, 503, message, {"Retry-After": str(STORE_RETRY_AFTER)})

    async def disconnect(self, request: Request, exc: Exception) -> Response:
        return Response(status_code=400)  # the client left mid-body: nobody reads this answer

    async def bug(self, request: Request, exc: Exception) -> Response:
        log.error("unhandled_error", path=request.url.path, exc_info=exc)
        return self._render(request)(request, 500, "internal error", {})


async def read_body(request: Request, limit: int, *, message: str | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes (while reading,
    so an oversized body never sits in memory)."""
    too_large = FootfallError(413, message or f"request body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json_object(request: Request, limit: int, *, empty_is_object: bool = False) -> dict[str, Any]:
    """A JSON object body (`read_body`'s cap applies); anything else is a 400. With
    `empty_is_object`, an empty body is `{}`."""
    raw = await read_body(request, limit)
    try:
        value = orjson.loads(b"{}" if empty_is_object and not raw else raw)
    except orjson.JSONDecodeError:
        raise ParamError("the request body must be a JSON object") from None
    if not isinstance(value, dict):
        raise ParamError("the request body must be a JSON object")
    return value


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


class RequestMetrics:
    """Counts answered requests per service, route template and status."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            metrics.HTTP_REQUESTS.labels(self.service, path, str(status)).inc()
            if status >= 500:
                log.warning(
                    "request_failed",
                    path=scope.get("path"),
                    status=status,
                    seconds=round(time.perf_counter() - started, 4),
                )


def build_starlette(
    service: str,
    routes: Sequence[BaseRoute],
    *,
    interfaces: Sequence[Interface] = (),
    lifespan: Lifespan[Starlette] | None = None,
    health: Callable[[Request], Any] | None = None,
) -> Starlette:
    """A Starlette app with the shared routes (`/healthz`, `/metrics`, `/openapi.json`) and the error model."""
    handlers = _ErrorHandlers(interfaces)
    all_routes = [
        *routes,
        Route("/healthz", health or healthz, methods=["GET"]),
        Route("/metrics", metrics.metrics_endpoint, methods=["GET"]),
        # the OpenAPI document of every route above, generated when first asked for
        Route(OPENAPI_PATH, openapi_endpoint([(i.name, i.prefixes) for i in interfaces], title=f"Footfall {service}")),
    ]
    return Starlette(
        routes=all_routes,
        exception_handlers={
            FootfallError: handlers.footfall,
            HTTPException: handlers.http,
            WarehouseError: handlers.store,
            ClientDisconnect: handlers.disconnect,
            Exception: handlers.bug,
        },
        middleware=[Middleware(RequestMetrics, service=service)],
        lifespan=lifespan,
    )
