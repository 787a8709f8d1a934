"""`POST /import`: authenticate → read (bounded) → decode → validate → sink → answer.

The answer is sent only after the sink made the accepted events durable. A client
mistake is always a JSON error (or the legacy `0`), never a 500.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from footfall.services.gateway.decode import (
    FORM_TYPES,
    DecodedBody,
    MalformedItem,
    decode_body,
    form_fields,
    media_type,
    too_large,
    too_many,
)
from footfall.shared.errors import FootfallError
from footfall.services.gateway.responses import json_error, legacy_result, strict_result
from footfall.services.gateway.sinks import Sink
from footfall.shared import metrics
from footfall.shared.auth import Authenticator, AuthError
from footfall.shared.config import ImportLimits
from footfall.shared.events import Event, Failure, validate_batch
from footfall.shared.streams import EVENTS

log = structlog.get_logger(__name__)

# gzip of incompressible data is slightly larger than the data; allow that much slack
# on the wire before the uncompressed limit is checked.
_WIRE_SLACK = 1.05


@dataclass
class ImportEndpoint:
    authenticator: Authenticator
    sink: Sink
    limits: ImportLimits

    async def handle(self, request: Request) -> Response:
        params = request.query_params
        strict = params.get("strict") == "1"
        verbose = params.get("verbose") == "1"
        # Form mode (old SDKs) is answered in its own shape, errors included; its
        # `verbose` flag may travel in the form body, so such bodies are read before
        # authenticating. Every other body is read only once the caller is known.
        legacy = "data" in params or media_type(request.headers.get("content-type")) in FORM_TYPES
        try:
            raw = await self._read(request) if legacy else b""
            if legacy and not verbose:
                verbose = form_fields(raw).get("verbose") == "1"
            principal = await self.authenticator.for_import_async(
                request.headers.get("authorization"), params.get("project_id")
            )
            if not legacy:
                raw = await self._read(request)
            decoded = self._decode(request, raw)
            if len(decoded.items) > self.limits.max_events_per_request:
                raise too_many(len(decoded.items), self.limits.max_events_per_request)
            events, failures = self._validate(decoded, principal.project_id, strict)
            await self.sink.publish(EVENTS, events)
        except AuthError as exc:
            return self._error(exc.status, exc.message, legacy=legacy, verbose=verbose)
        except FootfallError as exc:
            if exc.status == 503:
                log.warning("import_unavailable", error=exc.message)
            return self._error(exc.status, exc.message, legacy=legacy, verbose=verbose, retry_after=exc.retry_after)
        except ClientDisconnect:
            return Response(status_code=400)

        metrics.EVENTS_IMPORTED.labels("import").inc(len(events))
        for failure in failures:
            metrics.EVENTS_REJECTED.labels(failure.reason).inc()
        if decoded.legacy:
            ok = bool(events) or not failures
            return legacy_result(ok, verbose=verbose, error=failures[0].message if failures else None)
        return strict_result(len(events), failures if strict else [])

    async def _read(self, request: Request) -> bytes:
        """The raw body, refused with 413 as soon as it passes the wire limit."""
        limit = self.limits.max_request_bytes
        wire_limit = int(limit * _WIRE_SLACK) + 1024
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > wire_limit:
            raise too_large(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > wire_limit:
                raise too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def _decode(self, request: Request, raw: bytes) -> DecodedBody:
        return decode_body(
            raw,
            content_type=request.headers.get("content-type"),
            content_encoding=request.headers.get("content-encoding"),
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
        events, failures = validate_batch(
            decoded.items,
            project_id=project_id,
            strict=strict,
            limits=self.limits,
            now_ms=int(time.time() * 1000),
            body_bytes=decoded.body_bytes,
        )
        if malformed:
            bad = {f.index for f in malformed}
            failures = sorted([f for f in failures if f.index not in bad] + malformed, key=lambda f: f.index)
        return events, failures

    @staticmethod
    def _error(
        status: int, message: str, *, legacy: bool, verbose: bool, retry_after: int | None = None
    ) -> Response:
        if legacy:
            response = legacy_result(False, verbose=verbose, error=message, status_code=status)
            if retry_after is not None:
                response.headers["Retry-After"] = str(retry_after)
            return response
        return json_error(status, message, retry_after=retry_after)
