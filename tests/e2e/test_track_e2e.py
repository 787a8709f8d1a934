"""`/track` end to end against a `footfall serve` subprocess: the official `mixpanel`
library, the browser SDK's request shapes, deduplication, and `ip=1` geolocation behind a
trusted proxy, read back through `/api/2.0/export` with the project secret."""

from __future__ import annotations

import base64
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel import BufferedConsumer, Consumer, Mixpanel, MixpanelException

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = pytest.mark.e2e

TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SECRET = CREDS["FOOTFALL_BOOTSTRAP_SECRET"]


def export(server: ServeProcess, **params: str) -> list[dict[str, Any]]:
    today = datetime.now(UTC).date().isoformat()
    query = {"from_date": "2020-01-01", "to_date": today, **params}
    r = httpx.get(server.base + "/api/2.0/export", params=query, auth=(SECRET, ""), timeout=30)
    assert r.status_code == 200, r.text
    return [orjson.loads(line) for line in r.content.splitlines() if line.strip()]


def browser_event(name: str, **props: Any) -> dict[str, Any]:
    """What mixpanel-js puts in `data=` (before base64)."""
    base = {
        "token": TOKEN,
        "distinct_id": "$device:abc",
        "$device_id": "abc",
        "time": time.time(),
        "$insert_id": uuid.uuid4().hex[:20],
        "mp_lib": "web",
    }
    return {"event": name, "properties": {**base, **props}}


def test_official_library_tracks_and_retries_deduplicate(serve_process: ServeProcess) -> None:
    mp = Mixpanel(TOKEN, consumer=Consumer(events_url=serve_process.base + "/track"))
    stamp = time.time() - 120
    props = {"plan": "pro", "amount": 12.5, "time": stamp, "$insert_id": "lib-dup-1"}
    mp.track("lib-user", "Lib Event", props)
    mp.track("lib-user", "Lib Event", props)  # the same event again (a client retry)
    mp.track("lib-user", "Other Event")  # the library's own time and $insert_id
    buffered = BufferedConsumer(events_url=serve_process.base + "/track", max_size=50)
    batch = Mixpanel(TOKEN, consumer=buffered)
    for i in range(5):
        batch.track(f"batch-{i}", "Batched", {"i": i})
    buffered.flush()

    events = export(serve_process)
    lib = [e for e in events if e["event"] == "Lib Event"]
    assert len(lib) == 1
    assert lib[0]["properties"]["distinct_id"] == "lib-user" and lib[0]["properties"]["plan"] == "pro"
    assert lib[0]["properties"]["time"] == int(stamp)
    assert lib[0]["properties"]["mp_lib"] == "python" and "token" not in lib[0]["properties"]
    assert sum(e["event"] == "Other Event" for e in events) == 1
    assert sorted(e["properties"]["i"] for e in events if e["event"] == "Batched") == [0, 1, 2, 3, 4]


def test_official_library_raises_on_a_wrong_token(serve_process: ServeProcess) -> None:
    mp = Mixpanel("not-a-footfall-token", consumer=Consumer(events_url=serve_process.base + "/track"))
    with pytest.raises(MixpanelException, match="token"):
        mp.track("u1", "Nope")
    assert export(serve_process) == []


