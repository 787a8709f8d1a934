"""`/import` end to end against a `footfall serve` subprocess: every body form the
interface and the official clients use, dedup, restarts, concurrent clients, read back
through the raw export endpoint."""

from __future__ import annotations

import base64
import concurrent.futures
import gzip
import stat
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel import Consumer, Mixpanel
from mixpanel.credentials import ServiceAccountCredentials

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = pytest.mark.e2e

TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SECRET = CREDS["FOOTFALL_BOOTSTRAP_SECRET"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])


def make_event(
    name: str = "Signed up",
    *,
    distinct_id: str = "u1",
    insert_id: str | None = None,
    t: int | None = None,
    **props: Any,
) -> dict[str, Any]:
    return {
        "event": name,
        "properties": {
            "time": t if t is not None else int(time.time()) - 60,
            "distinct_id": distinct_id,
            "$insert_id": insert_id or uuid.uuid4().hex,
            **props,
        },
    }


def export(server: ServeProcess, **params: str) -> list[dict[str, Any]]:
    today = datetime.now(UTC).date().isoformat()
    query = {"from_date": "2020-01-01", "to_date": today, "project_id": "1", **params}
    r = httpx.get(server.base + "/api/2.0/export", params=query, auth=SA, timeout=30)
    assert r.status_code == 200, r.text
    return [orjson.loads(line) for line in r.content.splitlines() if line.strip()]


def post_import(
    server: ServeProcess,
    body: bytes,
    *,
    content_type: str = "application/json",
    strict: bool = True,
    headers: dict[str, str] | None = None,
    auth: tuple[str, str] = (TOKEN, ""),
) -> httpx.Response:
    url = server.base + "/import" + ("?strict=1" if strict else "")
    return httpx.post(
        url, content=body, auth=auth, timeout=30, headers={"Content-Type": content_type, **(headers or {})}
    )


def test_json_ndjson_gzip_round_trip(serve_process: ServeProcess) -> None:
    a = [make_event("A", n=i) for i in range(3)]
    b = [make_event("B", n=i) for i in range(2)]
    c = [make_event("C", n=i) for i in range(4)]
    r = post_import(serve_process, orjson.dumps(a))
    assert r.json() == {"code": 200, "num_records_imported": 3, "status": "OK"}
    r = post_import(serve_process, b"\n".join(orjson.dumps(e) for e in b), content_type="application/x-ndjson")
    assert r.json()["num_records_imported"] == 2
    r = post_import(serve_process, gzip.compress(orjson.dumps(c)), headers={"Content-Encoding": "gzip"})
    assert r.json()["num_records_imported"] == 4
    exported = export(serve_process)
    assert sorted(e["properties"]["$insert_id"] for e in exported) == sorted(
        e["properties"]["$insert_id"] for e in a + b + c
    )
    one = next(e for e in exported if e["properties"]["$insert_id"] == a[0]["properties"]["$insert_id"])
    assert one["event"] == "A" and one["properties"]["n"] == 0 and one["properties"]["distinct_id"] == "u1"
    assert export(serve_process, event='["B"]') and {e["event"] for e in export(serve_process, event='["B"]')} == {"B"}


def test_strict_partial_failure_imports_the_valid_ones(serve_process: ServeProcess) -> None:
    good = make_event("Good")
    bad = make_event("Bad", t=1)  # 1970: before the 1971 floor
    r = post_import(serve_process, orjson.dumps([good, bad]))
    assert r.status_code == 400
    body = r.json()
    assert body["num_records_imported"] == 1 and body["status"] == "Bad Request"
    assert body["failed_records"][0]["index"] == 1
    assert body["failed_records"][0]["$insert_id"] == bad["properties"]["$insert_id"]
    assert body["failed_records"][0]["field"] == "properties.time"
    assert [e["event"] for e in export(serve_process)] == ["Good"]


