"""Hypothesis against `POST /import`: arbitrary bodies, headers, credentials and query strings.

Whatever arrives: the answer is never a 5xx (except the 503 of a failing sink), the body
is JSON (or the legacy `1`/`0`), the count the client is told matches what reached the
sink, and every event that reached the sink obeys the interface's rules. Those rules are
re-checked here from the spec, independently of `shared.events.validate`.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import time
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from footfall.shared.events import Event

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# -- the rules, from the spec ("Event (import)", "Limits") --------------------------------------

RESERVED = {
    "00000000-0000-0000-0000-000000000000", "anon", "anonymous", "nil", "none", "null", "n/a", "na",
    "undefined", "unknown", "<nil>", "0", "-1", "true", "false", "[]", "{}",
}  # fmt: skip
LIFTED = {"time", "distinct_id", "$insert_id", "token", "ip"}
TIME_FLOOR_MS = 31_536_000_000  # 1971-01-01T00:00:00Z
INSERT_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_value(value: Any, depth: int, path: str) -> None:
    """`depth`: keys/indices from `properties` down to `value` (properties.a is 1)."""
    assert depth <= 3, f"{path} nested deeper than 3"
    if isinstance(value, str):
        assert len(value) <= 255, f"{path} longer than 255 characters"
        assert utf8_ok(value), f"{path} is not valid UTF-8"
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        assert -(2**63) <= value <= 2**64 - 1, f"{path} integer out of range"
    elif isinstance(value, float):
        assert math.isfinite(value), f"{path} not finite"
    elif isinstance(value, dict):
        assert len(value) < 255, f"{path} has too many keys"
        for k, v in value.items():
            assert isinstance(k, str) and utf8_ok(k) and len(k) <= 255, f"{path} has a bad key {k!r}"
            check_value(v, depth + 1, f"{path}.{k}")
    elif isinstance(value, list):
        assert len(value) < 255, f"{path} has too many elements"
        for i, v in enumerate(value):
            check_value(v, depth + 1, f"{path}[{i}]")
    else:
        raise AssertionError(f"{path} has a non-JSON value of type {type(value).__name__}")


def check_event(e: Event, now_ms: int) -> None:
    assert e.project_id in (1, 2)
    assert isinstance(e.event, str) and 0 < len(e.event) <= 255 and utf8_ok(e.event)
    assert isinstance(e.time_ms, int) and not isinstance(e.time_ms, bool)
    assert TIME_FLOOR_MS <= e.time_ms <= now_ms + 3600 * 1000, e.time_ms
    assert isinstance(e.distinct_id, str) and len(e.distinct_id) <= 255 and utf8_ok(e.distinct_id)
    assert e.distinct_id.strip().lower() not in RESERVED
    assert isinstance(e.insert_id, str) and 0 < len(e.insert_id.encode()) <= 36
    assert set(e.insert_id) <= INSERT_ID_CHARS, e.insert_id
    assert e.insert_id.lower() not in RESERVED
    assert e.ip is None or (isinstance(e.ip, str) and len(e.ip) <= 255 and utf8_ok(e.ip))
    props = e.properties
    assert isinstance(props, dict)
    assert len(props) < 255
    assert not LIFTED & set(props), f"lifted keys left in properties: {LIFTED & set(props)}"
    for k, v in props.items():
        assert isinstance(k, str) and utf8_ok(k) and len(k) <= 255
        check_value(v, 1, f"properties.{k}")
    orjson.dumps(props)  # storable as it is


def check_response(r: httpx.Response, *, sink_failing: bool) -> dict[str, Any] | None:
    """Status and body shape of any answer; returns the JSON body (None for legacy 1/0)."""
    assert r.status_code < 500 or (r.status_code == 503 and sink_failing), (r.status_code, r.text[:500])
    assert "Traceback" not in r.text
    assert "internal error" not in r.text
    if r.headers.get("content-type", "").startswith("text/plain"):
        assert r.text in ("0", "1"), r.text[:200]
        return None
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body, dict)
    if "code" in body:
        assert body["code"] == r.status_code
        assert isinstance(body["status"], str)
    else:
        assert body.get("status") in (0, 1, "error"), body
    if r.status_code == 503:
        assert int(r.headers["retry-after"]) > 0
    return body


# -- strategies ----------------------------------------------------------------------------

# Text of every kind: ASCII, any code point including lone surrogates, and long strings.
any_text = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None), max_size=20),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.text(st.characters(max_codepoint=0x10FFFF), min_size=250, max_size=600),
    st.sampled_from([*sorted(RESERVED), " NULL ", "Anonymous", "événement", "😀" * 300]),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**63, 2**64, 2**64 - 1, -(2**63) - 1, 1e308]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(any_text, inner, max_size=6),
    ),
    max_leaves=25,
)
# Wide containers near the 255 limits.
wide = st.one_of(
    st.integers(250, 260).map(lambda n: list(range(n))),
    st.integers(250, 260).map(lambda n: {f"k{i}": i for i in range(n)}),
)


# Fixed when the module loads: strategies must not depend on the clock between examples.
NOW_S = int(time.time())


def time_values() -> st.SearchStrategy[Any]:
    now = NOW_S
    return st.one_of(
        st.integers(now - 10 * 365 * 86400, now + 7200),
        st.integers(now - 10 * 365 * 86400, now + 7200).map(lambda s: s * 1000),
        st.floats(now - 86400, now + 3500),
        st.sampled_from([0, -1, 31_535_999, 31_536_000, 9_999_999_999, 10_000_000_000, 31_536_000_000, now * 10**6]),
        st.none(),
        any_text,
        numbers,
    )


insert_ids = st.one_of(
    st.from_regex(r"[A-Za-z0-9-]{1,36}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9-]{37,40}", fullmatch=True),
    any_text,
    st.integers(),
    st.none(),
)
ips = st.one_of(
    st.sampled_from(["81.2.69.160", "2001:db8::1", "::ffff:1.2.3.4", "999.1.1.1", "", "0", "x" * 300]),
    st.integers(),
    st.none(),
    any_text,
)
property_keys = st.one_of(any_text, st.sampled_from([*sorted(LIFTED), "$city", "mp_lib", "a.b", "", " "]))
extra_properties = st.dictionaries(property_keys, st.one_of(json_values, wide), max_size=8)

# What a well-behaved client sends: valid UTF-8 (astral characters included), finite numbers,
# strings sometimes past 255 characters (stored truncated), nesting sometimes past depth 3.
good_text = st.one_of(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.text(st.characters(codec="utf-8"), min_size=250, max_size=300),
)
good_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        good_text,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(good_text, inner, max_size=4)),
    max_leaves=8,
)
good_keys = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(lambda k: k not in LIFTED)


@st.composite
def good_event(draw: st.DrawFn) -> dict[str, Any]:
    props: dict[str, Any] = {
        "time": NOW_S - draw(st.integers(0, 5 * 365 * 86400)),
        "distinct_id": draw(st.one_of(good_text, st.just(""), st.integers(0, 10**12))),
        "$insert_id": draw(st.from_regex(r"[A-Za-z0-9-]{8,36}", fullmatch=True)),
    }
    if draw(st.booleans()):
        props["time"] = props["time"] * 1000 + draw(st.integers(0, 999))
    if draw(st.integers(0, 3)) == 0:
        props["token"] = "0123456789abcdef0123456789abcdef"
    if draw(st.integers(0, 3)) == 0:
        props["ip"] = draw(st.sampled_from(["81.2.69.160", "2001:db8::1", "::ffff:8.8.8.8", "10.0.0.1"]))
    props.update(draw(st.dictionaries(good_keys, good_values, max_size=6)))
    return {"event": draw(good_text), "properties": props}


@st.composite
def wild_event(draw: st.DrawFn) -> Any:
    """Anything from random JSON to events whose every field is random."""
    props: dict[str, Any] = {}
    for key, strategy in (
        ("time", time_values()),
        ("distinct_id", st.one_of(any_text, st.integers(-(2**70), 2**70), json_values)),
        ("$insert_id", insert_ids),
        ("token", st.one_of(any_text, st.none())),
        ("ip", ips),
    ):
        if draw(st.integers(0, 9)) > 0 or key in ("token", "ip"):
            if key in ("token", "ip") and draw(st.booleans()):
                continue
            props[key] = draw(strategy)
    props.update(draw(extra_properties))
    if draw(st.integers(0, 19)) == 0:
        props.update({f"p{i}": i for i in range(draw(st.integers(250, 260)))})
    item: dict[str, Any] = {"event": draw(st.one_of(any_text, scalars)), "properties": props}
    shape = draw(st.integers(0, 19))
    if shape == 0:
        item["extra"] = draw(json_values)
    elif shape == 1:
        del item["properties"]
    elif shape == 2:
        item["properties"] = draw(json_values)
    elif shape == 3:
        return draw(json_values)
    return item


@st.composite
def event_like(draw: st.DrawFn) -> Any:
    """Mostly valid events, some with one field replaced by something wild, some wild throughout."""
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        return draw(good_event())
    if kind <= 7:
        item = draw(good_event())
        props = item["properties"]
        field = draw(st.sampled_from(["event", "time", "distinct_id", "$insert_id", "token", "ip", "extra", "wide"]))
        if field == "event":
            item["event"] = draw(st.one_of(any_text, scalars))
        elif field == "time":
            props["time"] = draw(time_values())
        elif field == "distinct_id":
            props["distinct_id"] = draw(st.one_of(any_text, json_values))
        elif field == "$insert_id":
            props["$insert_id"] = draw(insert_ids)
        elif field in ("token", "ip"):
            props[field] = draw(ips)
        elif field == "extra":
            props.update(draw(extra_properties))
        else:
            props[draw(good_keys)] = draw(wide)
        return item
    return draw(wild_event())


events_lists = st.lists(event_like(), max_size=8)


def dumps(value: Any) -> bytes:
    """JSON text; lone surrogates become \\udXXX escapes, NaN/Infinity are kept (as some clients send)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode("ascii")


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, str | None, str | None, dict[str, str]]:
    """(body, content type, content encoding, extra query parameters)."""
    kind = draw(st.sampled_from(["json", "ndjson", "form", "query", "random"]))
    query: dict[str, str] = {}
    content_type: str | None
    if kind == "json":
        body = dumps(draw(st.one_of(events_lists, event_like(), json_values)))
        content_type = "application/json"
    elif kind == "ndjson":
        lines = draw(st.lists(st.one_of(event_like().map(dumps), st.binary(max_size=30)), max_size=8))
        body = b"\n".join(line.replace(b"\n", b" ") for line in lines)
        content_type = "application/x-ndjson"
    elif kind in ("form", "query"):
        payload = dumps(draw(st.one_of(events_lists, event_like())))
        encoded = draw(
            st.sampled_from(
                [
                    payload.decode(),
                    base64.b64encode(payload).decode(),
                    base64.urlsafe_b64encode(payload).decode().rstrip("="),
                ]
            )
        )
        if kind == "form":
            body = ("data=" + quote(encoded, safe="")).encode()
            content_type = "application/x-www-form-urlencoded"
        else:
            body, content_type = b"", None
            query["data"] = encoded
    else:
        body = draw(st.binary(max_size=300))
        content_type = draw(st.sampled_from(["application/json", "application/x-ndjson", None]))
    encoding = None
    if body and draw(st.integers(0, 3)) == 0:
        body = gzip.compress(body)
        encoding = "gzip"
    return body, content_type, encoding, query


