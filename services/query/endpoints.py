"""Wiring of query endpoints: every report handler is wrapped with auth, limits and parameter
parsing, and served under `/api/query/<x>` and `/api/2.0/<x>` (trailing slash optional,
GET or POST). `QUERY` is the interface's error shape in the one error model."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.query.limits import QueryLimiter
from footfall.services.query.params import Params
from footfall.shared import metrics
from footfall.shared.auth import Authenticator, Principal
from footfall.shared.warehouse import Warehouse
from footfall.shared.web import Interface, json_response

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class QueryContext:
    principal: Principal
    params: Params
    warehouse: Warehouse
    request: Request

    @property
    def project_id(self) -> int:
        return self.principal.project_id

    @property
    def timezone(self) -> str:
        return self.principal.project.timezone


Handler = Callable[[QueryContext], Awaitable[Any]]


def _request_text(request: Request) -> str:
    query = request.url.query
    return request.url.path + ("?" + query if query else "")


def query_error(request: Request, status: int, message: str, headers: Mapping[str, str]) -> Response:
    """The query interface's error body (semantics §0.4): `{"request": <path?query>, "error"}`."""
    return json_response({"request": _request_text(request), "error": message}, status, headers)


QUERY = Interface("query", ("/api/query/", "/api/2.0/"), query_error)


@dataclass
class QueryService:
    authenticator: Authenticator
    warehouse: Warehouse
    limiter: QueryLimiter

    def wrap(
        self, name: str, handler: Handler, *, limited: bool = True, free: Callable[[Params], bool] | None = None
    ) -> Callable[[Request], Awaitable[Response]]:
        """Authenticate, apply the project's limits, run the report; errors are raised and
        rendered by `query_error`. A request that `free` accepts takes a concurrency slot but
        does not spend the hourly budget (the later pages of an `/engage` session)."""

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                params = await Params.from_request(request)
                client = request.client.host if request.client is not None else None
                principal = await self.authenticator.for_query_async(
                    request.headers.get("authorization"), params.get("project_id"), client=client
                )
                ctx = QueryContext(principal, params, self.warehouse, request)
                if limited:
                    counted = free is None or not free(params)
                    async with self.limiter.slot(principal.project_id, counted=counted):
                        result = await handler(ctx)
                else:
                    result = await handler(ctx)
            finally:
                metrics.QUERY_SECONDS.labels(name).observe(time.perf_counter() - started)
            return result if isinstance(result, Response) else json_response(result)

        return endpoint

    def routes(
        self,
        handlers: dict[str, Handler],
        prefixes: tuple[str, ...] = ("/api/query", "/api/2.0"),
        *,
        free: Mapping[str, Callable[[Params], bool]] | None = None,
    ) -> list[Route]:
        routes = []
        for name, handler in handlers.items():
            endpoint = self.wrap(name, handler, free=(free or {}).get(name))
            for prefix in prefixes:
                for path in (f"{prefix}/{name}", f"{prefix}/{name}/"):
                    routes.append(Route(path, endpoint, methods=["GET", "POST"]))
        return routes
