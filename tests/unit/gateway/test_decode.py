"""Decoding `/import` bodies (`services.gateway.decode`): JSON, NDJSON, gzip, legacy `data=`.

Mostly `decode_body` directly (pure); the size and gzip-bomb limits also over HTTP, where
the body is read in chunks before it is decoded.
"""

from __future__ import annotations

import base64
import gzip
import json
import struct
import time
import tracemalloc
import zlib
from typing import Any
from urllib.parse import quote

import pytest

from footfall.services.gateway.decode import DecodedBody, MalformedItem, decode_body, decode_legacy_data
from footfall.shared.config import ImportLimits
from footfall.shared.errors import FootfallError

LIMIT = 2 * 1024 * 1024
EV: dict[str, Any] = {
    "event": "Page View",
    "properties": {"time": 1_700_000_000, "distinct_id": "u1", "$insert_id": "i1"},
}
EV2: dict[str, Any] = {
    "event": "Sign Up",
    "properties": {"time": 1_700_000_001, "distinct_id": "u2", "$insert_id": "i2"},
}


def decode(
    raw: bytes,
    content_type: str | None = "application/json",
    content_encoding: str | None = None,
    query_data: str | None = None,
    limit: int = LIMIT,
    max_items: int | None = None,
) -> DecodedBody:
    return decode_body(
        raw,
        content_type=content_type,
        content_encoding=content_encoding,
        query_data=query_data,
        limit=limit,
        max_items=max_items,
    )


def status_of(raw: bytes, **kwargs: Any) -> int:
    with pytest.raises(FootfallError) as err:
        decode(raw, **kwargs)
    return err.value.status


def gzip_bomb(total: int = 1 << 30, chunk: int = 1 << 20) -> bytes:
    """A valid gzip stream of `total` zero bytes (about 1000:1), built without holding them.

    After a full flush the compressor has no history, so every further chunk of zeros
    compresses to the same bytes: the stream is a first piece, a repeated piece and a
    final block, with the trailer (CRC-32, size) computed separately."""
    zeros = bytes(chunk)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    middle = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) == middle
    end = c.flush(zlib.Z_FINISH)[:-8]  # final empty block, without the trailer for 3 chunks
    n = total // chunk
    crc = 0
    for _ in range(n):
        crc = zlib.crc32(zeros, crc)
    return first + middle * (n - 1) + end + struct.pack("<II", crc, total & 0xFFFFFFFF)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    data = gzip_bomb()
    assert len(data) < 1_200_000  # ~1 MB on the wire: well under the request limit
    # It really inflates: the first 8 MB come out of an independent decoder.
    probe = zlib.decompressobj(wbits=31)
    assert len(probe.decompress(data, 8 << 20)) == 8 << 20
    return data


# -- JSON ------------------------------------------------------------------------------------


def test_json_array() -> None:
    raw = json.dumps([EV, EV2]).encode()
    body = decode(raw)
    assert body.items == [EV, EV2]
    assert body.body_bytes == len(raw)
    assert body.legacy is False


def test_json_single_object_is_a_batch_of_one() -> None:
    assert decode(json.dumps(EV).encode()).items == [EV]


def test_json_empty_array() -> None:
    assert decode(b"[]").items == []


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", " application/json ;x=y", "text/json"],
    ids=["plain", "charset", "case", "spaces-params", "text-json"],
)
def test_json_content_type_variants(content_type: str) -> None:
    assert decode(json.dumps([EV]).encode(), content_type=content_type).items == [EV]


@pytest.mark.parametrize(
    "raw",
    [b"[", b"{]", b"[1,]", b"nope", b"", b"   ", b"[" * 100_000, b"[" * 50_000 + b"]" * 50_000, b"\xff\xfe"],
    ids=["open", "mismatch", "trailing-comma", "word", "empty", "blank", "deep-open", "deep-closed", "binary"],
)
def test_json_malformed_400(raw: bytes) -> None:
    assert status_of(raw) == 400


@pytest.mark.parametrize("raw", [b"1", b'"x"', b"null", b"true"], ids=["number", "string", "null", "bool"])
def test_json_scalar_body_400(raw: bytes) -> None:
    assert status_of(raw) == 400


def test_json_invalid_utf8_is_kept_for_the_validator() -> None:
    # Invalid UTF-8 inside a string is the event's problem, not the request's.
    raw = b'[{"event": "e", "properties": {"bad": "\xff"}}]'
    (item,) = decode(raw).items
    assert item["properties"]["bad"] == "\udcff"


# -- NDJSON ----------------------------------------------------------------------------------


