"""The `/track` HTTP contract (semantics §6.2, §7): body forms, token resolution, `ip=1`
behind proxies, the /track time and insert-id rules, every answer shape, limits, and a
Hypothesis property (never a 500, only valid events stored, the answer matches the sink).

Driven in-process against `build_app(...)` with a `MemorySink`; the validator's own rules
are tested in `tests/unit/events`.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
import time
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from footfall.services.gateway.addresses import client_ip, parse_address, parse_networks
from footfall.services.gateway.app import build_app
from footfall.services.gateway.credentials import FollowedAuthenticator
from footfall.services.gateway.responses import TRANSPARENT_GIF, valid_callback
from footfall.services.gateway.settings import GatewaySettings
from footfall.services.gateway.sinks import MemorySink
from footfall.shared.config import ConfigError, ImportLimits
from footfall.shared.events import Event
from tests.unit.conftest import CREDS

TOKEN, TOKEN2 = CREDS.token, CREDS.token2
JSON = {"content-type": "application/json"}
NDJSON = {"content-type": "application/x-ndjson"}
DERIVED_ID = re.compile(r"[0-9a-f]{32}")
DAY = 86_400


def now_s() -> int:
    return int(time.time()) - 60


def ev(n: int = 0, *, token: Any = TOKEN, **props: Any) -> dict[str, Any]:
    """A /track event as mixpanel clients send it (token, time, distinct_id, $insert_id)."""
    base: dict[str, Any] = {"token": token, "time": now_s(), "distinct_id": f"user-{n}", "$insert_id": f"ins-{n}"}
    base.update(props)
    return {"event": "Page View", "properties": {k: v for k, v in base.items() if v is not ...}}


def b64(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def track(gateway, body: Any, query: str = "", *, headers: dict[str, str] = JSON, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return gateway.post("/track" + query, content=content, headers=headers, **kwargs)


def stored(gateway) -> list[tuple[int, str]]:
    return [(e.project_id, e.insert_id) for e in gateway.sink.events]


def counter(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def assert_plain(r: httpx.Response, value: str, status: int = 200) -> None:
    assert (r.status_code, r.text) == (status, value), r.text
    assert r.headers["content-type"].startswith("text/plain")


def verbose(r: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"status", "error"}
    return body


# -- body forms ------------------------------------------------------------------------------


def test_form_body_raw_json_with_flags_in_the_form(gateway) -> None:
    # mixpanel-python: POST form `data=<json>&verbose=1&ip=0`.
    r = gateway.post("/track", data={"data": json.dumps(ev(0)), "verbose": "1", "ip": "0"})
    assert verbose(r) == {"status": 1, "error": None}
    assert stored(gateway) == [(1, "ins-0")]


def test_form_body_base64_array(gateway) -> None:
    # mixpanel-js / mixpanel-node batches: form `data=<base64 JSON array>`, flags in the query.
    r = gateway.post("/track/?ip=1&_=1700000000000", data={"data": b64([ev(0), ev(1)])})
    assert_plain(r, "1")
    assert stored(gateway) == [(1, "ins-0"), (1, "ins-1")]


@pytest.mark.parametrize("encode", [json.dumps, b64], ids=["raw", "base64"])
@pytest.mark.parametrize("path", ["/track", "/track/"], ids=["plain", "slash"])
def test_get_with_data_in_the_query_string(gateway, encode, path: str) -> None:
    # mixpanel-node single events and pixels: GET ?data=<base64 JSON>.
    r = gateway.get(f"{path}?verbose=1&data=" + quote(encode(ev(3))))
    assert verbose(r) == {"status": 1, "error": None}
    assert stored(gateway) == [(1, "ins-3")]


def test_post_with_empty_body_and_data_in_the_query_string(gateway) -> None:
    r = gateway.post("/track?data=" + quote(b64(ev(0))))
    assert_plain(r, "1")
    assert len(gateway.sink.events) == 1


def test_json_array_and_single_object_bodies(gateway) -> None:
    assert_plain(track(gateway, [ev(0), ev(1)]), "1")
    assert_plain(track(gateway, ev(2)), "1")
    assert_plain(track(gateway, ev(3), headers={"content-type": "application/json; charset=utf-8"}), "1")
    assert [i for _, i in stored(gateway)] == ["ins-0", "ins-1", "ins-2", "ins-3"]


def test_ndjson_body_with_a_malformed_line(gateway) -> None:
    body = b"\n".join([json.dumps(ev(0)).encode(), b"{oops", json.dumps(ev(2)).encode()]) + b"\n"
    r = track(gateway, body, "?verbose=1", headers=NDJSON)
    assert verbose(r) == {"status": 1, "error": None}
    assert [i for _, i in stored(gateway)] == ["ins-0", "ins-2"]
    r = track(gateway, body, "?strict=1", headers=NDJSON)
    assert r.status_code == 400 and [rec["index"] for rec in r.json()["failed_records"]] == [1]


@pytest.mark.parametrize(
    "content_type", ["text/plain;charset=UTF-8", None], ids=["sendbeacon-text-plain", "no-content-type"]
)
def test_untyped_bodies_are_sniffed(gateway, content_type: str | None) -> None:
    # navigator.sendBeacon(url, "data=...") sends text/plain; some scripts send no type at all.
    headers = {"content-type": content_type} if content_type else {}
    r = gateway.post("/track?ip=1", content=("data=" + quote(b64([ev(0)]))).encode(), headers=headers)
    assert_plain(r, "1")
    r = gateway.post("/track", content=json.dumps([ev(1)]).encode(), headers=headers)
    assert_plain(r, "1")
    assert [i for _, i in stored(gateway)] == ["ins-0", "ins-1"]


def test_gzip_json_and_gzip_form_bodies(gateway) -> None:
    raw = gzip.compress(json.dumps([ev(0), ev(1)]).encode())
    assert_plain(track(gateway, raw, headers={**JSON, "content-encoding": "gzip"}), "1")
    form = gzip.compress(urlencode({"data": b64([ev(2)]), "verbose": "1"}).encode())
    r = gateway.post(
        "/track",
        content=form,
        headers={"content-type": "application/x-www-form-urlencoded", "content-encoding": "gzip"},
    )
    assert verbose(r) == {"status": 1, "error": None}  # flags of a compressed form are read after inflating
    assert len(gateway.sink.events) == 3


def test_invalid_gzip_and_gzip_bomb(make_gateway) -> None:
    gateway = make_gateway(ImportLimits(max_request_bytes=64 * 1024))
    r = track(gateway, b"\x1f\x8b\x08junk", "?verbose=1", headers={**JSON, "content-encoding": "gzip"})
    assert verbose(r, 400)["status"] == 0
    bomb = gzip.compress(b"[" + b" " * (10 * 1024 * 1024) + b"]")
    r = track(gateway, bomb, "?verbose=1", headers={**JSON, "content-encoding": "gzip"})
    assert verbose(r, 413)["error"] == "request exceeds max limit of 65536 bytes"
    assert gateway.sink.events == []


@pytest.mark.parametrize(
    ("query", "body", "headers"),
    [
        ("", b"", {}),
        ("?verbose=1", b"", JSON),
        ("", b"[", JSON),
        ("", b"data=%%%", {"content-type": "application/x-www-form-urlencoded"}),
        ("", b"nodata=1", {"content-type": "application/x-www-form-urlencoded"}),
        ("?data=not-base64!", b"", {}),
        ("", b"<xml/>", {"content-type": "application/xml"}),
        ("", b"[]", {**JSON, "content-encoding": "br"}),
    ],
    ids=["nothing", "empty-json", "malformed", "bad-form-data", "no-data-field", "bad-base64", "xml", "brotli"],
)
def test_unreadable_requests_are_4xx_never_5xx(gateway, query: str, body: bytes, headers: dict[str, str]) -> None:
    r = gateway.post("/track" + query, content=body, headers=headers)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.text == "0" or r.json()["status"] == 0
    assert gateway.sink.events == []


# -- the project: properties.token, optional Basic credentials -------------------------------


def test_each_event_goes_to_its_tokens_project(gateway) -> None:
    r = track(gateway, [ev(0), ev(1, token=TOKEN2), ev(2)])
    assert_plain(r, "1")
    assert stored(gateway) == [(1, "ins-0"), (2, "ins-1"), (1, "ins-2")]


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        ("f" * 32, "is not a known project token"),
        (..., "is required"),
        ("", "is required"),
        (None, "is required"),
        (12345, "must be a string"),
        (CREDS.secret, "is not a known project token"),  # a secret is not a token
    ],
    ids=["unknown", "missing", "empty", "null", "number", "secret"],
)
def test_events_without_a_known_token_fail(gateway, token: Any, problem: str) -> None:
    r = track(gateway, [ev(0, token=token)], "?verbose=1")
    body = verbose(r)
    assert body["status"] == 0 and "properties.token" in body["error"] and problem in body["error"]
    assert_plain(track(gateway, [ev(0, token=token)]), "0")
    r = track(gateway, [ev(0, token=token), ev(1)], "?strict=1")
    assert r.status_code == 400
    assert r.json()["failed_records"] == [
        {"index": 0, "$insert_id": "ins-0", "field": "properties.token", "message": body["error"]}
    ]
    assert stored(gateway) == [(1, "ins-1")]


def test_token_failures_are_counted_under_track(gateway) -> None:
    imported = counter("footfall_events_imported_total", {"path": "track"})
    rejected = counter("footfall_events_rejected_total", {"path": "track", "reason": "token"})
    track(gateway, [ev(0), ev(1, token="nope")])
    assert counter("footfall_events_imported_total", {"path": "track"}) == imported + 1
    assert counter("footfall_events_rejected_total", {"path": "track", "reason": "token"}) == rejected + 1


@pytest.mark.parametrize(
    ("auth", "query", "project"),
    [
        ((TOKEN, ""), "", 1),
        ((CREDS.secret2, ""), "", 2),
        (("owner-sa", CREDS.sa_secret), "?project_id=1", 1),
        (("admin-sa", CREDS.sa_secret), "?project_id=1", 1),
    ],
    ids=["token", "secret", "owner-sa", "admin-sa"],
)
def test_basic_credentials_name_the_project(gateway, auth: tuple[str, str], query: str, project: int) -> None:
    other = TOKEN2 if project == 1 else TOKEN
    own = TOKEN if project == 1 else TOKEN2
    events = [ev(0, token=...), ev(1, token=own), ev(2, token=other), ev(3, token="unknown")]
    r = track(gateway, events, query + ("&" if query else "?") + "strict=1", auth=auth)
    assert r.status_code == 400, r.text
    records = r.json()["failed_records"]
    assert [(rec["index"], rec["field"]) for rec in records] == [(2, "properties.token"), (3, "properties.token")]
    assert f"is not the token of project {project}" in records[0]["message"]
    assert stored(gateway) == [(project, "ins-0"), (project, "ins-1")]


@pytest.mark.parametrize(
    ("auth", "query", "status"),
    [
        (("nobody", "wrong"), "?project_id=1", 401),
        (("owner-sa", "wrong"), "?project_id=1", 401),
        (("not-a-token", ""), "", 401),
        (("analyst-sa", CREDS.sa_secret), "?project_id=1", 403),
        (("outsider-sa", CREDS.sa_secret), "?project_id=1", 403),
        ((TOKEN, ""), "?project_id=2", 403),
    ],
    ids=["unknown-sa", "wrong-secret", "unknown-token", "analyst", "outsider", "token-other-project"],
)
def test_bad_credentials_refuse_the_request_401_403(gateway, auth, query: str, status: int) -> None:
    for extra in ("", "&verbose=1" if query else "?verbose=1"):
        r = track(gateway, [ev(0)], query + extra, auth=auth)
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body) == {"error", "status"} and body["status"] == "error" and body["error"]
    assert gateway.sink.events == []


def test_non_basic_authorization_is_refused(gateway) -> None:
    r = track(gateway, [ev(0)], headers={**JSON, "authorization": "Bearer abc"})
    assert r.status_code == 401 and r.json()["status"] == "error"


def test_credentials_not_loaded_yet_503() -> None:
    # A distributed gateway before its first credential snapshot cannot tell tokens apart.
    sink = MemorySink()
    app = build_app(FollowedAuthenticator(), sink, ImportLimits())

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://footfall.test") as client:
            return await client.post("/track?verbose=1", json=[ev(0)])

    r = asyncio.run(call())
    assert r.status_code == 503 and int(r.headers["retry-after"]) > 0
    assert r.json()["status"] == 0
    assert sink.events == []


# -- ip=1: the request address for geolocation ----------------------------------------------


def test_ip_1_uses_the_peer_address(gateway) -> None:
    track(gateway, [ev(0), ev(1, ip="8.8.8.8"), ev(2, ip=0)], "?ip=1", peer="81.2.69.160")
    assert [e.ip for e in gateway.sink.events] == ["81.2.69.160", "8.8.8.8", None]


@pytest.mark.parametrize("query", ["", "?ip=0", "?ip=true"], ids=["absent", "zero", "not-1"])
def test_without_ip_1_no_request_address_is_used(gateway, query: str) -> None:
    track(gateway, [ev(0), ev(1, ip="8.8.8.8")], query, peer="81.2.69.160")
    assert [e.ip for e in gateway.sink.events] == [None, "8.8.8.8"]


def test_ip_flag_in_the_form_body(gateway) -> None:
    gateway.request("POST", "/track", data={"data": json.dumps([ev(0)]), "ip": "1"}, peer="81.2.69.160")
    assert gateway.sink.events[0].ip == "81.2.69.160"


def test_forwarded_for_is_ignored_without_trusted_proxies(gateway) -> None:
    track(gateway, [ev(0)], "?ip=1", peer="10.0.0.5", headers={**JSON, "x-forwarded-for": "81.2.69.160"})
    assert gateway.sink.events[0].ip == "10.0.0.5"


def test_forwarded_for_behind_a_trusted_proxy(make_gateway) -> None:
    gateway = make_gateway(trusted_proxies=parse_networks("10.0.0.0/8, 192.168.1.1"))
    cases = [
        ("10.0.0.5", ["81.2.69.160"], "81.2.69.160"),
        ("10.0.0.5", ["1.1.1.1, 81.2.69.160"], "81.2.69.160"),  # right-most untrusted hop
        ("10.0.0.5", ["81.2.69.160, 192.168.1.1", "10.1.2.3"], "81.2.69.160"),  # trusted hops skipped
        ("10.0.0.5", [], "10.0.0.5"),
        ("10.0.0.5", ["10.9.9.9"], "10.9.9.9"),  # every hop trusted: the left-most
        ("81.2.69.160", ["8.8.8.8"], "81.2.69.160"),  # spoofed by an untrusted peer: ignored
        ("::ffff:10.0.0.5", ["[2001:db8::1]:443"], "2001:db8::1"),
    ]
    for peer, chain, expected in cases:
        gateway.sink.events.clear()
        headers = [("content-type", "application/json"), *(("x-forwarded-for", v) for v in chain)]
        r = gateway.request("POST", "/track?ip=1", content=json.dumps([ev(0)]), headers=headers, peer=peer)
        assert r.text == "1"
        assert gateway.sink.events[0].ip == expected, (peer, chain)


@pytest.mark.parametrize(
    ("peer", "chain", "trusted", "expected"),
    [
        ("81.2.69.160", ["8.8.8.8"], "", "81.2.69.160"),
        ("127.0.0.1", ["8.8.8.8"], "127.0.0.1", "8.8.8.8"),
        ("127.0.0.1", ["8.8.8.8:5678"], "127.0.0.1", "8.8.8.8"),
        ("::1", ["2001:db8::1"], "::1", "2001:db8::1"),
        ("::ffff:127.0.0.1", ["8.8.8.8"], "127.0.0.0/8", "8.8.8.8"),
        ("127.0.0.1", ["8.8.8.8", "not-an-ip"], "127.0.0.1", None),
        ("127.0.0.1", ["not-an-ip, 8.8.8.8"], "127.0.0.1", "8.8.8.8"),
        ("127.0.0.1", [" , "], "127.0.0.1", "127.0.0.1"),
        ("testclient", ["8.8.8.8"], "127.0.0.1", None),
        (None, [], "", None),
    ],
    ids=["untrusted", "trusted", "port", "v6", "mapped-peer", "garbage-hop", "garbage-left", "blank", "not-ip", "none"],
)
def test_client_ip(peer: str | None, chain: list[str], trusted: str, expected: str | None) -> None:
    assert client_ip(peer, chain, parse_networks(trusted)) == expected


def test_parse_address_and_networks() -> None:
    assert str(parse_address("[2001:db8::1]:80")) == "2001:db8::1"
    assert parse_address("[2001:db8::1") is None
    assert str(parse_address("::ffff:8.8.8.8")) == "8.8.8.8"
    assert [str(n) for n in parse_networks(" 10.0.0.1/8 ,, ::1, ::ffff:10.0.0.0/104 ")] == [
        "10.0.0.0/8",
        "::1/128",
        "10.0.0.0/8",
    ]
    with pytest.raises(ValueError, match=r"example\.com"):
        parse_networks("10.0.0.0/8, example.com")


def test_trusted_proxies_setting() -> None:
    assert GatewaySettings.from_env({}).trusted_proxies == ()
    settings_ = GatewaySettings.from_env({"FOOTFALL_TRUSTED_PROXIES": "10.0.0.0/8,127.0.0.1"})
    assert [str(n) for n in settings_.trusted_proxies] == ["10.0.0.0/8", "127.0.0.1/32"]
    with pytest.raises(ConfigError, match="FOOTFALL_TRUSTED_PROXIES"):
        GatewaySettings.from_env({"FOOTFALL_TRUSTED_PROXIES": "10.0.0.0/33"})


# -- time and $insert_id ---------------------------------------------------------------------


def test_missing_time_is_the_receive_time(gateway) -> None:
    before = int(time.time() * 1000)
    assert_plain(track(gateway, [ev(0, time=...)]), "1")
    after = int(time.time() * 1000)
    assert before <= gateway.sink.events[0].time_ms <= after


@pytest.mark.parametrize(
    ("age", "accepted"),
    [(4 * DAY, True), (5 * DAY - 120, True), (5 * DAY + 60, False), (30 * DAY, False)],
    ids=["4-days", "just-under-5", "just-over-5", "30-days"],
)
@pytest.mark.parametrize("unit", [1, 1000], ids=["seconds", "ms"])
def test_events_older_than_5_days_are_refused(gateway, age: int, accepted: bool, unit: int) -> None:
    r = track(gateway, [ev(0, time=(int(time.time()) - age) * unit)], "?verbose=1")
    body = verbose(r)
    if accepted:
        assert body == {"status": 1, "error": None}
        assert len(gateway.sink.events) == 1
    else:
        assert body["status"] == 0
        assert "properties.time" in body["error"] and "use /import for events older than 5 days" in body["error"]
        assert gateway.sink.events == []


def test_future_and_pre_1971_times_are_refused_as_on_import(gateway) -> None:
    r = track(gateway, [ev(0, time=int(time.time()) + 7200), ev(1, time=0)], "?strict=1")
    assert [rec["field"] for rec in r.json()["failed_records"]] == ["properties.time", "properties.time"]


@pytest.mark.parametrize("t", [-1.7976931348623157e308, -1e306, -0.5], ids=["most-negative", "huge", "small"])
def test_huge_negative_float_times_fail_cleanly_on_track_and_import(gateway, t: float) -> None:
    # `t * 1000` of such a float is -inf: once a 500, now the "before 1971" failure.
    r = track(gateway, [ev(0, time=t)], "?strict=1")
    assert r.status_code == 400 and r.json()["failed_records"][0]["field"] == "properties.time"
    r = gateway.post("/import?strict=1", json=[ev(0, time=t)], auth=(TOKEN, ""))
    assert r.status_code == 400 and "before 1971" in r.json()["failed_records"][0]["message"]


def test_missing_insert_id_is_derived_from_the_content(make_gateway) -> None:
    t = now_s()
    events = [
        ev(0, time=t, **{"$insert_id": ...}),
        ev(0, time=t, k=1, **{"$insert_id": ...}),
        ev(0, time=t, **{"$insert_id": "x" * 40}),  # invalid: replaced without strict
    ]
    runs = []
    for peer in ("81.2.69.160", "8.8.8.8"):  # a retry from another network: the same ids
        gateway = make_gateway()
        assert track(gateway, events, "?ip=1", peer=peer).text == "1"
        runs.append([e.insert_id for e in gateway.sink.events])
    assert runs[0] == runs[1]
    assert all(DERIVED_ID.fullmatch(i) for i in runs[0])
    missing, other_content, invalid = runs[0]
    assert missing != other_content
    assert invalid == missing  # an invalid id is replaced by the same content-derived one


def test_strict_derives_a_missing_insert_id_but_refuses_an_invalid_one(gateway) -> None:
    r = track(gateway, [ev(0, **{"$insert_id": ...}), ev(1, **{"$insert_id": "bad id!"})], "?strict=1")
    body = r.json()
    assert r.status_code == 400 and body["num_records_imported"] == 1
    assert [(rec["index"], rec["field"]) for rec in body["failed_records"]] == [(1, "properties.$insert_id")]
    assert DERIVED_ID.fullmatch(gateway.sink.events[0].insert_id)


def test_track_rules_do_not_change_import(gateway) -> None:
    # /import keeps requiring `time`, and keeps events older than 5 days.
    events = [ev(0, time=...), ev(1, time=now_s() - 30 * DAY)]
    r = gateway.post("/import?strict=1", json=events, auth=(TOKEN, ""))
    body = r.json()
    assert body["num_records_imported"] == 1
    assert [rec["index"] for rec in body["failed_records"]] == [0]


# -- answers ---------------------------------------------------------------------------------


def test_plain_answer_is_1_when_any_event_was_accepted(gateway) -> None:
    assert_plain(track(gateway, [ev(0, time=0), ev(1)]), "1")
    assert_plain(track(gateway, [ev(2, time=0)]), "0")
    assert_plain(track(gateway, []), "0")
    assert stored(gateway) == [(1, "ins-1")]


def test_verbose_answer_names_the_first_failure(gateway) -> None:
    assert verbose(track(gateway, [ev(0)], "?verbose=1")) == {"status": 1, "error": None}
    body = verbose(track(gateway, [ev(1, distinct_id="anonymous"), ev(2, time=0)], "?verbose=1"))
    assert body["status"] == 0 and "properties.distinct_id" in body["error"]
    assert verbose(track(gateway, [], "?verbose=1")) == {"status": 0, "error": "no events in the request"}


def test_strict_answers_like_import(gateway) -> None:
    r = track(gateway, [ev(0), ev(1)], "?strict=1&verbose=1")
    assert r.json() == {"code": 200, "num_records_imported": 2, "status": "OK"}
    r = track(gateway, [ev(2), ev(3, time=0)], "?strict=1")
    assert r.status_code == 400 and r.json()["num_records_imported"] == 1
    # form bodies keep the form answer
    r = gateway.post("/track?strict=1", data={"data": json.dumps([ev(4, time=0)])})
    assert_plain(r, "0")
    # request errors in strict mode have /import's error shape
    r = track(gateway, b"[", "?strict=1")
    assert r.status_code == 400 and set(r.json()) == {"code", "error", "status"}


def test_img_answers_a_transparent_gif(gateway) -> None:
    r = gateway.get("/track?img=1&data=" + quote(b64(ev(0))))
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/gif"
    assert r.content == TRANSPARENT_GIF and r.content.startswith(b"GIF89a\x01\x00\x01\x00")
    assert r.headers["cache-control"] == "no-store"
    r = gateway.get("/track?img=1&data=" + quote(b64(ev(1, token="nope"))))
    assert (r.status_code, r.headers["content-type"], r.content) == (200, "image/gif", TRANSPARENT_GIF)
    r = gateway.get("/track?img=1&data=%7B")  # malformed: the error keeps its status, still a GIF
    assert (r.status_code, r.headers["content-type"]) == (400, "image/gif")
    assert len(gateway.sink.events) == 1


@pytest.mark.parametrize(
    "name", ["cb", "mp.cb_1", "mixpanel._jsc[12345678]", "mixpanel.other._jsc[1]", "$", "_a.$b", "(function(){})"]
)
def test_callback_answers_javascript(gateway, name: str) -> None:
    r = gateway.get("/track?callback=" + quote(name) + "&data=" + quote(b64(ev(0))))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert r.text == f"{name}(1);"
    r = gateway.get("/track?verbose=1&callback=" + quote(name) + "&data=" + quote(b64(ev(1, time=0))))
    assert r.text.startswith(name + '({"status":0,"error":"')
    assert r.text.endswith('"});')


def test_callback_errors_still_call_back(gateway) -> None:
    r = gateway.get("/track?verbose=1&callback=mp.cb&data=%7B")
    assert r.status_code == 200  # a browser runs a script only from a 2xx answer
    assert r.text.startswith('mp.cb({"status":0,"error":')
    gateway.sink.fail = True
    r = gateway.get("/track?callback=mp.cb&data=" + quote(b64(ev(0))))
    assert (r.status_code, r.text) == (503, "mp.cb(0);")


def test_callback_escapes_line_separators(gateway) -> None:
    r = gateway.get("/track?verbose=1&callback=cb&data=" + quote(b64(ev(0, time=0, **{"k\u2028": 1}))))
    assert "\u2028" not in r.text


@pytest.mark.parametrize(
    "name",
    [
        "alert(1)",
        "a-b",
        "a b",
        "a;b",
        "a..b",
        "a.",
        ".a",
        "1abc",
        "a[b]",
        "a['x']",
        "delete",
        "this.x",
        "function",
        "ä",
        "a\u2028",
        "</script>",
        "x" * 300,
        "(function(){alert(1)})",
    ],
    ids=lambda n: re.sub(r"[^a-z0-9]+", "-", n[:20]) or "sym",
)
def test_bad_callback_names_400(gateway, name: str) -> None:
    assert not valid_callback(name)
    r = gateway.get("/track?callback=" + quote(name) + "&data=" + quote(b64(ev(0))))
    assert_plain(r, "0", 400)
    r = gateway.post("/track?verbose=1", data={"data": json.dumps(ev(0)), "callback": name})
    body = verbose(r, 400)
    assert body["error"] == "callback must be a JavaScript function name: identifiers joined by '.' (e.g. mp.cb_1)"
    assert gateway.sink.events == []


def test_test_flag_and_unknown_parameters_are_ignored(gateway) -> None:
    assert_plain(track(gateway, [ev(0)], "?test=1&_=123&api_key=x&ver=2.0"), "1")


def test_cors_origin_is_echoed_on_answers_and_errors(gateway) -> None:
    origin = {"origin": "https://shop.example"}
    for r in (
        track(gateway, [ev(0)], headers={**JSON, **origin}),
        track(gateway, b"[", "?verbose=1", headers={**JSON, **origin}),
        track(gateway, [ev(0)], headers={**JSON, **origin}, auth=("nobody", "x")),
    ):
        assert r.headers["access-control-allow-origin"] == "https://shop.example"
        assert r.headers["access-control-allow-credentials"] == "true"
        assert "Retry-After" in r.headers["access-control-expose-headers"]
    assert "access-control-allow-origin" not in track(gateway, [ev(1)]).headers


def test_cors_preflight(gateway) -> None:
    headers = {
        "origin": "https://shop.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "Content-Type, X-Custom",
    }
    r = gateway.request("OPTIONS", "/track/", headers=headers)
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "https://shop.example"
    assert "POST" in r.headers["access-control-allow-methods"]
    assert r.headers["access-control-allow-headers"] == "Content-Type, X-Custom"
    r = gateway.request("OPTIONS", "/track", headers={**headers, "access-control-request-headers": "a\tb;c"})
    assert "Content-Type" in r.headers["access-control-allow-headers"]
    assert gateway.sink.events == []


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_405(gateway, method: str) -> None:
    r = gateway.request(method, "/track")
    assert r.status_code == 405 and "POST" in r.headers["allow"]


# -- limits and failures ---------------------------------------------------------------------


def test_2000_events_accepted_2001_refused(gateway) -> None:
    events = [ev(i) for i in range(2001)]
    r = track(gateway, events, "?verbose=1")
    body = verbose(r, 400)
    assert "2001" in body["error"] and "2000" in body["error"]
    assert gateway.sink.events == []
    assert_plain(track(gateway, events[:2000]), "1")
    assert len(gateway.sink.events) == 2000


def test_2001_events_in_a_form_refused(gateway) -> None:
    r = gateway.post("/track", data={"data": b64([ev(i) for i in range(2001)])})
    assert_plain(r, "0", 400)


def test_body_over_2_mb_413(gateway) -> None:
    events = [ev(i, pad="x" * 250, **{f"p{j}": "y" * 250 for j in range(20)}) for i in range(400)]
    raw = json.dumps(events).encode()
    assert len(raw) > 2 * 1024 * 1024
    body = verbose(track(gateway, raw, "?verbose=1"), 413)
    assert body["error"] == "request exceeds max limit of 2097152 bytes"
    r = gateway.post("/track", data={"data": b64(events)})
    assert_plain(r, "0", 413)
    assert gateway.sink.events == []


def test_query_string_data_over_the_limit_413(make_gateway) -> None:
    gateway = make_gateway(ImportLimits(max_request_bytes=4096))
    r = gateway.get("/track?data=" + quote(b64([ev(i, pad="x" * 200) for i in range(30)])))
    assert_plain(r, "0", 413)
    assert gateway.sink.events == []


def test_sink_unavailable_503_with_retry_after(gateway) -> None:
    gateway.sink.fail = True
    r = track(gateway, [ev(0)], "?verbose=1")
    assert verbose(r, 503)["status"] == 0
    assert int(r.headers["retry-after"]) > 0
    # nothing accepted: the sink is not asked, and the answer is 0 rather than a 503
    assert_plain(track(gateway, [ev(0, token="nope")]), "0")


# -- never a 500 -----------------------------------------------------------------------------

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
NOW = int(time.time())
texts = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(codec=None), max_size=8),
    st.sampled_from(["", "anonymous", "ä", "\ud800", "x" * 300]),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), texts)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
tokens = st.sampled_from([TOKEN, TOKEN, TOKEN2, "unknown", "", None, 7, ...])


@st.composite
def track_events(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(values)
    props: dict[str, Any] = {
        "token": draw(tokens),
        "time": draw(
            st.one_of(
                st.integers(NOW - 10 * DAY, NOW + 7200),
                st.integers(NOW - 10 * DAY, NOW + 7200).map(lambda s: s * 1000),
                st.floats(NOW - DAY, NOW),
                st.just(...),
                scalars,
            )
        ),
        "distinct_id": draw(st.one_of(st.from_regex(r"u[0-9]{1,4}", fullmatch=True), scalars)),
        "$insert_id": draw(st.one_of(st.from_regex(r"[A-Za-z0-9-]{1,40}", fullmatch=True), st.just(...), scalars)),
    }
    if draw(st.booleans()):
        props["ip"] = draw(st.one_of(st.sampled_from(["81.2.69.160", "2001:db8::1", 0, ""]), scalars))
    props.update(draw(st.dictionaries(texts, values, max_size=4)))
    item: Any = {"event": draw(st.one_of(st.just("Page View"), texts, scalars)), "properties": props}
    item["properties"] = {k: v for k, v in props.items() if v is not ...}
    if draw(st.integers(0, 9)) == 0:
        item["extra"] = 1
    return item


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode("ascii")


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes, list[tuple[str, str]], str | None]:
    """(method, query, body, headers, peer)."""
    events = draw(st.one_of(st.lists(track_events(), max_size=6), track_events()))
    query: dict[str, str] = draw(
        st.dictionaries(
            st.sampled_from(["verbose", "ip", "img", "strict", "callback", "test", "project_id", "data"]),
            st.one_of(st.sampled_from(["1", "0", "", "mp.cb", "a-b", "(function(){})"]), st.text(max_size=6)),
            max_size=4,
        )
    )
    kind = draw(st.sampled_from(["json", "ndjson", "form", "query", "beacon", "random"]))
    headers: list[tuple[str, str]] = []
    body = b""
    if kind == "json":
        body, ctype = dumps(events), "application/json"
    elif kind == "ndjson":
        items = events if isinstance(events, list) else [events]
        body, ctype = b"\n".join(dumps(e) for e in items) + b"\n{x", "application/x-ndjson"
    elif kind in ("form", "beacon"):
        payload = dumps(events).decode()
        data = draw(st.sampled_from([payload, base64.b64encode(payload.encode()).decode()]))
        form = {
            "data": data,
            **draw(st.dictionaries(st.sampled_from(["verbose", "ip", "callback"]), texts, max_size=2)),
        }
        body = urlencode(form, encoding="utf-8", errors="surrogatepass").encode()
        ctype = "application/x-www-form-urlencoded" if kind == "form" else "text/plain;charset=UTF-8"
    elif kind == "query":
        query["data"] = base64.b64encode(dumps(events)).decode()
        ctype = ""
    else:
        body = draw(st.binary(max_size=200))
        ctype = draw(st.sampled_from(["application/json", "", "text/plain", "image/png"]))
    if ctype:
        headers.append(("content-type", ctype))
    if body and draw(st.integers(0, 4)) == 0:
        body = gzip.compress(body)
        headers.append(("content-encoding", draw(st.sampled_from(["gzip", "gzip", "br"]))))
    auth = draw(
        st.sampled_from(
            [None, None, None, f"{TOKEN}:", f"{CREDS.secret2}:", f"owner-sa:{CREDS.sa_secret}", "bad:", "x"]
        )
    )
    if auth is not None:
        headers.append(("authorization", "Basic " + base64.b64encode(auth.encode()).decode()))
    for _ in range(draw(st.integers(0, 2))):
        headers.append(("x-forwarded-for", draw(st.sampled_from(["8.8.8.8", "1.1.1.1, 10.0.0.1", "junk", "[::1]:9"]))))
    if draw(st.booleans()):
        headers.append(("origin", "https://shop.example"))
    peer = draw(st.sampled_from([None, "10.0.0.1", "81.2.69.160", "::1"]))
    method = draw(st.sampled_from(["POST", "POST", "GET"]))
    return method, urlencode(query, encoding="utf-8", errors="surrogatepass"), body, headers, peer


@pytest.fixture(scope="module")
def fuzz_gateway(make_gateway):  # type: ignore[no-untyped-def]
    return make_gateway(trusted_proxies=parse_networks("10.0.0.0/8"))


def check_event(e: Event, now_ms: int) -> None:
    assert e.project_id in (1, 2)
    assert isinstance(e.event, str) and 0 < len(e.event) <= 255
    assert now_ms - 5 * DAY * 1000 - 60_000 <= e.time_ms <= now_ms + 3600 * 1000 + 60_000
    assert isinstance(e.distinct_id, str) and e.distinct_id.strip().lower() not in ("anonymous", "null", "0")
    assert re.fullmatch(r"[A-Za-z0-9-]{1,36}", e.insert_id)
    assert not {"token", "ip", "time", "distinct_id", "$insert_id"} & set(e.properties)
    assert e.ip is None or isinstance(e.ip, str)
    json.dumps(e.properties)


@FUZZ
@given(request=requests(), failing=st.integers(0, 9).map(lambda n: n == 0))
def test_arbitrary_requests_never_500_and_answers_match_the_sink(fuzz_gateway, request, failing: bool) -> None:
    method, query, body, headers, peer = request
    gateway = fuzz_gateway
    gateway.sink.events.clear()
    gateway.sink.fail = failing
    now_ms = int(time.time() * 1000)
    r = gateway.request(method, "/track?" + query, content=body, headers=headers, peer=peer)
    assert r.status_code < 500 or (r.status_code == 503 and failing), (r.status_code, r.text[:300])
    assert "Traceback" not in r.text and "internal error" not in r.text
    events = gateway.sink.events
    for e in events:
        check_event(e, now_ms)
    if r.status_code not in (200, 400):
        assert events == []
    ctype = r.headers.get("content-type", "")
    if ctype.startswith("text/plain"):
        assert r.text in ("0", "1")
        assert (r.text == "1") == bool(events)
    elif ctype.startswith("application/json"):
        answer = r.json()
        if "num_records_imported" in answer:
            assert answer["num_records_imported"] == len(events)
        elif set(answer) == {"status", "error"} and answer["status"] in (0, 1):
            assert (answer["status"] == 1) == bool(events)
        else:
            assert "error" in answer
    elif ctype.startswith("text/javascript"):
        assert re.fullmatch(r"[A-Za-z0-9_$.\[\]]+\(.*\);|\(function\(\)\{\}\)\(.*\);", r.text, re.S)
    else:
        assert ctype == "image/gif" and r.content == TRANSPARENT_GIF