def test_legacy_form_modes(serve_process: ServeProcess) -> None:
    e1, e2, e3 = make_event("Raw"), make_event("B64"), make_event("Get")
    r = httpx.post(
        serve_process.base + "/import", data={"data": orjson.dumps([e1]).decode(), "verbose": "1"}, auth=(TOKEN, "")
    )
    assert r.json() == {"status": 1, "error": None}
    r = httpx.post(
        serve_process.base + "/import/", data={"data": base64.b64encode(orjson.dumps([e2])).decode()}, auth=(TOKEN, "")
    )
    assert r.text == "1"
    r = httpx.get(
        serve_process.base + "/import", params={"data": base64.b64encode(orjson.dumps(e3)).decode()}, auth=(TOKEN, "")
    )
    assert r.text == "1"
    r = httpx.post(serve_process.base + "/import", data={"data": "not json", "verbose": "1"}, auth=(TOKEN, ""))
    assert r.status_code == 400 and r.json()["status"] == 0 and r.json()["error"]
    assert sorted(e["event"] for e in export(serve_process)) == ["B64", "Get", "Raw"]


def test_official_mixpanel_library_imports(serve_process: ServeProcess) -> None:
    creds = ServiceAccountCredentials(username=SA[0], secret=SA[1], project_id="1")
    mp = Mixpanel(TOKEN, consumer=Consumer(import_url=serve_process.base + "/import", credentials=creds))
    stamp = int(time.time()) - 3600
    mp.import_data(
        api_key=None,
        distinct_id="lib-user",
        event_name="Lib Event",
        timestamp=stamp,
        properties={"plan": "pro", "amount": 12.5},
    )
    # The deprecated api_secret form (Basic "secret:") still works.
    legacy = Mixpanel(TOKEN, consumer=Consumer(import_url=serve_process.base + "/import"))
    legacy.import_data(
        api_key="unused", distinct_id="lib-user", event_name="Legacy Event", timestamp=stamp, api_secret=SECRET
    )
    events = {e["event"]: e["properties"] for e in export(serve_process)}
    assert events["Lib Event"]["time"] == stamp and events["Lib Event"]["plan"] == "pro"
    assert events["Lib Event"]["distinct_id"] == "lib-user" and "token" not in events["Lib Event"]
    assert "Legacy Event" in events


def test_duplicates_surface_once_within_across_and_after_restart(serve_process: ServeProcess) -> None:
    e = make_event("Dup", insert_id="dup-1")
    other = make_event("Dup", insert_id="dup-2")
    r = post_import(serve_process, orjson.dumps([e, e, other]))
    assert r.json()["num_records_imported"] == 3  # valid records; duplicates are removed in storage
    post_import(serve_process, orjson.dumps([e]))
    assert sorted(x["properties"]["$insert_id"] for x in export(serve_process)) == ["dup-1", "dup-2"]
    serve_process.restart()
    post_import(serve_process, orjson.dumps([e, other]))
    assert sorted(x["properties"]["$insert_id"] for x in export(serve_process)) == ["dup-1", "dup-2"]