def ndjson(*lines: bytes | dict[str, Any]) -> bytes:
    return b"\n".join(line if isinstance(line, bytes) else json.dumps(line).encode() for line in lines)


@pytest.mark.parametrize(
    "content_type",
    ["application/x-ndjson", "application/x-ndjson; charset=utf-8", "application/ndjson", "application/jsonl"],
    ids=["x-ndjson", "charset", "ndjson", "jsonl"],
)
def test_ndjson(content_type: str) -> None:
    assert decode(ndjson(EV, EV2) + b"\n", content_type=content_type).items == [EV, EV2]


def test_ndjson_blank_lines_and_crlf_are_skipped() -> None:
    raw = b"\n\n" + ndjson(EV) + b"\r\n   \r\n\t\n" + ndjson(EV2) + b"\r\n\n"
    assert decode(raw, content_type="application/x-ndjson").items == [EV, EV2]


def test_ndjson_malformed_line_is_a_failed_item_not_a_failed_request() -> None:
    raw = ndjson(EV, b"{not json", b"", EV2, b'{"event": "x"')
    items = decode(raw, content_type="application/x-ndjson").items
    assert len(items) == 4  # the blank line does not count
    assert items[0] == EV and items[2] == EV2
    assert isinstance(items[1], MalformedItem) and isinstance(items[3], MalformedItem)


def test_ndjson_lines_counted_before_parsing() -> None:
    # A 2 MB body of a million broken lines is refused by count, not parsed line by line.
    raw = b"{\n" * (1 << 20)
    started = time.perf_counter()
    with pytest.raises(FootfallError) as err:
        decode(raw, content_type="application/x-ndjson", max_items=2000)
    assert time.perf_counter() - started < 1.0
    assert err.value.status == 400
    assert err.value.message == "too many events in one request: 1048576 (at most 2000)"


def test_ndjson_at_max_items_accepted() -> None:
    raw = ndjson(*([EV] * 3)) + b"\n\n"
    assert len(decode(raw, content_type="application/x-ndjson", max_items=3).items) == 3
    with pytest.raises(FootfallError):
        decode(raw + ndjson(EV), content_type="application/x-ndjson", max_items=3)


def test_ndjson_empty_body_is_no_events() -> None:
    assert decode(b"", content_type="application/x-ndjson").items == []


# -- gzip ------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "GZIP", " gzip ", "x-gzip"], ids=["gzip", "upper", "spaces", "x-gzip"])
def test_gzip_json(encoding: str) -> None:
    raw = json.dumps([EV, EV2]).encode()
    body = decode(gzip.compress(raw), content_encoding=encoding)
    assert body.items == [EV, EV2]
    assert body.body_bytes == len(raw)  # the uncompressed size


def test_gzip_ndjson() -> None:
    body = decode(gzip.compress(ndjson(EV, b"", EV2)), content_type="application/x-ndjson", content_encoding="gzip")
    assert body.items == [EV, EV2]


def test_deflate_zlib_stream() -> None:
    assert decode(zlib.compress(json.dumps([EV]).encode()), content_encoding="deflate").items == [EV]


def test_identity_encoding() -> None:
    assert decode(json.dumps([EV]).encode(), content_encoding="identity").items == [EV]


def test_gzip_concatenated_members_are_all_read() -> None:
    # RFC 1952 §2.2: a gzip file is a series of members (pigz, streaming compressors).
    raw = gzip.compress(ndjson(EV) + b"\n") + gzip.compress(ndjson(EV2) + b"\n")
    assert gzip.decompress(raw) == ndjson(EV) + b"\n" + ndjson(EV2) + b"\n"
    assert decode(raw, content_type="application/x-ndjson", content_encoding="gzip").items == [EV, EV2]


@pytest.mark.parametrize(
    "raw",
    [
        b"not gzip at all",
        b"\x1f\x8b\x08\x00garbage-after-a-gzip-magic",
        gzip.compress(json.dumps([EV]).encode())[:-12],
        gzip.compress(json.dumps([EV]).encode())[:-4],
        gzip.compress(json.dumps([EV]).encode()) + b"trailing junk",
        b"",
    ],
    ids=["plain-text", "bad-header", "truncated-data", "truncated-trailer", "trailing-junk", "empty"],
)
def test_gzip_invalid_400(raw: bytes) -> None:
    assert status_of(raw, content_encoding="gzip") == 400


def test_gzip_corrupt_checksum_400() -> None:
    raw = bytearray(gzip.compress(json.dumps([EV]).encode()))
    raw[-8] ^= 0xFF  # CRC-32 of the trailer
    assert status_of(bytes(raw), content_encoding="gzip") == 400


