"""`POST /import`: authenticate → read (bounded) → decode → rate limit → validate → sink → answer.

The answer is sent only after the sink made the accepted events durable. Errors are
raised (`FootfallError`) and answered by the ingestion interface's renderer
(`responses.ingestion_error`): a JSON error, or the legacy `0` / verbose body in form
mode (`request.state.answer`). A client mistake is never a 500.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.gateway.decode import (
    FORM_TYPES,
    JSON_TYPES,
    DecodedBody,
    MalformedItem,
    decode_data,
    decompress,
    form_fields,
    media_type,
    too_large,
    too_many,
)
from footfall.services.gateway.ratelimit import Cost, RateLimiter
from footfall.services.gateway.responses import Answer, client_address, legacy_result, strict_result
from footfall.services.gateway.sinks import FastBatch, FastSink, Sink
from footfall.shared import metrics
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.errors import UnavailableError
from footfall.shared.events import Event, Failure
from footfall.shared.events.fast_import import FastEnvelopes, FastImport, FastRows
from footfall.shared.streams import EVENTS, Intake
from footfall.shared.web import read_body

log = structlog.get_logger(__name__)

# gzip of incompressible data is slightly larger than the data; allow that much slack
# on the wire before the uncompressed limit is checked.
_WIRE_SLACK = 1.05


B = TypeVar("B", bound=FastBatch)


@dataclass(frozen=True)
class FastPath(Generic[B]):
    """The `/import` fast path (`footfall.shared.events.fast_import`): `build(body, project_id,
    now_ms)` makes a request's events into what `sink.publish_fast` stores as it is, or answers
    None (the Python path's request then). Blocking, without the GIL: run in a thread."""

    build: Callable[[bytes, int, int], B | None]
    sink: FastSink[B]

    @staticmethod
    def rows(fast: FastImport, sink: FastSink[FastRows]) -> FastPath[FastRows]:
        """Native rows for the embedded sink (`serve`), which inserts them as they are."""
        return FastPath(lambda body, pid, now: fast.rows(body, project_id=pid, now_ms=now, ingested_at_ms=now), sink)

    @staticmethod
    def envelopes(fast: FastImport, sink: FastSink[FastEnvelopes]) -> FastPath[FastEnvelopes]:
        """Kafka records for the Kafka sink (`footfall gateway`), which publishes them as they are."""
        return FastPath(lambda body, pid, now: fast.envelopes(body, project_id=pid, now_ms=now), sink)


@dataclass
class ImportEndpoint:
    authenticator: Authenticator
    sink: Sink
    limits: ImportLimits
    rate: RateLimiter
    fast: FastPath[Any] | None = None

    async def handle(self, request: Request) -> Response:
        params = request.query_params
        if request.method == "GET" and "data" not in params:
            # GET carries events only in the legacy `data=` query parameter (old SDKs).
            raise HTTPException(405, "Method Not Allowed: send events with POST /import", headers={"Allow": "POST"})
        strict = params.get("strict") == "1"
        verbose = params.get("verbose") == "1"
        # Form mode (old SDKs) is answered in its own shape, errors included; its
        # `verbose` flag may travel in the form body, so such bodies are read before
        # authenticating. Every other body is read only once the caller is known.
        legacy = "data" in params or media_type(request.headers.get("content-type")) in FORM_TYPES
        request.state.answer = Answer(legacy, verbose)
        raw = await self._read(request) if legacy else b""
        if legacy and not verbose:
            verbose = form_fields(raw).get("verbose") == "1"
            request.state.answer = Answer(legacy, verbose)
        principal = await self.authenticator.for_import_async(
            request.headers.get("authorization"), params.get("project_id"), client=client_address(request)
        )
        if not legacy:
            raw = await self._read(request)
        data = decompress(raw, request.headers.get("content-encoding"), self.limits.max_request_bytes)
        if self.fast is not None and not legacy and media_type(request.headers.get("content-type")) in JSON_TYPES:
            stored = await self._fast(self.fast, data, principal.project_id)
            if stored is not None:
                return strict_result(stored, [])
        decoded = self._decode(request, data)
        if len(decoded.items) > self.limits.max_events_per_request:
            raise too_many(len(decoded.items), self.limits.max_events_per_request)
        # Every item counts toward the rate limit, valid or not; a refused batch stores nothing.
        await self.rate.charge({principal.project_id: Cost(len(decoded.items), decoded.body_bytes)})
        events, failures = self._validate(decoded, principal.project_id, strict)
        try:
            await self.sink.publish(EVENTS, events)
        except UnavailableError as exc:
            log.warning("import_unavailable", error=exc.message)
            raise

        metrics.EVENTS_IMPORTED.labels("import").inc(len(events))
        for failure in failures:
            metrics.EVENTS_REJECTED.labels("import", failure.reason).inc()
        if decoded.legacy:
            ok = bool(events) or not failures
            return legacy_result(ok, verbose=verbose, error=failures[0].message if failures else None)
        return strict_result(len(events), failures if strict else [])

    async def _fast(self, fast: FastPath[Any], data: bytes, project_id: int) -> int | None:
        """Store `data` through the fast path and return how many events it held, or None when
        some event needs the Python path (nothing was stored then). In a thread: the extension
        lets go of the GIL, so the event loop goes on meanwhile."""
        rows: FastBatch | None = await asyncio.to_thread(fast.build, data, project_id, int(time.time() * 1000))
        if rows is None:
            metrics.IMPORT_FAST_PATH.labels("declined").inc()
            return None
        # Every item counts toward the rate limit; a refused batch stores nothing.
        await self.rate.charge({project_id: Cost(rows.items, len(data))})
        try:
            await fast.sink.publish_fast(rows)
        except UnavailableError as exc:
            log.warning("import_unavailable", error=exc.message)
            raise
        metrics.IMPORT_FAST_PATH.labels("taken").inc()
        metrics.EVENTS_IMPORTED.labels("import").inc(rows.items)
        return rows.items

    async def _read(self, request: Request) -> bytes:
        """The raw body, refused with 413 as soon as it passes the wire limit."""
        limit = self.limits.max_request_bytes
        return await read_body(request, int(limit * _WIRE_SLACK) + 1024, message=too_large(limit).message)

    def _decode(self, request: Request, data: bytes) -> DecodedBody:
        return decode_data(
            data,
            content_type=request.headers.get("content-type"),
            query_data=request.query_params.get("data"),
            limit=self.limits.max_request_bytes,
            max_items=self.limits.max_events_per_request,
        )

    def _validate(self, decoded: DecodedBody, project_id: int, strict: bool) -> tuple[list[Event], list[Failure]]:
        malformed = [
            Failure(i, None, "", item.message, "malformed")
            for i, item in enumerate(decoded.items)
            if isinstance(item, MalformedItem)
        ]
        intake = Intake(project_id, strict, self.limits, int(time.time() * 1000), decoded.body_bytes)
        events, failures = EVENTS.validate(decoded.items, intake)
        if malformed:
            bad = {f.index for f in malformed}
            failures = sorted([f for f in failures if f.index not in bad] + malformed, key=lambda f: f.index)
        return events, failures