header_text = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"").decode("latin-1")),
)
content_types = st.one_of(
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "application/x-ndjson",
            "application/x-www-form-urlencoded",
            "text/plain",
            "multipart/form-data; boundary=x",
            "",
        ]
    ),
    header_text,
)
content_encodings = st.one_of(st.sampled_from(["gzip", "x-gzip", "deflate", "identity", "br", ""]), header_text)
query_values = st.one_of(st.sampled_from(["1", "0", "", "2", "-1", "99999999999999999999"]), st.text(max_size=10))
queries = st.dictionaries(
    st.sampled_from(["strict", "verbose", "project_id", "ip", "api_key", "data", "test"]), query_values, max_size=4
)


@st.composite
def authorizations(draw: st.DrawFn, creds: Any) -> tuple[str | None, dict[str, str]]:
    """(Authorization header or None, query parameters that go with it)."""
    choice = draw(st.integers(0, 19))
    if choice <= 13:
        user, password, project = draw(
            st.sampled_from(
                [
                    (creds.token, "", None),
                    (creds.token2, "", None),
                    (creds.token, "", "1"),
                    (creds.secret, "", None),
                    ("owner-sa", creds.sa_secret, "1"),
                    ("admin-sa", creds.sa_secret, "1"),
                    ("analyst-sa", creds.sa_secret, "1"),
                    ("owner-sa", creds.sa_secret, None),
                ]
            )
        )
        header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        return header, ({"project_id": project} if project else {})
    if choice <= 15:
        return None, {}
    if choice <= 17:
        return "Basic " + draw(header_text), {}
    return draw(header_text), {}