def test_gzip_many_tiny_members_cost_linear_time() -> None:
    # 200,000 empty members (4 MB) must not cost quadratic copying (that took ~6 s).
    raw = gzip.compress(b"") * 200_000 + gzip.compress(json.dumps([EV]).encode())
    started = time.perf_counter()
    assert decode(raw, content_encoding="gzip").items == [EV]
    assert time.perf_counter() - started < 2.5


def test_gzip_trailing_zero_padding_tolerated() -> None:
    # Like gzip(1) and Python's gzip module: NUL padding after the last member is ignored.
    raw = gzip.compress(json.dumps([EV]).encode()) + b"\0" * 16
    assert decode(raw, content_encoding="gzip").items == [EV]


@pytest.mark.parametrize(
    "encoding", ["br", "compress", "zstd", "gzip, br", "gzip,gzip", "utf-8"], ids=lambda e: e.replace(" ", "")
)
def test_unsupported_content_encoding_415(encoding: str) -> None:
    assert status_of(json.dumps([EV]).encode(), content_encoding=encoding) == 415


def test_gzip_bomb_refused_fast_without_inflating(bomb: bytes) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(FootfallError) as err:
            decode(bomb, content_encoding="gzip")
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.status == 413
    assert elapsed < 2.0
    assert peak < 16 * 1024 * 1024  # inflated at most ~the 2 MB limit, never the 1 GB


def test_gzip_bomb_refused_over_http(make_gateway, creds, bomb: bytes) -> None:
    gateway = make_gateway()
    headers = {"content-type": "application/x-ndjson", "content-encoding": "gzip"}
    tracemalloc.start()
    started = time.perf_counter()
    try:
        r = gateway.post("/import?strict=1", content=bomb, headers=headers, auth=(creds.token, ""))
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 413, r.text
    assert r.json() == {
        "code": 413,
        "error": f"request exceeds max limit of {LIMIT} bytes",
        "status": "Request Entity Too Large",
    }
    assert elapsed < 5.0
    assert peak < 48 * 1024 * 1024
    assert gateway.sink.events == []


# -- size limit ------------------------------------------------------------------------------


def padded_array(size: int) -> bytes:
    """A JSON array of exactly `size` bytes."""
    base = json.dumps([EV]).encode()
    return base[:-1] + b" " * (size - len(base)) + b"]"


@pytest.mark.parametrize("limit", [1024, LIMIT], ids=["1KiB", "2MiB"])
def test_body_at_limit_accepted_and_one_more_byte_413(limit: int) -> None:
    assert decode(padded_array(limit), limit=limit).items == [EV]
    assert status_of(padded_array(limit + 1), limit=limit) == 413


@pytest.mark.parametrize("limit", [1024, LIMIT], ids=["1KiB", "2MiB"])
def test_gzip_inflated_at_limit_accepted_and_one_more_byte_413(limit: int) -> None:
    assert decode(gzip.compress(padded_array(limit)), content_encoding="gzip", limit=limit).items == [EV]
    assert status_of(gzip.compress(padded_array(limit + 1)), content_encoding="gzip", limit=limit) == 413


def test_gzip_members_together_over_limit_413() -> None:
    half = gzip.compress(b" " * 700)
    assert status_of(half + half, content_type="application/x-ndjson", content_encoding="gzip", limit=1024) == 413