def fast_path_count(server: ServeProcess, outcome: str) -> float:
    for line in httpx.get(server.base + "/metrics", timeout=30).text.splitlines():
        if line.startswith(f'footfall_import_fast_path_total{{outcome="{outcome}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_the_fast_path_and_the_python_path_store_the_same_events(serve_process: ServeProcess) -> None:
    """A plain body goes through the Rust fast path, one with a string to truncate through the
    Python path (both counted in /metrics); the export reads the same events back from both."""
    props = {
        "plan": "pro",
        "price": 12.5,
        "big": 2**64 - 1,
        "tiny": 1e-7,
        "text": 'caf\u00e9 \U0001f600 "quoted" \\ \n\t\x01',
        "nested": {"a": [1, 2.0, None, True], "b": {"c": []}},
        "token": "dropped",
        "ip": "203.0.113.9",
    }
    stamp = int(time.time()) - 60
    plain = [make_event("Fast", distinct_id=f"f{i}", t=stamp + i, n=i, **props) for i in range(3)]
    taken, declined = fast_path_count(serve_process, "taken"), fast_path_count(serve_process, "declined")
    assert post_import(serve_process, orjson.dumps(plain)).json()["num_records_imported"] == 3
    assert (fast_path_count(serve_process, "taken"), fast_path_count(serve_process, "declined")) == (
        taken + 1,
        declined,
    )

    slow = [make_event("Slow", distinct_id=f"f{i}", t=stamp + i, n=i, **props) for i in range(3)]
    slow[2]["properties"]["long"] = "x" * 300
    assert post_import(serve_process, orjson.dumps(slow)).json()["num_records_imported"] == 3
    assert fast_path_count(serve_process, "declined") == declined + 1

    def without_ids(name: str) -> list[dict[str, Any]]:
        rows = sorted(export(serve_process, event=f'["{name}"]'), key=lambda e: e["properties"]["n"])
        return [
            {k: v for k, v in e["properties"].items() if k not in ("$insert_id", "long", "mp_processing_time_ms")}
            for e in rows
        ]

    fast_rows, slow_rows = without_ids("Fast"), without_ids("Slow")
    assert fast_rows == slow_rows and len(fast_rows) == 3
    assert fast_rows[0]["text"] == props["text"] and fast_rows[0]["big"] == 2**64 - 1 and fast_rows[0]["tiny"] == 1e-7
    assert "token" not in fast_rows[0] and "ip" not in fast_rows[0]

    # A later request's copy of an event replaces the earlier one, through the fast path too.
    first = make_event("Again", insert_id="again-1", t=stamp, plan="free")
    post_import(serve_process, orjson.dumps([first]))
    first["properties"]["plan"] = "paid"
    post_import(serve_process, orjson.dumps([first]))
    assert [e["properties"]["plan"] for e in export(serve_process, event='["Again"]')] == ["paid"]


def test_concurrent_clients(serve_process: ServeProcess) -> None:
    batches = [[make_event("Conc", distinct_id=f"c{k}", idx=i) for i in range(200)] for k in range(12)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda b: post_import(serve_process, orjson.dumps(b)), batches))
    assert all(r.status_code == 200 and r.json()["num_records_imported"] == 200 for r in results)
    assert len(export(serve_process, event='["Conc"]')) == 12 * 200


def test_auth_failures_are_json(serve_process: ServeProcess) -> None:
    body = orjson.dumps([make_event()])
    r = post_import(serve_process, body, auth=("wrong-token", ""))
    assert r.status_code == 401 and r.json()["status"] == "Unauthorized"
    r = httpx.post(serve_process.base + "/import?strict=1", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 401 and "error" in r.json()
    r = httpx.post(
        serve_process.base + "/import?strict=1&project_id=1",
        content=body,
        auth=(SA[0], "bad"),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 401


def test_bootstrap_file_is_private_and_printed_once(serve_process: ServeProcess) -> None:
    path = serve_process.data_dir / "bootstrap.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    content = orjson.loads(path.read_bytes())
    assert content["project_token"] == TOKEN and content["service_account"]["role"] == "owner"
    assert TOKEN in serve_process.log()
    serve_process.restart()
    assert TOKEN not in serve_process.log()  # the new log of the second start


@pytest.mark.parametrize("kind", ["geoip2", "flat"], ids=["geoip2-city", "dbip-lite-flat"])
def test_geoip_enrichment_in_serve(tmp_path: Path, kind: str) -> None:
    from tests.geo import write_test_city_db

    db = tmp_path / f"{kind}.mmdb"
    write_test_city_db(db, kind)  # type: ignore[arg-type]
    server = ServeProcess(tmp_path / "data", env={"FOOTFALL_GEOIP_DB": str(db)})
    server.start()
    try:
        events = [
            make_event("Geo", ip="81.2.69.160"),
            make_event("Geo", ip="::ffff:8.8.8.8"),
            make_event("Geo", ip="192.0.2.1"),
            make_event("Geo", ip=0),
        ]
        assert post_import(server, orjson.dumps(events)).json()["num_records_imported"] == 4
        by_id = {e["properties"]["$insert_id"]: e["properties"] for e in export(server)}
        london, mountain_view, unknown, skipped = (by_id[e["properties"]["$insert_id"]] for e in events)
        assert (london["$city"], london["$region"], london["mp_country_code"]) == ("London", "England", "GB")
        assert mountain_view["$city"] == "Mountain View" and mountain_view["mp_country_code"] == "US"
        assert "$city" not in unknown and "$city" not in skipped
        assert all("ip" not in props for props in by_id.values())
    finally:
        server.stop()
