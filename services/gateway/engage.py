"""`POST /engage` and `POST /groups` (also `GET` with `data=`): profile and group updates
(semantics §6.3). The same endpoint serves both streams: user profile updates
(`USER_UPDATES`) and group profile updates (`GROUP_UPDATES`).

read (bounded) → [authenticate, if an `Authorization` header came] → decode → validate
(`footfall.shared.profiles.updates`) → sink → answer, after the sink made the updates
durable. Errors are raised and answered by the ingestion renderer in the shape this request
asked for (`request.state.answer`).

* Bodies: a JSON array of update objects (or one object), NDJSON, or `data=<JSON or base64
  JSON>` in a urlencoded form body or the query string, optionally gzip; at most 2000
  updates and 2 MB uncompressed (`FOOTFALL_IMPORT_MAX_*`). Untyped and `text/plain` bodies
  are sniffed as JSON or form, as on `/track`.
* Project: each update's `$token`, or the request's HTTP Basic credentials (a token, the
  project secret, or a service account with `project_id` and role Owner or Admin, exactly
  as `/import` takes them, except that `project_id` may also come in a urlencoded form body,
  where mixpanel-utils puts it); with credentials, a `$token` of another project is a
  failed update.
* `ip`: on by default (`ip=0` turns it off, as server-side clients send): an update
  without `$ip` is geolocated from the client's address (the TCP peer, or the right-most
  untrusted hop of `X-Forwarded-For` behind `FOOTFALL_TRUSTED_PROXIES`). The address sets
  `$city`, `$region`, `mp_country_code` on the profile and is never stored.
* Answers: `1` when at least one update was accepted, else `0`; `{"status", "error"}` with
  `verbose=1`; `callback=fn` as on `/track`. With `strict=1`: `{"code": 200, "status":
  "OK", "num_good_events": N}` when every update was accepted, else 400 `{"code": 400,
  "status": "Bad Request", "num_good_events": N, "failed_records": [{"index",
  "$distinct_id", "field", "message"}]}` — the valid updates are still applied. When the
  store runs inline (`footfall serve` without Kafka), updates it refused (a type clash
  with the profile, or the profile limits) are failed records too; through Kafka the
  workers refuse them later and count them (`footfall_items_refused_total`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.gateway.addresses import Network, client_ip
from footfall.services.gateway.decode import (
    MalformedItem,
    RequestFlags,
    decode_body,
    form_fields,
    media_type,
    sniff_content_type,
    too_large,
    too_many,
)
from footfall.services.gateway.responses import (
    OrjsonResponse,
    TrackAnswer,
    client_address,
    preflight,
    valid_callback,
)
from footfall.services.gateway.sinks import Sink
from footfall.shared import metrics
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.errors import FootfallError, UnavailableError
from footfall.shared.profiles.updates import ProfileUpdate, UpdateFailure
from footfall.shared.streams import Intake, Stream
from footfall.shared.web import read_body

__all__ = ["UpdatesAnswer", "UpdatesEndpoint"]

log = structlog.get_logger(__name__)

_WIRE_SLACK = 1.05  # as /import: gzip of incompressible data is slightly larger than the data
_REFUSALS = {
    "type_clash": "does not fit the profile's current value (a number is needed for $add, a list for "
    "$union, $append and $remove)",
    "limit": "would take the profile past its limits (255 properties, nesting 3 levels, lists under 255)",
}


@dataclass(frozen=True)
class UpdatesAnswer(TrackAnswer):
    """`/track`'s answer shapes (`1`/`0`, verbose, callback), with the strict body of profile
    updates (`num_good_events`)."""

    def updates_result(self, accepted: int, failures: Sequence[UpdateFailure]) -> Response:
        if not self.strict or self.callback is not None:
            return replace(self, strict=False).result(accepted, failures)
        body: dict[str, Any] = {"code": 200, "status": "OK", "num_good_events": accepted}
        if failures:
            body = {
                "code": 400,
                "status": "Bad Request",
                "error": "some updates in the request failed validation",
                "num_good_events": accepted,
                "failed_records": [f.as_record() for f in failures],
            }
        response = OrjsonResponse(body, status_code=body["code"])
        response.headers.update(self.headers())
        return response


@dataclass
class UpdatesEndpoint:
    stream: Stream[ProfileUpdate]
    authenticator: Authenticator
    sink: Sink
    limits: ImportLimits
    trusted_proxies: tuple[Network, ...] = ()

    async def handle(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return preflight(request.headers.get("origin"), request.headers.get("access-control-request-headers"))
        received_ms = int(time.time() * 1000)
        params = request.query_params
        content_type = request.headers.get("content-type")
        content_encoding = request.headers.get("content-encoding")
        answer = self._answer(request, RequestFlags(params, {}))
        raw = await read_body(
            request,
            int(self.limits.max_request_bytes * _WIRE_SLACK) + 1024,
            message=too_large(self.limits.max_request_bytes).message,
        )
        kind = sniff_content_type(content_type, content_encoding, raw)
        identity = (content_encoding or "").strip().lower() in ("", "identity")
        form: dict[str, str] = {}
        if media_type(kind) == "application/x-www-form-urlencoded" and identity:
            form = form_fields(raw)
            answer = self._answer(request, RequestFlags(params, form))
        if not raw.strip() and params.get("data") is None:
            raise FootfallError(400, "no updates: send a JSON array of updates, or data=<JSON or base64 JSON>")

        project_id = 0
        header = request.headers.get("authorization")
        if header is not None:
            # `project_id` from the query string, else the form body: mixpanel-utils posts
            # `data=<base64>&project_id=<id>` to /engage with a service account.
            principal = await self.authenticator.for_import_async(
                header, RequestFlags(params, form).get("project_id"), client=client_address(request)
            )
            project_id = principal.project_id
        decoded = decode_body(
            raw,
            content_type=kind,
            content_encoding=content_encoding,
            query_data=params.get("data"),
            limit=self.limits.max_request_bytes,
            max_items=self.limits.max_events_per_request,
        )
        flags = RequestFlags(params, decoded.fields)
        answer = self._answer(request, flags)
        if len(decoded.items) > self.limits.max_events_per_request:
            raise too_many(len(decoded.items), self.limits.max_events_per_request)

        updates, positions, failures = self._validate(decoded.items, project_id, decoded.body_bytes, received_ms)
        if flags.get("ip") != "0":
            address = client_ip(
                client_address(request), request.headers.getlist("x-forwarded-for"), self.trusted_proxies
            )
            if address is not None:
                updates = [u if u.ip is not None else u._replace(ip=address) for u in updates]
        refused: dict[int, str] = {}
        if updates:
            try:
                refused = await self.sink.publish(self.stream, updates)
            except UnavailableError as exc:
                log.warning("updates_unavailable", stream=self.stream.name, error=exc.message)
                raise
        for i, reason in refused.items():
            u = updates[i]
            field = u.op
            failures.append(UpdateFailure(positions[i], u.profile_id, field, f"{field} {_REFUSALS[reason]}", reason))
        failures.sort(key=lambda f: f.index)
        accepted = len(updates) - len(refused)
        metrics.ITEMS_ACCEPTED.labels(self.stream.name).inc(accepted)
        for failure in failures:
            metrics.ITEMS_REJECTED.labels(self.stream.name, failure.reason).inc()
        return answer.updates_result(accepted, failures)

    def _answer(self, request: Request, flags: RequestFlags) -> UpdatesAnswer:
        callback = flags.get("callback")
        answer = UpdatesAnswer(
            verbose=flags.on("verbose"), strict=flags.on("strict"), origin=request.headers.get("origin")
        )
        request.state.answer = answer
        if callback:
            if not valid_callback(callback):
                raise FootfallError(400, "callback must be a JavaScript function name (e.g. mp.cb_1)")
            answer = request.state.answer = replace(answer, callback=callback)
        return answer

    def _validate(
        self, items: list[Any], project_id: int, body_bytes: int, now_ms: int
    ) -> tuple[list[ProfileUpdate], list[int], list[UpdateFailure]]:
        """The valid updates with their positions in the body, and the failures."""
        tokens: dict[str, int | None] = {}

        def project_of_token(token: str) -> int | None:
            if token not in tokens:
                found = self.authenticator.project_for_token(token)
                tokens[token] = found.project_id if found is not None else None
            return tokens[token]

        positions = [i for i, item in enumerate(items) if not isinstance(item, MalformedItem)]
        failures = [
            UpdateFailure(i, None, "", item.message, "malformed")
            for i, item in enumerate(items)
            if isinstance(item, MalformedItem)
        ]
        intake = Intake(project_id, True, self.limits, now_ms, body_bytes, project_of_token)
        updates, invalid = self.stream.validate([items[i] for i in positions], intake)
        for failure in invalid:
            failures.append(replace(failure, index=positions[failure.index]))
        failed = {f.index for f in invalid}
        return updates, [p for i, p in enumerate(positions) if i not in failed], failures
