"""Wiring of query endpoints: every report handler is wrapped with auth, limits, parameter
parsing and the interface's error shape, and served under `/api/query/<x>` and
`/api/2.0/<x>` (trailing slash optional, GET or POST)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.shared.errors import FootfallError
from footfall.services.query.limits import QueryLimiter
from footfall.services.query.params import Params
from footfall.shared import metrics
from footfall.shared.auth import Authenticator, AuthError, Principal
from footfall.shared.warehouse import Warehouse, WarehouseError

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


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _request_text(request: Request) -> str:
    query = request.url.query
    return request.url.path + ("?" + query if query else "")


@dataclass
class QueryService:
    authenticator: Authenticator
    warehouse: Warehouse
    limiter: QueryLimiter

    def wrap(self, name: str, handler: Handler, *, limited: bool = True) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                params = await Params.from_request(request)
                principal = await self.authenticator.for_query_async(
                    request.headers.get("authorization"), params.get("project_id")
                )
                ctx = QueryContext(principal, params, self.warehouse, request)
                if limited:
                    async with self.limiter.slot(principal.project_id):
                        result = await handler(ctx)
                else:
                    result = await handler(ctx)
            except (FootfallError, AuthError) as exc:
                retry_after = getattr(exc, "retry_after", None)
                headers = {"Retry-After": str(retry_after)} if retry_after else None
                return json_response(
                    {"request": _request_text(request), "error": exc.message}, exc.status, headers
                )
            except WarehouseError as exc:
                log.error("query_failed", endpoint=name, error=str(exc)[:2000])
                return json_response({"request": _request_text(request), "error": "query failed"}, 500)
            finally:
                metrics.QUERY_SECONDS.labels(name).observe(time.perf_counter() - started)
            return result if isinstance(result, Response) else json_response(result)

        return endpoint

    def routes(self, handlers: dict[str, Handler], prefixes: tuple[str, ...] = ("/api/query", "/api/2.0")) -> list[Route]:
        routes = []
        for name, handler in handlers.items():
            endpoint = self.wrap(name, handler)
            for prefix in prefixes:
                for path in (f"{prefix}/{name}", f"{prefix}/{name}/"):
                    routes.append(Route(path, endpoint, methods=["GET", "POST"]))
        return routes
