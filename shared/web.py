"""Starlette plumbing every service shares: JSON errors for unknown routes and bugs,
request metrics, health."""

from __future__ import annotations

import time
from collections.abc import Sequence

import orjson
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from shared import metrics

log = structlog.get_logger(__name__)


def _json(status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _json(exc.status_code, {"error": exc.detail, "status": "error"}, dict(exc.headers or {}))


async def server_error(request: Request, exc: Exception) -> Response:
    # A bug, never a client mistake: log it with the trace, answer without one.
    log.error("unhandled_error", path=request.url.path, exc_info=exc)
    return _json(500, {"error": "internal error", "status": "error"})


async def healthz(request: Request) -> Response:
    return _json(200, {"status": "ok"})


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

        async def send_wrapper(message: dict) -> None:  # type: ignore[type-arg]
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
                log.warning("request_failed", path=scope.get("path"), status=status,
                            seconds=round(time.perf_counter() - started, 4))


def build_starlette(service: str, routes: Sequence[BaseRoute], **kwargs: object) -> Starlette:
    """A Starlette app with the shared routes (/healthz, /metrics) and error handling."""
    all_routes = [
        *routes,
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics.metrics_endpoint, methods=["GET"]),
    ]
    app = Starlette(
        routes=all_routes,
        exception_handlers={HTTPException: http_error, Exception: server_error},
        **kwargs,  # type: ignore[arg-type]
    )
    app.add_middleware(RequestMetrics, service=service)
    return app