# -- the properties ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(make_gateway):  # type: ignore[no-untyped-def]
    # One app for all examples (module scope, as Hypothesis wants); the sink is reset per example.
    return make_gateway()


def run(
    gateway, method: str, query: dict[str, str], body: bytes, headers: dict[str, str], fail: bool
) -> httpx.Response:  # type: ignore[no-untyped-def]
    gateway.sink.events.clear()
    gateway.sink.fail = fail
    url = "/import" + ("?" + urlencode(query) if query else "")
    assume(len(url) < 65_000)  # httpx refuses longer URLs before sending (`data=` of a big body)
    return gateway.request(method, url, content=body, headers=headers)


def check_stored(gateway, body: dict[str, Any] | None, r: httpx.Response, now_ms: int) -> None:  # type: ignore[no-untyped-def]
    stored = gateway.sink.events
    event(f"status {r.status_code}, {'some' if stored else 'no'} events stored")
    for e in stored:
        check_event(e, now_ms)
    if r.status_code >= 500 or r.status_code not in (200, 400):
        assert stored == [], "events stored although the request was refused"
    if body is not None and "num_records_imported" in body:
        assert body["num_records_imported"] == len(stored)
        for rec in body.get("failed_records", []):
            assert set(rec) == {"index", "$insert_id", "field", "message"}
            assert isinstance(rec["index"], int) and isinstance(rec["message"], str)


