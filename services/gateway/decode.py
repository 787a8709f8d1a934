"""Turn an `/import` request body into a list of raw JSON items.

Accepted forms: a JSON array (`application/json`), NDJSON (`application/x-ndjson`),
either optionally gzip-compressed, and the legacy form mode (`data=<JSON or base64 JSON>`
in a form body or the query string). Decompression is bounded: output beyond the
request limit is never produced, so a gzip bomb costs at most `max_request_bytes`.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson

from footfall.shared.errors import FootfallError

JSON_TYPES = ("application/json", "text/json")
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")
FORM_TYPES = ("application/x-www-form-urlencoded",)
_INFLATE_FEED = 4096  # compressed bytes handed to zlib per call


@dataclass(frozen=True, slots=True)
class MalformedItem:
    """An NDJSON line that is not JSON: reported as a failed record, not a failed request."""

    message: str


@dataclass(frozen=True)
class DecodedBody:
    items: list[Any]
    body_bytes: int  # uncompressed size
    legacy: bool  # form mode (`data=`): answered with 1/0 or {"status", "error"}
    fields: dict[str, str] = field(default_factory=dict)  # other form fields (verbose, ip, api_key)


def too_large(limit: int) -> FootfallError:
    return FootfallError(413, f"request exceeds max limit of {limit} bytes")


def gunzip_bounded(raw: bytes, limit: int) -> bytes:
    """Inflate gzip (or zlib) data, refusing as soon as the output would pass `limit` bytes.

    Concatenated gzip members (RFC 1952 §2.2) are inflated one after the other, and NUL
    padding between or after them is ignored, as gzip(1) does. A stream that ends before
    its trailer (so its checksum was never checked) or holds anything else is invalid.
    Input is fed in small slices, so a body of many tiny members costs linear time.
    """
    pieces: list[bytes] = []
    size = 0
    members = 0
    view = memoryview(raw)
    pos = 0
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, auto-detected
    started = False  # the current member has been given input
    pending = b""  # input that followed the end of the previous member
    while True:
        if pending:
            data, pending = pending, b""
        elif pos < len(raw):
            data = bytes(view[pos : pos + _INFLATE_FEED])
            pos += len(data)
        else:
            break
        if not started:
            data = data.lstrip(b"\0")
            if not data:
                continue
            started = True
        try:
            piece = inflater.decompress(data, limit + 1 - size)  # max_length >= 1: never unbounded
        except zlib.error:
            raise FootfallError(400, "body is not valid gzip data") from None
        size += len(piece)
        if size > limit or inflater.unconsumed_tail:
            raise too_large(limit)
        pieces.append(piece)
        if inflater.eof:
            members += 1
            pending = inflater.unused_data
            inflater = zlib.decompressobj(wbits=47)
            started = False
    if started or not members:
        raise FootfallError(400, "body is not valid gzip data (truncated)")
    return b"".join(pieces)


def parse_json(data: bytes | str) -> Any:
    """orjson first; invalid UTF-8 falls back to a decode that keeps the bad bytes as lone
    surrogates, so the validator can reject just the events that carry them."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise FootfallError(400, "malformed JSON body") from None


def too_many(count: int, limit: int) -> FootfallError:
    return FootfallError(400, f"too many events in one request: {count} (at most {limit})")


def _parse_ndjson(data: bytes, max_items: int | None = None) -> list[Any]:
    lines = [line for line in data.splitlines() if line.strip()]
    if max_items is not None and len(lines) > max_items:
        # Counted before parsing: a body of a million broken lines costs no million parses.
        raise too_many(len(lines), max_items)
    items: list[Any] = []
    for line in lines:
        try:
            items.append(parse_json(line))
        except FootfallError:
            items.append(MalformedItem("malformed JSON line"))
    return items


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return [value]
    raise FootfallError(400, "body must be a JSON array of events")


def decode_legacy_data(value: str) -> list[Any]:
    """`data=` holds raw JSON (mixpanel-python) or base64 JSON (mixpanel-node, old docs)."""
    text = value.strip()
    if text[:1] in ("{", "["):
        return _as_list(parse_json(text.encode("utf-8", "surrogateescape")))
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/").replace(" ", "+"), validate=True)
    except (binascii.Error, ValueError):
        raise FootfallError(400, "data is neither JSON nor base64-encoded JSON") from None
    return _as_list(parse_json(raw))


def form_fields(data: bytes) -> dict[str, str]:
    """First value of each field of a urlencoded form body."""
    form = parse_qs(data.decode("utf-8", "surrogateescape"), keep_blank_values=True)
    return {k: v[0] for k, v in form.items() if v}


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(raw: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body as sent before its Content-Encoding, at most `limit` bytes (else 413)."""
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        return gunzip_bounded(raw, limit)
    if encoding in ("", "identity"):
        if len(raw) > limit:
            raise too_large(limit)
        return raw
    raise FootfallError(415, f"unsupported Content-Encoding {content_encoding!r} (use gzip)")


def decode_body(
    raw: bytes,
    *,
    content_type: str | None,
    content_encoding: str | None,
    query_data: str | None,
    limit: int,
    max_items: int | None = None,
) -> DecodedBody:
    data = decompress(raw, content_encoding, limit)
    return decode_data(data, content_type=content_type, query_data=query_data, limit=limit, max_items=max_items)


def decode_data(
    data: bytes, *, content_type: str | None, query_data: str | None, limit: int, max_items: int | None = None
) -> DecodedBody:
    """`decode_body` of a body already decompressed."""
    kind = media_type(content_type)
    if query_data is not None and not data.strip():
        if len(query_data) > limit:
            raise too_large(limit)
        return DecodedBody(decode_legacy_data(query_data), len(query_data), legacy=True)
    if kind in FORM_TYPES:
        fields = form_fields(data)
        value = fields.pop("data", None) or query_data
        if value is None:
            raise FootfallError(400, "form body has no data field")
        return DecodedBody(decode_legacy_data(value), len(data), legacy=True, fields=fields)
    if kind in JSON_TYPES:
        return DecodedBody(_as_list(parse_json(data)), len(data), legacy=False)
    if kind in NDJSON_TYPES:
        return DecodedBody(_parse_ndjson(data, max_items), len(data), legacy=False)
    if not kind and not data.strip():
        raise FootfallError(400, "empty body: send a JSON array of events")
    if not kind:
        raise FootfallError(
            415,
            "the request has no Content-Type header: send 'Content-Type: application/json' with a JSON array "
            "of events, or 'Content-Type: application/x-ndjson' with one event per line",
        )
    raise FootfallError(
        415, f"unsupported Content-Type {kind or '(none)'!r}: use application/json or application/x-ndjson"
    )


def sniff_content_type(content_type: str | None, content_encoding: str | None, raw: bytes) -> str | None:
    """The content type to decode by: a missing or `text/plain` one is sniffed (JSON or form)."""
    if media_type(content_type) not in ("", "text/plain"):
        return content_type
    if (content_encoding or "").strip().lower() not in ("", "identity") or not raw.strip():
        return content_type
    return JSON_TYPES[0] if raw.lstrip()[:1] in (b"[", b"{") else FORM_TYPES[0]


class RequestFlags:
    """Request flags: the query string's, else the form body's."""

    def __init__(self, params: Mapping[str, str], fields: Mapping[str, str]) -> None:
        self.params = params
        self.fields = fields

    def get(self, name: str) -> str | None:
        found = self.params.get(name)
        return found if found is not None else self.fields.get(name)

    def on(self, name: str) -> bool:
        return self.get(name) == "1"
