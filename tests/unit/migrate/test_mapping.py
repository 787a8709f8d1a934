"""§14.4 edge cases, with expectations written out by hand: time formats, identities, the
`$insert_id` rules (decimal integers, empty strings for null in the hash), country names, and
step 6 (an event over the limits loses the properties copied from `user_properties` first)."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from footfall.services.migrate.mapping import Malformed, amplitude_event, mixpanel_event, parse_time
from footfall.services.migrate.work import BlockSpec, map_lines
from footfall.shared.config import ImportLimits


def test_times_are_utc_milliseconds_from_the_first_parsable_field() -> None:
    assert parse_time("2026-10-01 00:00:01.123999") == 1790812801123  # sub-ms truncated
    assert parse_time("2026-10-01 00:00:01") == 1790812801000
    assert parse_time("2026-10-01T02:00:01+02:00") == 1790812801000
    assert parse_time("2026-10-01T00:00:01Z") == 1790812801000
    assert parse_time("yesterday") is None and parse_time(1790812801) is None
    record = {"event_type": "e", "event_time": "bad", "client_event_time": None, "server_received_time": "2026-10-01"}
    assert amplitude_event(record, "j").time_ms == 1790812800000


def test_identity_and_insert_id_rules() -> None:
    base: dict[str, Any] = {"event_type": "Viewed", "event_time": "2026-10-01 00:00:00", "app": 7}
    e = amplitude_event(
        {**base, "user_id": "Undefined", "device_id": "d1", "uuid": "ABCDEF01-2345-6789-ABCD-EF0123456789"}, "j"
    )
    assert e.item["properties"]["distinct_id"] == "d1" and e.uid is None
    assert "$user_id" not in e.item["properties"] and e.item["properties"]["$device_id"] == "d1"
    assert e.item["properties"]["$insert_id"] == "abcdef01-2345-6789-abcd-ef0123456789"
    own = amplitude_event({**base, "user_id": 42, "$insert_id": "my-id-1"}, "j")
    assert own.item["properties"]["distinct_id"] == "42" and own.item["properties"]["$insert_id"] == "my-id-1"
    hashed = amplitude_event(
        {**base, "user_id": "u", "$insert_id": "has space", "event_id": 12, "session_id": None}, "j"
    )
    text = "\n".join(["amplitude", "7", "has space", "Viewed", "2026-10-01 00:00:00", "", "u", "12", ""])
    assert hashed.item["properties"]["$insert_id"] == hashlib.sha256(text.encode()).hexdigest()[:32]
    nobody = amplitude_event({**base, "user_id": None, "device_id": ""}, "j")
    assert nobody.item["properties"]["distinct_id"] == ""


def test_properties_precedence_countries_ip_and_markers() -> None:
    record = {
        "event_type": "Bought",
        "event_time": "2026-10-01 00:00:00",
        "user_id": "u",
        "platform": "top",
        "paying": None,
        "country": "Russia",
        "ip_address": "1.2.3.4",
        "os_name": "ios",
        "user_properties": {"platform": "user", "tier": "a", "gone": None},
        "groups": {"company": "acme"},
        "event_properties": {"platform": "event", "tier": None},
        "data": {"x": 1},
    }
    props = amplitude_event(record, "job-1").item["properties"]
    assert props["platform"] == "event" and props["tier"] == "a" and props["company"] == "acme"
    assert props["mp_country_code"] == "RU" and "country" not in props and "ip" not in props  # a place was given
    assert props["$os"] == "ios" and "os_name" not in props and "data" not in props and "paying" not in props
    assert (props["$import"], props["$source"], props["$migration_job_id"]) == (True, "amplitude-to-mixpanel", "job-1")
    bare = amplitude_event({**record, "country": "Atlantis", "city": None}, "j").item["properties"]
    assert bare["country"] == "Atlantis" and "mp_country_code" not in bare
    located = amplitude_event({**record, "country": None}, "j").item["properties"]
    assert located["ip"] == "1.2.3.4"


def test_malformed_lines_and_mixpanel_records() -> None:
    for bad in ([1], {"event_type": ""}, {"event_type": None}):
        try:
            amplitude_event(bad, "j")
        except Malformed as exc:
            assert exc.reason == "malformed"
        else:
            raise AssertionError(bad)
    try:
        amplitude_event({"event_type": "e"}, "j")
    except Malformed as exc:
        assert exc.reason == "properties.time"
    copied = mixpanel_event({"event": "e", "properties": {"time": 5, "distinct_id": "d", "mp_processing_time_ms": 1}})
    text = "e\n5\nd"
    assert copied["properties"] == {
        "time": 5,
        "distinct_id": "d",
        "$insert_id": hashlib.sha256(text.encode()).hexdigest()[:32],
    }
    kept = mixpanel_event({"event": "e", "properties": {"$insert_id": "abc", "time": 5}})
    assert kept["properties"]["$insert_id"] == "abc"


def test_an_event_over_the_limits_drops_the_copied_user_properties_first() -> None:
    spec = BlockSpec("job", 1, ImportLimits(), 1_800_000_000_000)
    base = {"event_type": "e", "event_time": "2026-10-01 00:00:00", "user_id": "u"}
    wide = {**base, "user_properties": {f"u{i}": i for i in range(300)}, "event_properties": {"own": 1}}
    too_wide = {**base, "event_properties": {f"e{i}": i for i in range(300)}}
    lines = [orjson.dumps(r) for r in (wide, too_wide, base)]
    batch = map_lines(lines, spec)
    assert batch.read == 3 and len(batch.events) == 2 and sum(batch.invalid.values()) == 1
    truncated = next(e for e in batch.events if "own" in e.properties)
    assert truncated.properties["$migration_truncated"] is True and "u1" not in truncated.properties