def test_ndjson_over_limit_413() -> None:
    line = json.dumps(EV).encode() + b"\n"
    assert status_of(line * (1024 // len(line) + 1), content_type="application/x-ndjson", limit=1024) == 413


def test_legacy_query_data_over_limit_413() -> None:
    data = base64.b64encode(padded_array(2048)).decode()
    assert status_of(b"", content_type=None, query_data=data, limit=1024) == 413


def test_http_body_over_limit_413_and_at_limit_accepted(make_gateway, creds) -> None:
    limits = ImportLimits(max_request_bytes=4096)
    gateway = make_gateway(limits)
    ok = gateway.post("/import", content=padded_array(4096), headers={"content-type": "application/json"},
                      auth=(creds.token, ""))  # fmt: skip
    assert ok.status_code == 200, ok.text
    too_big = gateway.post("/import", content=padded_array(4097), headers={"content-type": "application/json"},
                           auth=(creds.token, ""))  # fmt: skip
    assert too_big.status_code == 413
    assert too_big.json()["error"] == "request exceeds max limit of 4096 bytes"


def test_http_huge_declared_length_refused_before_reading(make_gateway, creds) -> None:
    gateway = make_gateway(ImportLimits(max_request_bytes=1024))
    body = b"[" + b" " * (64 * 1024) + b"]"
    r = gateway.post("/import", content=body, headers={"content-type": "application/json"}, auth=(creds.token, ""))
    assert r.status_code == 413


# -- content type ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "multipart/form-data; boundary=x", "application/octet-stream", "json", None],
    ids=["text", "xml", "multipart", "octet-stream", "bare-word", "missing"],
)
def test_wrong_content_type_415(content_type: str | None) -> None:
    assert status_of(json.dumps([EV]).encode(), content_type=content_type) == 415


def test_missing_content_type_and_empty_body_400() -> None:
    assert status_of(b"", content_type=None) == 400


# -- legacy data= ----------------------------------------------------------------------------


def b64(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def urlsafe_unpadded(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_urlsafe_payload_really_differs_from_standard() -> None:
    # EV2 encodes with '-'/'_' and without padding in the url-safe alphabet; make sure the
    # case below tests what it says.
    value = [EV2, {"k": "??>>x"}]
    text = urlsafe_unpadded(value)
    assert ("-" in text or "_" in text) and len(text) % 4 != 0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (json.dumps(EV), [EV]),
        (json.dumps([EV, EV2]), [EV, EV2]),
        ("  " + json.dumps([EV]) + "\n", [EV]),
        (b64(EV), [EV]),
        (b64([EV, EV2]), [EV, EV2]),
        (urlsafe_unpadded([EV2, {"k": "??>>x"}]), [EV2, {"k": "??>>x"}]),
        (b64([EV]).rstrip("="), [EV]),
        (b64([EV]).replace("+", " "), [EV]),
    ],
    ids=["raw-object", "raw-array", "raw-whitespace", "b64-object", "b64-array", "urlsafe-unpadded", "unpadded",
         "plus-as-space"],
)  # fmt: skip
def test_decode_legacy_data(data: str, expected: list[Any]) -> None:
    assert decode_legacy_data(data) == expected


@pytest.mark.parametrize(
    "data",
    ["", "%%%", "not base64!", base64.b64encode(b"not json").decode(), base64.b64encode(b"42").decode(), "{broken"],
    ids=["empty", "percent", "words", "b64-not-json", "b64-scalar", "raw-broken"],
)
def test_decode_legacy_data_invalid_400(data: str) -> None:
    with pytest.raises(FootfallError) as err:
        decode_legacy_data(data)
    assert err.value.status == 400


@pytest.mark.parametrize("encode", [json.dumps, b64, urlsafe_unpadded], ids=["raw", "base64", "urlsafe"])
def test_legacy_form_body(encode: Any) -> None:
    raw = ("data=" + quote(encode([EV, EV2]), safe="") + "&verbose=1&ip=0").encode()
    body = decode(raw, content_type="application/x-www-form-urlencoded")
    assert body.items == [EV, EV2]
    assert body.legacy is True


@pytest.mark.parametrize("encode", [json.dumps, b64, urlsafe_unpadded], ids=["raw", "base64", "urlsafe"])
def test_legacy_query_string(encode: Any) -> None:
    body = decode(b"", content_type=None, query_data=encode([EV]))
    assert body.items == [EV]
    assert body.legacy is True


def test_legacy_form_without_data_400() -> None:
    assert status_of(b"verbose=1", content_type="application/x-www-form-urlencoded") == 400


def test_legacy_gzip_form_body() -> None:
    raw = gzip.compress(("data=" + quote(b64([EV]), safe="")).encode())
    body = decode(raw, content_type="application/x-www-form-urlencoded", content_encoding="gzip")
    assert body.items == [EV]


@pytest.mark.parametrize("encode", [json.dumps, b64, urlsafe_unpadded], ids=["raw", "base64", "urlsafe"])
def test_http_legacy_get_query_string(gateway, creds, encode: Any) -> None:
    ev = {"event": "e", "properties": {**EV["properties"], "time": int(time.time()) - 5}}
    r = gateway.get("/import?data=" + quote(encode(ev), safe=""), auth=(creds.token, ""))
    assert (r.status_code, r.text) == (200, "1")
    assert [e.insert_id for e in gateway.sink.events] == ["i1"]


@pytest.mark.parametrize("encode", [json.dumps, b64, urlsafe_unpadded], ids=["raw", "base64", "urlsafe"])
def test_http_legacy_form_post(gateway, creds, encode: Any) -> None:
    ev = {"event": "e", "properties": {**EV["properties"], "time": int(time.time()) - 5}}
    r = gateway.post("/import", data={"data": encode([ev]), "verbose": "1"}, auth=(creds.token, ""))
    assert r.status_code == 200
    assert r.json() == {"status": 1, "error": None}
    assert len(gateway.sink.events) == 1