def test_browser_sdk_request_shapes(serve_process: ServeProcess) -> None:
    base = serve_process.base
    origin = {"Origin": "https://shop.example"}
    # XHR batch: POST form data=<base64 array>, flags in the query, credentials (CORS).
    batch = [browser_event("Viewed", i=i) for i in range(3)]
    payload = base64.b64encode(orjson.dumps(batch)).decode()
    r = httpx.post(base + "/track/?verbose=1&ip=1&_=1", data={"data": payload}, headers=origin)
    assert r.json() == {"status": 1, "error": None}
    assert r.headers["access-control-allow-origin"] == "https://shop.example"
    assert r.headers["access-control-allow-credentials"] == "true"
    # sendBeacon on unload: a text/plain body `data=...`.
    beacon = "data=" + base64.b64encode(orjson.dumps([browser_event("Left")])).decode()
    r = httpx.post(base + "/track/?ip=1", content=beacon, headers={"Content-Type": "text/plain;charset=UTF-8"})
    assert r.text == "1"
    # JSONP and pixel fallbacks: GET with data in the query string.
    single = base64.b64encode(orjson.dumps(browser_event("Jsonp"))).decode()
    r = httpx.get(base + "/track/", params={"data": single, "callback": "mixpanel._jsc[12345]", "ip": "1"})
    assert r.headers["content-type"].startswith("text/javascript") and r.text == "mixpanel._jsc[12345](1);"
    pixel = base64.b64encode(orjson.dumps(browser_event("Pixel"))).decode()
    r = httpx.get(base + "/track", params={"data": pixel, "img": "1"})
    assert r.headers["content-type"] == "image/gif" and r.content.startswith(b"GIF89a")
    # an event more than 5 days old is refused with the reason
    old = browser_event("Old", time=time.time() - 6 * 86400)
    r = httpx.post(base + "/track?verbose=1", data={"data": orjson.dumps(old).decode()})
    assert r.json()["status"] == 0 and "use /import" in r.json()["error"]

    names = sorted(e["event"] for e in export(serve_process))
    assert names == ["Jsonp", "Left", "Pixel", "Viewed", "Viewed", "Viewed"]


def test_ip_1_geolocates_behind_a_trusted_proxy_and_stores_no_address(tmp_path: Path) -> None:
    from tests.geo import write_test_city_db

    db = write_test_city_db(tmp_path / "city.mmdb", "geoip2")
    env = {"FOOTFALL_GEOIP_DB": str(db), "FOOTFALL_TRUSTED_PROXIES": "127.0.0.1, ::1"}
    server = ServeProcess(tmp_path / "data", env=env)
    server.start()
    try:
        forwarded = {"X-Forwarded-For": "198.51.100.7, 81.2.69.160"}  # the proxy appended the client
        events = [
            browser_event("Geo", **{"$insert_id": "geo-1"}),
            browser_event("Geo", ip="8.8.8.8", **{"$insert_id": "geo-2"}),  # an ip property wins
            browser_event("Geo", ip=0, **{"$insert_id": "geo-3"}),  # ip=0: no geolocation
        ]
        r = httpx.post(server.base + "/track?ip=1", json=events, headers=forwarded)
        assert r.text == "1"
        r = httpx.post(server.base + "/track", json=[browser_event("Geo", **{"$insert_id": "geo-4"})])  # no ip=1
        assert r.text == "1"
        by_id = {e["properties"]["$insert_id"]: e["properties"] for e in export(server)}
        assert (by_id["geo-1"]["$city"], by_id["geo-1"]["mp_country_code"]) == ("London", "GB")
        assert by_id["geo-2"]["$city"] == "Mountain View"
        assert "$city" not in by_id["geo-3"] and "$city" not in by_id["geo-4"]
        assert all("ip" not in props for props in by_id.values())
    finally:
        server.stop()


def test_forwarded_for_is_ignored_without_trusted_proxies(tmp_path: Path) -> None:
    from tests.geo import write_test_city_db

    db = write_test_city_db(tmp_path / "city.mmdb", "geoip2")
    server = ServeProcess(tmp_path / "data", env={"FOOTFALL_GEOIP_DB": str(db)})
    server.start()
    try:
        # A spoofed header from a peer that is not a trusted proxy (uvicorn's own handling,
        # which trusted 127.0.0.1, is off): the peer 127.0.0.1 is used, which has no place.
        r = httpx.post(
            server.base + "/track?ip=1", json=[browser_event("Spoof")], headers={"X-Forwarded-For": "81.2.69.160"}
        )
        assert r.text == "1"
        (event,) = export(server)
        assert "$city" not in event["properties"] and "mp_country_code" not in event["properties"]
    finally:
        server.stop()
