"""The `POST /import` HTTP contract (spec "POST {ingest_url}/import", semantics §6.1).

Driven in-process against `build_app(Authenticator(directory), MemorySink(), limits)`;
the per-rule validation lives in `tests/unit/events` and is not repeated here.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from prometheus_client import REGISTRY

from footfall.shared.config import ImportLimits

JSON = {"content-type": "application/json"}
NDJSON = {"content-type": "application/x-ndjson"}
DERIVED_ID = re.compile(r"[0-9a-f]{32}")


def now_s() -> int:
    return int(time.time()) - 60


def event(n: int = 0, **props: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"time": now_s(), "distinct_id": f"user-{n}", "$insert_id": f"ins-{n}"}
    base.update(props)
    return {"event": "Page View", "properties": {k: v for k, v in base.items() if v is not ...}}


def bad_time(n: int) -> dict[str, Any]:
    return event(n, time=0)


@pytest.fixture
def auth(creds) -> tuple[str, str]:
    return (creds.token, "")


def post(gateway, body: Any, query: str = "?strict=1", *, auth: Any, headers: dict[str, str] = JSON) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return gateway.post("/import" + query, content=content, headers=headers, auth=auth)


def assert_json_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["code"] == status
    assert isinstance(body["error"], str) and body["error"]
    assert isinstance(body["status"], str)
    assert "Traceback" not in r.text
    return body


def counter(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# -- strict=1 --------------------------------------------------------------------------------


def test_strict_all_valid_200(gateway, auth) -> None:
    events = [event(i) for i in range(5)]
    r = post(gateway, events, auth=auth)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"code": 200, "num_records_imported": 5, "status": "OK"}
    stored = gateway.sink.events
    assert [e.insert_id for e in stored] == [f"ins-{i}" for i in range(5)]
    assert {e.project_id for e in stored} == {1}
    assert stored[0].time_ms == events[0]["properties"]["time"] * 1000


def test_strict_mixed_400_with_failed_records_and_valid_ones_imported(gateway, auth) -> None:
    events = [event(0), bad_time(1), event(2), event(3, distinct_id="anonymous"), event(4)]
    r = post(gateway, events, auth=auth)
    body = assert_json_error(r, 400)
    assert set(body) == {"code", "error", "failed_records", "num_records_imported", "status"}
    assert body["status"] == "Bad Request"
    assert body["num_records_imported"] == 3
    records = body["failed_records"]
    assert [rec["index"] for rec in records] == [1, 3]
    assert [rec["$insert_id"] for rec in records] == ["ins-1", "ins-3"]
    assert [rec["field"] for rec in records] == ["properties.time", "properties.distinct_id"]
    for rec in records:
        assert set(rec) == {"index", "$insert_id", "field", "message"}
        assert isinstance(rec["message"], str) and rec["message"]
    assert [e.insert_id for e in gateway.sink.events] == ["ins-0", "ins-2", "ins-4"]


def test_strict_all_invalid_400_nothing_imported(gateway, auth) -> None:
    body = assert_json_error(post(gateway, [bad_time(0), bad_time(1)], auth=auth), 400)
    assert body["num_records_imported"] == 0
    assert len(body["failed_records"]) == 2
    assert gateway.sink.events == []


def test_strict_missing_insert_id_is_a_failed_record(gateway, auth) -> None:
    body = assert_json_error(post(gateway, [event(0, **{"$insert_id": ...}), event(1)], auth=auth), 400)
    assert body["failed_records"][0]["field"] == "properties.$insert_id"
    assert body["failed_records"][0]["$insert_id"] is None
    assert body["num_records_imported"] == 1


def test_strict_json_answer_wins_over_verbose(gateway, auth) -> None:
    # mixpanel-import sends ip=0&verbose=1&strict=1 with a JSON body and reads the strict shape.
    r = post(gateway, [event(0), bad_time(1)], "?ip=0&verbose=1&strict=1", auth=auth)
    body = assert_json_error(r, 400)
    assert body["num_records_imported"] == 1
    r = post(gateway, [event(2)], "?ip=0&verbose=1&strict=1", auth=auth)
    assert r.json() == {"code": 200, "num_records_imported": 1, "status": "OK"}


def test_strict_ndjson_malformed_line_reported_rest_imported(gateway, auth) -> None:
    body = b"\n".join([json.dumps(event(0)).encode(), b"{oops", b"", json.dumps(event(2)).encode()]) + b"\n"
    r = post(gateway, body, auth=auth, headers=NDJSON)
    payload = assert_json_error(r, 400)
    assert payload["num_records_imported"] == 2
    assert [rec["index"] for rec in payload["failed_records"]] == [1]
    assert [e.insert_id for e in gateway.sink.events] == ["ins-0", "ins-2"]


def test_strict_gzip_body(gateway, auth) -> None:
    raw = gzip.compress(json.dumps([event(i) for i in range(3)]).encode())
    r = post(gateway, raw, auth=auth, headers={**JSON, "content-encoding": "gzip"})
    assert r.json() == {"code": 200, "num_records_imported": 3, "status": "OK"}


# -- without strict --------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "?strict=0", "?strict=false"], ids=["absent", "zero", "other"])
def test_non_strict_drops_invalid_and_does_not_count_them(gateway, auth, query: str) -> None:
    r = post(gateway, [event(0), bad_time(1), event(2), "not an event"], query, auth=auth)
    assert r.status_code == 200
    assert r.json() == {"code": 200, "num_records_imported": 2, "status": "OK"}
    assert [e.insert_id for e in gateway.sink.events] == ["ins-0", "ins-2"]


def test_non_strict_missing_insert_id_derived_deterministically(make_gateway, auth) -> None:
    t = now_s()
    events = [
        {"event": "A", "properties": {"time": t, "distinct_id": "u1", "k": 1}},
        {"event": "A", "properties": {"time": t, "distinct_id": "u1", "k": 2}},
        {"event": "A", "properties": {"k": 1, "distinct_id": "u1", "time": t}},  # same as the first
        {"event": "B", "properties": {"time": t, "distinct_id": "u1", "$insert_id": "x" * 40}},  # invalid → derived
    ]
    ids = []
    for _ in range(2):
        gateway = make_gateway()
        r = post(gateway, events, "", auth=auth)
        assert r.json() == {"code": 200, "num_records_imported": 4, "status": "OK"}
        ids.append([e.insert_id for e in gateway.sink.events])
    assert ids[0] == ids[1]  # a retried request deduplicates
    first, second, reordered, long_id = ids[0]
    assert all(DERIVED_ID.fullmatch(i) for i in ids[0])
    assert first != second
    assert first == reordered  # member order does not matter
    assert long_id != "x" * 40


# -- request-level errors --------------------------------------------------------------------


def test_too_many_events_400(gateway, auth) -> None:
    t = now_s()
    events = [{"event": "e", "properties": {"time": t, "distinct_id": "u", "$insert_id": f"i{i}"}} for i in range(2001)]
    body = assert_json_error(post(gateway, events, auth=auth), 400)
    assert "2001" in body["error"] and "2000" in body["error"]
    assert gateway.sink.events == []
    r = post(gateway, events[:2000], auth=auth)
    assert r.json() == {"code": 200, "num_records_imported": 2000, "status": "OK"}


def test_too_many_events_ndjson_400(gateway, auth) -> None:
    line = json.dumps(event(0)).encode()
    assert_json_error(post(gateway, b"\n".join([line] * 2001), auth=auth, headers=NDJSON), 400)
    assert gateway.sink.events == []


def test_million_broken_ndjson_lines_refused_quickly(gateway, auth) -> None:
    started = time.perf_counter()
    body = assert_json_error(post(gateway, b"{\n" * (1 << 20), auth=auth, headers=NDJSON), 400)
    assert time.perf_counter() - started < 2.0
    assert "too many events" in body["error"]


@pytest.mark.parametrize(
    "raw",
    [b"[", b'{"event": ', b"[{}", b"nope", b"", b"42", b'"events"', b"[" * 10_000],
    ids=["open-bracket", "truncated", "unclosed", "word", "empty", "number", "string", "deep"],
)
def test_malformed_json_400(gateway, auth, raw: bytes) -> None:
    body = assert_json_error(post(gateway, raw, auth=auth), 400)
    assert body["status"] == "Bad Request"
    assert gateway.sink.events == []


@pytest.mark.parametrize(
    "headers",
    [{"content-type": "text/plain"}, {"content-type": "application/xml"}, {}],
    ids=["text-plain", "xml", "missing"],
)
def test_wrong_content_type_415(gateway, auth, headers: dict[str, str]) -> None:
    body = assert_json_error(post(gateway, [event(0)], auth=auth, headers=headers), 415)
    assert body["status"] == "Unsupported Media Type"


def test_unsupported_content_encoding_415(gateway, auth) -> None:
    assert_json_error(post(gateway, [event(0)], auth=auth, headers={**JSON, "content-encoding": "br"}), 415)


def test_invalid_gzip_400(gateway, auth) -> None:
    assert_json_error(post(gateway, b"\x1f\x8b\x08junk", auth=auth, headers={**JSON, "content-encoding": "gzip"}), 400)


def test_body_too_large_413(make_gateway, auth) -> None:
    gateway = make_gateway(ImportLimits(max_request_bytes=2048))
    events = [event(i, pad="x" * 200) for i in range(20)]
    body = assert_json_error(post(gateway, events, auth=auth), 413)
    assert body == {
        "code": 413,
        "error": "request exceeds max limit of 2048 bytes",
        "status": "Request Entity Too Large",
    }
    assert gateway.sink.events == []


def test_limits_are_configurable(make_gateway, auth) -> None:
    gateway = make_gateway(ImportLimits(max_events_per_request=10, max_request_bytes=4096))
    assert post(gateway, [event(i) for i in range(10)], auth=auth).json()["num_records_imported"] == 10
    assert_json_error(post(gateway, [event(i) for i in range(11)], auth=auth), 400)
    assert_json_error(post(gateway, [event(i, pad="y" * 400) for i in range(10)], auth=auth), 413)


def test_default_limits_follow_the_spec() -> None:
    limits = ImportLimits()
    assert (limits.max_events_per_request, limits.max_request_bytes) == (2000, 2 * 1024 * 1024)


def test_sink_unavailable_503_with_retry_after_and_nothing_counted(gateway, auth) -> None:
    gateway.sink.fail = True
    before = counter("footfall_events_imported_total", {"path": "import"})
    r = post(gateway, [event(0), event(1)], auth=auth)
    body = assert_json_error(r, 503)
    assert body["status"] == "Service Unavailable"
    assert "num_records_imported" not in body
    assert int(r.headers["retry-after"]) > 0
    assert gateway.sink.events == []
    assert counter("footfall_events_imported_total", {"path": "import"}) == before
    gateway.sink.fail = False
    assert post(gateway, [event(0), event(1)], auth=auth).json()["num_records_imported"] == 2


def test_imported_and_rejected_events_are_counted(gateway, auth) -> None:
    imported = counter("footfall_events_imported_total", {"path": "import"})
    rejected = counter("footfall_events_rejected_total", {"path": "import", "reason": "time"})
    post(gateway, [event(0), bad_time(1)], auth=auth)
    assert counter("footfall_events_imported_total", {"path": "import"}) == imported + 1
    assert counter("footfall_events_rejected_total", {"path": "import", "reason": "time"}) == rejected + 1


# -- paths and methods -----------------------------------------------------------------------


def test_trailing_slash_path(gateway, auth) -> None:
    r = gateway.post("/import/?strict=1", content=json.dumps([event(0)]), headers=JSON, auth=auth)
    assert r.json() == {"code": 200, "num_records_imported": 1, "status": "OK"}
    r = gateway.get("/import/?data=" + quote(json.dumps(event(1))), auth=auth)
    assert (r.status_code, r.text) == (200, "1")
    assert len(gateway.sink.events) == 2


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_405_in_the_import_shape(gateway, auth, method: str) -> None:
    r = gateway.request(method, "/import", auth=auth)
    assert r.status_code == 405
    assert r.json() == {"code": 405, "error": "Method Not Allowed", "status": "Method Not Allowed"}
    assert "POST" in r.headers["allow"]


def test_unknown_path_under_import_is_404_in_the_import_shape(gateway, auth) -> None:
    r = gateway.post("/import/nothing-here", auth=auth)
    assert r.status_code == 404
    assert r.json() == {"code": 404, "error": "Not Found", "status": "Not Found"}


# -- legacy form mode ------------------------------------------------------------------------


def b64(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def test_legacy_form_success_answers_1(gateway, auth) -> None:
    r = gateway.post("/import", data={"data": json.dumps([event(0), event(1)])}, auth=auth)
    assert r.status_code == 200
    assert r.text == "1"
    assert r.headers["content-type"].startswith("text/plain")
    assert len(gateway.sink.events) == 2


def test_legacy_form_verbose_in_query(gateway, auth) -> None:
    r = gateway.post("/import?verbose=1&ip=0", data={"data": b64([event(0)])}, auth=auth)
    assert r.status_code == 200
    assert r.json() == {"status": 1, "error": None}


def test_legacy_form_verbose_in_body(gateway, auth) -> None:
    # mixpanel-python sends `data=<json>&verbose=1&ip=0` as the form body.
    r = gateway.post("/import", data={"data": json.dumps([event(0)]), "verbose": "1", "ip": "0"}, auth=auth)
    assert r.json() == {"status": 1, "error": None}


def test_legacy_all_invalid_answers_0(gateway, auth) -> None:
    r = gateway.post("/import", data={"data": json.dumps([bad_time(0)])}, auth=auth)
    assert r.text == "0"
    r = gateway.post("/import?verbose=1", data={"data": json.dumps([bad_time(0)])}, auth=auth)
    body = r.json()
    assert body["status"] == 0 and isinstance(body["error"], str) and body["error"]
    assert gateway.sink.events == []


@pytest.mark.parametrize(
    ("data", "auth_ok"),
    [("%%%", True), (b64("just a string"), True), ("{broken", True), (json.dumps([event(0)]), False)],
    ids=["not-base64", "b64-scalar", "broken-json", "bad-credentials"],
)
def test_legacy_errors_answer_0(gateway, creds, data: str, auth_ok: bool) -> None:
    auth = (creds.token, "") if auth_ok else ("wrong-token", "")
    r = gateway.post("/import", data={"data": data}, auth=auth)
    assert r.status_code in (400, 401)
    assert r.text == "0"
    r = gateway.post("/import?verbose=1", data={"data": data}, auth=auth)
    assert r.status_code in (400, 401)
    body = r.json()
    assert body["status"] == 0 and isinstance(body["error"], str) and body["error"]
    assert gateway.sink.events == []


def test_legacy_get_query_string(gateway, auth) -> None:
    r = gateway.get("/import?verbose=1&ip=0&data=" + quote(b64(event(0)), safe=""), auth=auth)
    assert r.json() == {"status": 1, "error": None}
    r = gateway.get("/import?data=" + quote(b64([event(1), event(2)]), safe=""), auth=auth)
    assert r.text == "1"
    assert [e.insert_id for e in gateway.sink.events] == ["ins-0", "ins-1", "ins-2"]


def test_legacy_sink_unavailable_503(gateway, auth) -> None:
    gateway.sink.fail = True
    r = gateway.post("/import?verbose=1", data={"data": json.dumps([event(0)])}, auth=auth)
    assert r.status_code == 503
    assert r.json()["status"] == 0
    assert int(r.headers["retry-after"]) > 0
    r = gateway.post("/import", data={"data": json.dumps([event(0)])}, auth=auth)
    assert (r.status_code, r.text) == (503, "0")


def test_legacy_too_many_events_answers_0(make_gateway, auth) -> None:
    gateway = make_gateway(ImportLimits(max_events_per_request=2))
    r = gateway.post("/import?verbose=1", data={"data": json.dumps([event(i) for i in range(3)])}, auth=auth)
    assert r.status_code == 400
    assert r.json()["status"] == 0
    assert gateway.sink.events == []


# -- what is stored --------------------------------------------------------------------------


def test_stored_event_is_normalised(gateway, auth) -> None:
    t_ms = now_s() * 1000 + 123
    raw = event(0, time=t_ms, token="t", ip="81.2.69.160", long="z" * 300, nested={"a": {"b": 1}})
    assert post(gateway, [raw], auth=auth).json()["num_records_imported"] == 1
    (e,) = gateway.sink.events
    assert (e.project_id, e.event, e.time_ms, e.distinct_id, e.insert_id) == (1, "Page View", t_ms, "user-0", "ins-0")
    assert e.ip == "81.2.69.160"
    assert set(e.properties) == {"long", "nested"}
    assert e.properties["long"] == "z" * 255


def test_project_is_the_authenticated_one(gateway, creds) -> None:
    post(gateway, [event(0, token=creds.token)], auth=(creds.token2, ""))
    assert [e.project_id for e in gateway.sink.events] == [2]


# -- never a 500 -----------------------------------------------------------------------------

BAD_REQUESTS: list[tuple[str, str, dict[str, str], bytes]] = [
    ("POST", "/import?strict=1", JSON, b"\xff\xfe\x00"),
    ("POST", "/import?strict=1", JSON, b'[{"event": "\xff", "properties": {}}]'),
    ("POST", "/import?strict=1", JSON, b'[{"event": "e", "properties": {"time": 1e400}}]'),
    ("POST", "/import?strict=1", JSON, b'[{"event": "e", "properties": {"time": NaN}}]'),
    ("POST", "/import?strict=1", JSON, b'[{"event": "e", "properties": {"time": 1' + b"0" * 5000 + b"}}]"),
    ("POST", "/import?strict=1", JSON, b'[{"event": "e", "properties": {"distinct_id": 1' + b"0" * 5000 + b"}}]"),
    ("POST", "/import?strict=1", JSON, b'[{"event": "e", "properties": {"\\ud800": "\\udfff"}}]'),
    ("POST", "/import?strict=1", JSON, b'{"event": "e", "properties": []}'),
    ("POST", "/import?strict=1", JSON, b"[[[[[[[[[[]]]]]]]]]]"),
    ("POST", "/import?strict=1", NDJSON, b'\xff\n\x00\n[1,2]\n"s"\n'),
    ("POST", "/import?strict=1", {**JSON, "content-encoding": "gzip"}, b""),
    ("POST", "/import?strict=1", {**JSON, "content-encoding": "gzip"}, gzip.compress(b"\xff")),
    ("POST", "/import?strict=1", {"content-type": "application/x-www-form-urlencoded"}, b"data=%ff%00"),
    ("POST", "/import?strict=1", {"content-type": "application/x-www-form-urlencoded"}, b"\xff=\xff&&&="),
    ("POST", "/import?verbose=1", {"content-type": "application/x-www-form-urlencoded"}, b"data="),
    ("POST", "/import?strict=1&project_id=%ff", JSON, b"[]"),
    ("POST", "/import?strict=1&project_id=99999999999999999999999", JSON, b"[]"),
    ("POST", "/import?strict=1&data=%ff", JSON, b"[]"),
    ("GET", "/import?data=", {}, b""),
    ("GET", "/import?data=%5B%5D", {}, b""),
    ("GET", "/import?data=" + "A" * 5000, {}, b""),
    ("GET", "/import", {}, b""),
    ("POST", "/import", {"content-type": 'application/json; charset="utf-8'}, b"[]"),
    ("POST", "/import", {"content-type": ";;;", "content-encoding": ",,"}, b"[]"),
]


@pytest.mark.parametrize(
    ("method", "url", "headers", "body"), BAD_REQUESTS, ids=[str(i) for i in range(len(BAD_REQUESTS))]
)
def test_odd_requests_never_500(gateway, auth, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
    r = gateway.request(method, url, content=body, headers=headers, auth=auth)
    assert r.status_code < 500, r.text
    assert "Traceback" not in r.text
    if r.headers.get("content-type", "").startswith("text/plain"):
        assert r.text in ("0", "1")
    else:
        assert isinstance(r.json(), dict)
