"""`POST /track`, `GET /track` (and `/track/`): client-side event ingestion (semantics §6.2).

read (bounded) → [authenticate, if an `Authorization` header came] → decode → find each
event's project → validate → sink → answer. The answer is sent only after the sink made
the accepted events durable, as for `/import`; errors are raised (`FootfallError`) and
answered by the ingestion renderer in the shape this request asked for
(`request.state.answer`, a `responses.TrackAnswer`: pixel, JSONP, strict JSON, verbose
JSON or `1`/`0`).

What is accepted:

* Bodies: `data=<JSON or base64 JSON>` in a urlencoded form body or the query string (an
  event object or an array), a JSON array or object (`application/json`), NDJSON, each
  optionally `Content-Encoding: gzip` (bounded inflation; all of it is `decode.py`, shared
  with `/import`). A body without a content type, or `text/plain` (what `sendBeacon` sends
  for a string, which mixpanel-js uses when a page unloads), is read as JSON when it starts
  with `[` or `{` and as a form otherwise. At most 2000 events and 2 MB uncompressed
  (`FOOTFALL_IMPORT_MAX_*`).
* Flags `verbose`, `ip`, `img`, `strict`, `callback` from the query string, else from the
  form body (mixpanel-python sends `verbose=1&ip=0` in its form); a flag is on when it is
  `1`. `test=1`, `_`, `api_key` and other parameters are ignored.
* Project: each event's `properties.token`, looked up like a project token (keyed hash,
  `Authenticator.project_for_token`); one body may hold events of several projects. An
  event without a known token is a failed record (reason "token"). HTTP Basic credentials
  (a token, the project secret, or a service account with `project_id`, exactly as
  `/import` accepts them, checked off the event loop) are accepted too; then events
  without a token go to that project and an event whose token is another project's (or
  unknown) is a failed record. Bad credentials are refused as a whole (401/403).
* Events: the import validator and limits with `TrackRules` (`shared/events/validate.py`):
  a missing `time` is the receive time, events more than 5 days old fail ("use /import
  for events older than 5 days"), a missing `$insert_id` is derived from the content (so
  a retried body deduplicates; an event without `time` gets a new receive time on retry
  and so is a new event — every official client sends `time`).
* `ip=1`: the client's address is used for geolocation when the event has no `ip`
  property (an `ip` property, even `0`, wins). The address is the TCP peer, or with
  `FOOTFALL_TRUSTED_PROXIES` the right-most untrusted hop of `X-Forwarded-For`
  (`addresses.py`). It is never stored (enrichment drops `ip`) and never part of a derived
  `$insert_id`. Without `ip=1` (the ingestion spec: "if present and equal to 1") no request
  address is used.

Decisions where the spec is silent or loose:

* A missing `distinct_id` fails as on `/import`: the spec's "compute a distinct_id by
  hashing the request IP" would store a pseudonym of the address, which Footfall never
  stores; every official client sends one.
* Answers (`TrackAnswer`): `1` when at least one event was accepted, else `0` (an empty
  array too), status 200 — per-event failures are not request errors. `verbose=1` gives
  the first failure's message. `strict=1` with a JSON or NDJSON body (sent by hand-written
  clients that expect `/import`'s answers, e.g. `/track?strict=1`) answers like `/import`
  strict: `{"code": 200, "num_records_imported": N, "status": "OK"}`, or 400 with
  `failed_records` while the valid events are kept; the `/track` rules stay (`time` and
  `$insert_id` may be missing; an invalid `$insert_id` fails). Request errors keep their
  status (400, 413, 415, 503 with `Retry-After` — mixpanel-js halves its batch on 413 and
  retries on 5xx/429); 401/403 are `{"error", "status": "error"}`. `img=1` answers the
  GIF whatever happened; `callback=fn` must be an identifier path (`mp.cb_1`,
  `mixpanel._jsc[123]`) or mixpanel-js's `(function(){})`, else 400.
* Rate limit: each project found in the body is charged its items (valid or not) against
  the import rate limit shared with `/import` (`ratelimit.py`); a body over any project's
  budget is refused whole with 429 and `Retry-After`, before anything is published.
* CORS: answers echo the request's `Origin` with credentials allowed (mixpanel-js uses
  `withCredentials`), so browser SDKs pointed at Footfall can read them; `OPTIONS` answers
  preflights (custom `xhr_headers`, JSON bodies).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.gateway.addresses import Network, client_ip
from footfall.services.gateway.decode import (
    FORM_TYPES,
    JSON_TYPES,
    NDJSON_TYPES,
    MalformedItem,
    RequestFlags,
    decode_body,
    form_fields,
    media_type,
    sniff_content_type,
    too_large,
    too_many,
)
from footfall.services.gateway.ratelimit import RateLimiter, split_bytes
from footfall.services.gateway.responses import TrackAnswer, client_address, preflight, valid_callback
from footfall.services.gateway.sinks import Sink
from footfall.shared import metrics
from footfall.shared.auth import Authenticator, Principal
from footfall.shared.config import ImportLimits
from footfall.shared.errors import FootfallError, UnavailableError
from footfall.shared.events import Event, Failure
from footfall.shared.events.validate import TrackRules, validate_event
from footfall.shared.streams import EVENTS
from footfall.shared.web import read_body

__all__ = ["TrackEndpoint"]

log = structlog.get_logger(__name__)

_WIRE_SLACK = 1.05  # as /import: gzip of incompressible data is slightly larger than the data
_STRICT_TYPES = (*JSON_TYPES, *NDJSON_TYPES)
_JSON_TYPES = {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}


def _token_failure(index: int, props: dict[Any, Any], problem: str) -> Failure:
    iid = props.get("$insert_id")
    if type(iid) is str:
        try:
            iid.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates cannot be echoed in a JSON body
            iid = None
    else:
        iid = None
    return Failure(index, iid, "properties.token", f"'properties.token' is invalid: {problem}", "token")


def _set_answer(
    request: Request, params: Mapping[str, str], fields: Mapping[str, str], strict_body: bool
) -> TrackAnswer:
    """The shape this request's answer (and error) takes, kept on `request.state.answer` for the
    ingestion renderer. A bad `callback` is refused (400) in the shape without it."""
    flags = RequestFlags(params, fields)
    answer = TrackAnswer(
        verbose=flags.on("verbose"),
        img=flags.on("img"),
        strict=strict_body and flags.on("strict"),
        origin=request.headers.get("origin"),
    )
    request.state.answer = answer
    callback = flags.get("callback")
    if callback:
        if not valid_callback(callback):
            raise FootfallError(
                400, "callback must be a JavaScript function name: identifiers joined by '.' (e.g. mp.cb_1)"
            )
        answer = request.state.answer = replace(answer, callback=callback)
    return answer


@dataclass
class TrackEndpoint:
    authenticator: Authenticator
    sink: Sink
    limits: ImportLimits
    trusted_proxies: tuple[Network, ...] = ()
    rate: RateLimiter | None = None

    async def handle(self, request: Request) -> Response:
        origin = request.headers.get("origin")
        if request.method == "OPTIONS":
            return preflight(origin, request.headers.get("access-control-request-headers"))
        received_ms = int(time.time() * 1000)
        params = request.query_params
        content_type = request.headers.get("content-type")
        content_encoding = request.headers.get("content-encoding")
        identity = (content_encoding or "").strip().lower() in ("", "identity")
        strict_body = media_type(content_type) in _STRICT_TYPES
        _set_answer(request, params, {}, strict_body)
        raw = await self._read(request)
        kind = sniff_content_type(content_type, content_encoding, raw)
        if media_type(kind) in FORM_TYPES and identity:
            # The form's own flags (verbose, ip, ...) decide the answer, errors included.
            _set_answer(request, params, form_fields(raw), False)
        if not raw.strip() and params.get("data") is None:
            raise FootfallError(400, "no events: send data=<JSON or base64 JSON> (query string or form body)")

        principal = None
        header = request.headers.get("authorization")
        if header is not None:
            principal = await self.authenticator.for_import_async(
                header, params.get("project_id"), client=client_address(request)
            )
        decoded = decode_body(
            raw,
            content_type=kind,
            content_encoding=content_encoding,
            query_data=params.get("data"),
            limit=self.limits.max_request_bytes,
            max_items=self.limits.max_events_per_request,
        )
        flags = RequestFlags(params, decoded.fields)
        answer = _set_answer(request, params, decoded.fields, strict_body and not decoded.legacy)
        if len(decoded.items) > self.limits.max_events_per_request:
            raise too_many(len(decoded.items), self.limits.max_events_per_request)

        address = None
        if flags.on("ip"):
            forwarded = request.headers.getlist("x-forwarded-for")
            address = client_ip(client_address(request), forwarded, self.trusted_proxies)
        rules = TrackRules(client_ip=address)
        items = decoded.items
        events, failures, counts = self._validate(
            items, decoded.body_bytes, principal, rules, answer.strict, received_ms
        )
        if self.rate is not None:
            # Each project is charged its items (valid or not); a refused body stores nothing.
            await self.rate.charge(split_bytes(decoded.body_bytes, counts))
        if events:
            try:
                await self.sink.publish(EVENTS, events)
            except UnavailableError as exc:
                log.warning("track_unavailable", error=exc.message)
                raise

        metrics.EVENTS_IMPORTED.labels("track").inc(len(events))
        for failure in failures:
            metrics.EVENTS_REJECTED.labels("track", failure.reason).inc()
        return answer.result(len(events), failures)

    async def _read(self, request: Request) -> bytes:
        limit = self.limits.max_request_bytes
        return await read_body(request, int(limit * _WIRE_SLACK) + 1024, message=too_large(limit).message)

    def _validate(
        self,
        items: list[Any],
        body_bytes: int,
        principal: Principal | None,
        rules: TrackRules,
        strict: bool,
        now_ms: int,
    ) -> tuple[list[Event], list[Failure], dict[int, int]]:
        """The events, the failures and the number of items of each project found."""
        events: list[Event] = []
        failures: list[Failure] = []
        counts: dict[int, int] = {}
        projects: dict[str, int | None] = {}  # token → project id, one lookup per distinct token
        limits = self.limits
        known_keys: set[str] = set()  # property names found plain, shared by the request's items
        for index, raw in enumerate(items):
            if isinstance(raw, MalformedItem):
                failures.append(Failure(index, None, "", raw.message, "malformed"))
                continue
            project = self._project(index, raw, principal, projects)
            if type(project) is not int:
                failures.append(project)  # type: ignore[arg-type]
                continue
            if project:
                counts[project] = counts.get(project, 0) + 1
            result = validate_event(
                raw,
                index,
                project_id=project,
                strict=strict,
                limits=limits,
                now_ms=now_ms,
                body_bytes=body_bytes,
                track=rules,
                known_keys=known_keys,
            )
            if type(result) is Event:
                events.append(result)
            else:
                failures.append(result)  # type: ignore[arg-type]
        return events, failures, counts

    def _project(
        self, index: int, raw: Any, principal: Principal | None, known: dict[str, int | None]
    ) -> int | Failure:
        """The project an item belongs to, or its failure."""
        props = raw.get("properties") if type(raw) is dict else None
        if type(props) is not dict:
            # Not an event at all: the validator refuses its shape before the project matters.
            return principal.project_id if principal is not None else 0
        token = props.get("token")
        if token is None or token == "":
            if principal is not None:
                return principal.project_id
            return _token_failure(index, props, "is required: the project token names the project")
        if type(token) is not str:
            return _token_failure(index, props, f"must be a string, got {_JSON_TYPES.get(type(token), 'a non-string')}")
        if token in known:
            project = known[token]
        else:
            found = self.authenticator.project_for_token(token)
            project = known[token] = found.project_id if found is not None else None
        if principal is not None:
            if project != principal.project_id:
                return _token_failure(
                    index, props, f"is not the token of project {principal.project_id}, which the credentials name"
                )
            return principal.project_id
        if project is None:
            return _token_failure(index, props, "is not a known project token")
        return project
