"""First-hour request edges of the ingestion interface (issue 15): `GET /import` without
events is a 405 before any credential check, a body without `Content-Type` gets a message
naming the header to send, and unknown routes, wrong methods and oversized bodies answer
in the ingestion error shape. Property keys are truncated to 255 characters like values."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from footfall.shared.config import ImportLimits


def ingestion_error(r: Any, status: int) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"code", "error", "status"} and body["code"] == status, body
    return str(body["error"])


@pytest.mark.parametrize("auth", [None, ("nope", ""), "token"], ids=["no-credentials", "bad", "good"])
@pytest.mark.parametrize("path", ["/import", "/import/", "/import?strict=1"])
def test_get_import_without_data_is_405(gateway, creds, path: str, auth: Any) -> None:
    if auth == "token":
        auth = (creds.token, "")
    r = gateway.get(path, auth=auth)
    assert "POST" in ingestion_error(r, 405)
    assert r.headers["allow"] == "POST"
    assert gateway.sink.events == []


def test_get_import_with_data_still_imports(gateway, creds) -> None:
    ev = {"event": "e", "properties": {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": "g-1"}}
    r = gateway.get("/import", params={"data": json.dumps([ev])}, auth=(creds.token, ""))
    assert r.status_code == 200 and len(gateway.sink.events) == 1


def test_body_without_content_type_names_the_header(gateway, creds) -> None:
    ev = {"event": "e", "properties": {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": "c-1"}}
    r = gateway.post("/import?strict=1", content=json.dumps([ev]).encode(), auth=(creds.token, ""))
    message = ingestion_error(r, 415)
    assert "Content-Type" in message and "application/json" in message and "application/x-ndjson" in message
    assert gateway.sink.events == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/import/nested", 404), ("POST", "/track/x/y", 404), ("DELETE", "/import", 405), ("PUT", "/track", 405)],
)
def test_unknown_routes_and_methods_answer_in_the_ingestion_shape(gateway, method: str, path: str, status: int) -> None:
    ingestion_error(gateway.request(method, path), status)


def test_oversized_body_answers_413_in_the_ingestion_shape(make_gateway, creds) -> None:
    gw = make_gateway(ImportLimits(max_request_bytes=1000))
    body = b"[" + b" " * 5000 + b"]"
    r = gw.post("/import", content=body, headers={"content-type": "application/json"}, auth=(creds.token, ""))
    assert "1000 bytes" in ingestion_error(r, 413)


def test_long_property_keys_are_truncated_to_255(gateway, creds) -> None:
    long_key, nested_key = "k" * 300, "n" * 1000
    props = {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": "lk-1", long_key: "v"}
    props["obj"] = {nested_key: 1}
    r = gateway.post(
        "/import?strict=1",
        content=json.dumps([{"event": "e", "properties": props}]).encode(),
        headers={"content-type": "application/json"},
        auth=(creds.token, ""),
    )
    assert r.status_code == 200, r.text
    (stored,) = gateway.sink.events
    assert stored.properties == {"k" * 255: "v", "obj": {"n" * 255: 1}}