@FUZZ
@given(data=st.data())
def test_arbitrary_requests_never_fail_and_store_only_valid_events(gateway, creds, data: st.DataObject) -> None:
    body, content_type, encoding, query = data.draw(bodies())
    if data.draw(st.integers(0, 2)) == 0:
        query = {**data.draw(queries), **query}
    elif data.draw(st.booleans()):
        query["strict"] = "1"
    headers: dict[str, str] = {}
    if content_type is not None:
        headers["content-type"] = content_type
    if data.draw(st.integers(0, 4)) == 0:
        headers["content-type"] = data.draw(content_types)
    if encoding is not None:
        headers["content-encoding"] = encoding
    if data.draw(st.integers(0, 4)) == 0:
        headers["content-encoding"] = data.draw(content_encodings)
    auth, auth_query = data.draw(authorizations(creds))
    query = {**auth_query, **query}
    if auth is not None:
        headers["authorization"] = auth
    fail = data.draw(st.integers(0, 9)) == 0
    method = data.draw(st.sampled_from(["POST", "POST", "POST", "GET"]))
    now_ms = int(time.time() * 1000)
    r = run(gateway, method, query, body, {k: v.encode("latin-1") for k, v in headers.items()}, fail)  # type: ignore[misc]
    parsed = check_response(r, sink_failing=fail)
    check_stored(gateway, parsed, r, now_ms)


@FUZZ
@given(events=events_lists, strict=st.booleans(), ndjson=st.booleans(), gzipped=st.booleans())
def test_event_batches_import_counts_and_invariants(gateway, creds, events: list[Any], strict: bool, ndjson: bool,
                                                    gzipped: bool) -> None:  # fmt: skip
    if ndjson:
        body = b"\n".join(dumps(e) for e in events)
        headers = {"content-type": "application/x-ndjson"}
    else:
        body = dumps(events)
        headers = {"content-type": "application/json"}
    if gzipped:
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    headers["authorization"] = "Basic " + base64.b64encode(f"{creds.token}:".encode()).decode()
    now_ms = int(time.time() * 1000)
    r = run(gateway, "POST", {"strict": "1"} if strict else {}, body, headers, False)
    parsed = check_response(r, sink_failing=False)
    assert parsed is not None
    assert r.status_code in (200, 400), r.text[:500]
    if r.status_code == 200 or "failed_records" in parsed:
        assert parsed["num_records_imported"] == len(gateway.sink.events)
    if "failed_records" in parsed:
        assert strict
        assert len(parsed["failed_records"]) + parsed["num_records_imported"] == len(events)
        indexes = [rec["index"] for rec in parsed["failed_records"]]
        assert indexes == sorted(set(indexes)) and all(0 <= i < len(events) for i in indexes)
    elif r.status_code == 200 and strict:
        assert parsed["num_records_imported"] == len(events)
    check_stored(gateway, parsed, r, now_ms)
