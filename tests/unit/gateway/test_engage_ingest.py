"""`POST /engage` and `POST /groups` on the in-process gateway (`MemorySink`): body forms,
projects from `$token` or credentials, the strict / verbose / `1`/`0` answers, geolocation
from the client's address, limits, and never a 500."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from footfall.shared.config import ImportLimits
from footfall.shared.profiles.updates import ProfileUpdate
from tests.unit.conftest import Creds, Gateway

JSON = {"content-type": "application/json"}


def user(creds: Creds, op: str = "$set", value: Any = None, **extra: Any) -> dict[str, Any]:
    return {"$token": creds.token, "$distinct_id": "u1", op: {"plan": "pro"} if value is None else value, **extra}


def group(creds: Creds, op: str = "$set", value: Any = None) -> dict[str, Any]:
    return {"$token": creds.token, "$group_key": "company", "$group_id": "acme", op: value or {"size": 10}}


def published(gateway: Gateway, stream: str) -> list[ProfileUpdate]:
    return gateway.sink.published.get(stream, [])


def test_json_batch_with_tokens(gateway: Gateway, creds: Creds) -> None:
    body = [user(creds), user(creds, "$add", {"n": 2}), {**user(creds), "$token": creds.token2}]
    r = gateway.post("/engage?ip=0", content=json.dumps(body), headers=JSON)
    assert (r.status_code, r.text) == (200, "1")
    updates = published(gateway, "profiles")
    assert [(u.project_id, u.op) for u in updates] == [(1, "$set"), (1, "$add"), (2, "$set")]
    assert all(u.ip is None and u.group_key == "" for u in updates)


def test_mixpanel_utils_form_with_base64_data(gateway: Gateway, creds: Creds) -> None:
    batch = [user(creds, "$set", {"a": 1}, **{"$ignore_time": True, "$ip": 0, "$ignore_alias": False})]
    data = base64.b64encode(orjson.dumps(batch)).decode()
    r = gateway.post("/engage", data={"data": data, "verbose": "1"})
    assert r.json() == {"status": 1, "error": None}
    assert published(gateway, "profiles")[0].ignore_time is True
    # what its people methods send with a service account: `project_id` in the form body
    form = {"data": data, "project_id": "1"}
    r = gateway.post("/engage?verbose=1", data=form, auth=("owner-sa", creds.sa_secret))
    assert r.json() == {"status": 1, "error": None}
    r = gateway.post("/engage?verbose=1", data={**form, "project_id": "2"}, auth=("owner-sa", creds.sa_secret))
    assert r.status_code == 403
    assert [u.project_id for u in published(gateway, "profiles")] == [1, 1]


def test_strict_answers_list_the_invalid_updates_and_keep_the_valid(gateway: Gateway, creds: Creds) -> None:
    body = [user(creds), {"$token": creds.token, "$distinct_id": "u2", "$add": {"n": "x"}}, {"nothing": 1}]
    r = gateway.post("/engage?strict=1&verbose=1", content=json.dumps(body), headers=JSON)
    assert r.status_code == 400
    assert r.json() == {
        "code": 400,
        "status": "Bad Request",
        "error": "some updates in the request failed validation",
        "num_good_events": 1,
        "failed_records": [
            {"index": 1, "$distinct_id": "u2", "field": "$add.n", "message": "$add.n must be a finite number"},
            {
                "index": 2,
                "$distinct_id": None,
                "field": "$token",
                "message": "$token is required (the project's token)",
            },
        ],
    }
    assert len(published(gateway, "profiles")) == 1
    ok = gateway.post("/engage?strict=1", content=json.dumps([user(creds)]), headers=JSON)
    assert ok.json() == {"code": 200, "status": "OK", "num_good_events": 1}


def test_credentials_name_the_project(gateway: Gateway, creds: Creds) -> None:
    no_token = {"$distinct_id": "u1", "$set": {"a": 1}}
    r = gateway.post("/engage?strict=1", content=json.dumps([no_token]), headers=JSON, auth=(creds.secret2, ""))
    assert r.json()["num_good_events"] == 1 and published(gateway, "profiles")[0].project_id == 2
    other = {**no_token, "$token": creds.token}
    r = gateway.post("/engage?strict=1", content=json.dumps([other]), headers=JSON, auth=(creds.secret2, ""))
    assert r.status_code == 400 and r.json()["failed_records"][0]["field"] == "$token"
    bad = gateway.post("/engage", content=json.dumps([no_token]), headers=JSON, auth=("wrong", ""))
    assert bad.status_code == 401
    analyst = gateway.post(
        "/engage?project_id=1", content=json.dumps([no_token]), headers=JSON, auth=("analyst-sa", creds.sa_secret)
    )
    assert analyst.status_code == 403


def test_unknown_token_fails_the_update(gateway: Gateway, creds: Creds) -> None:
    r = gateway.post("/engage", content=json.dumps([{**user(creds), "$token": "nope"}]), headers=JSON)
    assert (r.status_code, r.text) == (200, "0")
    assert published(gateway, "profiles") == []


def test_groups_take_group_updates_only(gateway: Gateway, creds: Creds) -> None:
    r = gateway.post(
        "/groups?strict=1", content=json.dumps([group(creds), group(creds, "$add", {"n": 1})]), headers=JSON
    )
    assert r.status_code == 400
    assert r.json()["failed_records"] == [
        {"index": 1, "$distinct_id": "acme", "field": "$add", "message": "$add is not an operation of group profiles"}
    ]
    (update,) = published(gateway, "groups")
    assert (update.group_key, update.profile_id, update.op) == ("company", "acme", "$set")


def test_geolocation_from_the_client_address_unless_ip_0(make_gateway: Any, creds: Creds) -> None:
    gateway: Gateway = make_gateway()
    gateway.post("/engage", content=json.dumps([user(creds)]), headers=JSON, peer="81.2.69.160")
    gateway.post("/engage?ip=0", content=json.dumps([user(creds)]), headers=JSON, peer="81.2.69.160")
    gateway.post(
        "/engage", content=json.dumps([user(creds, **{"$ip": "2.125.160.216"})]), headers=JSON, peer="81.2.69.160"
    )
    # `$ip` "0" (or the number 0, as mixpanel-utils sends it) turns geolocation off for that update
    both = [user(creds, **{"$ip": "0"}), user(creds, **{"$ip": 0})]
    gateway.post("/engage", content=json.dumps(both), headers=JSON, peer="81.2.69.160")
    assert [u.ip for u in published(gateway, "profiles")] == ["81.2.69.160", None, "2.125.160.216", "0", "0"]


def test_gzip_ndjson_and_get_with_data(gateway: Gateway, creds: Creds) -> None:
    lines = b"\n".join(orjson.dumps(user(creds)) for _ in range(3)) + b"\nnot json\n"
    r = gateway.post(
        "/engage?strict=1",
        content=gzip.compress(lines),
        headers={"content-type": "application/x-ndjson", "content-encoding": "gzip"},
    )
    assert r.status_code == 400 and r.json()["num_good_events"] == 3
    assert r.json()["failed_records"][0]["index"] == 3
    data = base64.b64encode(orjson.dumps(user(creds))).decode()
    assert gateway.get("/engage", params={"data": data}).text == "1"
    assert len(published(gateway, "profiles")) == 4


def test_limits_and_request_errors(make_gateway: Any, creds: Creds) -> None:
    gateway: Gateway = make_gateway(ImportLimits(max_events_per_request=2))
    r = gateway.post("/engage", content=json.dumps([user(creds)] * 3), headers=JSON)
    assert (r.status_code, r.text) == (400, "0")
    r = gateway.post("/engage?verbose=1", content=json.dumps([user(creds)] * 3), headers=JSON)
    assert r.status_code == 400 and "too many" in r.json()["error"]
    r = gateway.post("/engage?verbose=1", content=b"{broken", headers=JSON)
    assert r.status_code == 400 and r.json()["status"] == 0
    r = gateway.post("/engage", content=b"", headers=JSON)
    assert r.status_code == 400
    r = gateway.post("/engage?callback=alert(1)", content=json.dumps([user(creds)]), headers=JSON)
    assert r.status_code == 400
    r = gateway.post("/engage?callback=mp.cb_1", content=json.dumps([user(creds)]), headers=JSON)
    assert (r.headers["content-type"].split(";")[0], r.text) == ("text/javascript", "mp.cb_1(1);")
    gateway.sink.fail = True
    r = gateway.post("/engage", content=json.dumps([user(creds)]), headers=JSON)
    assert r.status_code == 503 and r.headers["retry-after"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(["$token", "$distinct_id", "$set", "$add", "$time", "$unset", "$delete"]),
                st.recursive(
                    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                    max_leaves=5,
                ),
            ),
            st.integers(),
            st.text(max_size=4),
        ),
        max_size=6,
    ),
    st.sampled_from(["/engage", "/groups"]),
    st.sampled_from(["", "?strict=1", "?verbose=1"]),
)
def test_never_a_500(make_gateway: Any, items: list[Any], path: str, query: str) -> None:
    gateway: Gateway = make_gateway()
    r = gateway.post(path + query, content=json.dumps(items), headers=JSON)  # big integers too
    assert r.status_code in (200, 400), r.text
