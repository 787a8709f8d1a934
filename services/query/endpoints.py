"""Wiring of query endpoints: every report handler is wrapped with auth, limits and parameter
parsing, and served under `/api/query/<x>` and `/api/2.0/<x>` (trailing slash optional,
GET or POST). `QUERY` is the interface's error shape in the one error model.

Order of work per request, cheapest refusal first: a multipart body is a 415; a form body
declared larger than `max_body_bytes` a 413; the credentials are checked (401) before a
byte of the body is read; the body is read up to `max_body_bytes` (413 beyond, while
reading); then the project is resolved (a service account's `project_id` may come in the
body), the limits applied and the report run. The JSON of an answer is encoded in a
worker thread: a large answer never holds the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import structlog
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from footfall.services.query.limits import QueryLimiter, Slot
from footfall.services.query.params import Params, form_body_expected, parse_form
from footfall.shared import metrics
from footfall.shared.auth import Authenticator, Principal
from footfall.shared.errors import FootfallError, ParamError
from footfall.shared.warehouse import Warehouse
from footfall.shared.web import Interface, json_response, read_body

log = structlog.get_logger(__name__)

T = TypeVar("T")


DEFAULT_MAX_BODY_BYTES = 256 * 1024
DEFAULT_MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class QueryContext:
    principal: Principal
    params: Params
    warehouse: Warehouse
    request: Request
    max_cells: int = DEFAULT_MAX_CELLS  # buckets × segments of one answer (0: no limit)

    @property
    def project_id(self) -> int:
        return self.principal.project_id

    @property
    def timezone(self) -> str:
        return self.principal.project.timezone

    def check_cells(self, buckets: int, segments: int, parameters: str) -> None:
        """400 before any query runs when an answer could hold more than `max_cells` cells
        (`buckets` × `segments`); `parameters` names what the caller can narrow."""
        if self.max_cells and buckets * segments > self.max_cells:
            raise ParamError(
                f"the answer could hold {buckets} buckets × {segments} segments = {buckets * segments} cells,"
                f" more than {self.max_cells} (FOOTFALL_QUERY_MAX_CELLS): narrow {parameters}"
            )

    async def shape(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the warehouse's threads: shaping a large answer never holds the event loop."""
        return await self.warehouse.run(fn, *args)


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
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_cells: int = DEFAULT_MAX_CELLS

    async def _params(self, request: Request, client: str | None) -> Params:
        """The request's parameters; a form body is read only after the credentials passed."""
        if not form_body_expected(request):
            return Params.from_parts(request.query_params)
        limit = self.max_body_bytes
        message = f"request body larger than {limit} bytes (FOOTFALL_QUERY_MAX_BODY_BYTES)"
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise FootfallError(413, message)
        await self.authenticator.identify_async(request.headers.get("authorization"), client=client)
        body = await read_body(request, limit, message=message)
        return Params.from_parts(request.query_params, parse_form(body))

    def wrap(
        self,
        name: str,
        handler: Handler,
        *,
        limited: bool = True,
        free: Callable[[Params], bool] | None = None,
        limiter: QueryLimiter | None = None,
    ) -> Callable[[Request], Awaitable[Response]]:
        """Authenticate, apply the project's limits, run the report; errors are raised and
        rendered by `query_error`. A request that `free` accepts takes a concurrency slot but
        does not spend the hourly budget (the later pages of an `/engage` session).
        `limiter` replaces the reports' limiter (raw export has its own); a streamed answer
        keeps its slot until the stream ends."""
        limits = limiter or self.limiter

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            slot: Slot | None = None
            try:
                client = request.client.host if request.client is not None else None
                params = await self._params(request, client)
                principal = await self.authenticator.for_query_async(
                    request.headers.get("authorization"), params.get("project_id"), client=client
                )
                ctx = QueryContext(principal, params, self.warehouse, request, self.max_cells)
                if limited:
                    slot = limits.acquire(principal.project_id, counted=free is None or not free(params))
                result = await handler(ctx)
                if isinstance(result, StreamingResponse) and slot is not None:
                    result.body_iterator = _releasing(result.body_iterator, slot)
                    slot = None
            finally:
                if slot is not None:
                    slot.release()
                metrics.QUERY_SECONDS.labels(name).observe(time.perf_counter() - started)
            if isinstance(result, Response):
                return result
            body = await asyncio.to_thread(orjson.dumps, result)
            return Response(body, media_type="application/json")

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


async def _releasing(body: AsyncIterable[Any], slot: Slot) -> AsyncIterator[Any]:
    """`body`, releasing `slot` when it ends, fails or is abandoned (the client left)."""
    try:
        async for chunk in body:
            yield chunk
    finally:
        slot.release()
