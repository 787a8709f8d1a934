"""The /import event validator: the spec's rules as data, plus batch, derivation and fuzzing."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from footfall.shared.config import ImportLimits
from footfall.shared.events.model import Event, Failure
from footfall.shared.events.validate import RESERVED_IDS, TIME_FLOOR_MS, validate_batch, validate_event

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the conformance data's absolute times assume it
LIMITS = ImportLimits()
RULES_PATH = Path(__file__).resolve().parents[2] / "conformance" / "import_rules.json"
# stdlib json, not orjson: the data holds lone surrogates (\udc80) standing for invalid UTF-8
RULES: list[dict[str, Any]] = json.loads(RULES_PATH.read_text(encoding="ascii"))
REASONS = {
    "malformed", "event", "properties", "unknown_field", "size", "too_many_properties", "time",
    "distinct_id", "insert_id", "utf8", "nested_keys", "depth", "array_len", "number", "type",
}  # fmt: skip
INSERT_ID_RE = re.compile(r"[A-Za-z0-9-]{1,36}")
DERIVED_RE = re.compile(r"[0-9a-f]{32}")
LIFTED = {"time", "distinct_id", "$insert_id", "token", "ip"}


def run(
    raw: Any, *, strict: bool = True, limits: ImportLimits = LIMITS, body_bytes: int | None = None, index: int = 0
) -> Event | Failure:
    # By default pretend the body was as big as a request may be, so the size rule is always measured.
    if body_bytes is None:
        body_bytes = limits.max_request_bytes
    return validate_event(raw, index, project_id=7, strict=strict, limits=limits, now_ms=NOW_MS, body_bytes=body_bytes)


def good(**extra: Any) -> dict[str, Any]:
    props = {"time": 1_767_225_000, "distinct_id": "user-1", "$insert_id": "abc-123"}
    props.update(extra)
    return {"event": "Page View", "properties": props}


# --- conformance data ------------------------------------------------------------------


@pytest.mark.parametrize("case", RULES, ids=[c["id"] for c in RULES])
def test_conformance_case(case: dict[str, Any]) -> None:
    limits = dataclasses.replace(LIMITS, **case.get("limits", {}))
    raw = case["event"]
    before = repr(raw)
    result = run(raw, strict=case["strict"], limits=limits, body_bytes=case.get("body_bytes"))
    assert repr(raw) == before, "the validator mutated its input"

    if case["expect"] == "fail":
        assert isinstance(result, Failure), f"expected a failure, got {result!r}"
        assert (result.field, result.reason) == (case["field"], case["reason"]), result
        assert result.index == 0
        if "message_contains" in case:
            assert case["message_contains"] in result.message
        if "failure_insert_id" in case:
            assert result.insert_id == case["failure_insert_id"]
        orjson.dumps(result.as_record())  # the 400 body can always be encoded
        return

    assert case["expect"] == "ok"
    assert isinstance(result, Event), f"expected an event, got {result!r}"
    assert result.project_id == 7
    for attr, want in case.get("check", {}).items():
        assert getattr(result, attr) == want, attr
    if case.get("derived_insert_id"):
        assert DERIVED_RE.fullmatch(result.insert_id), result.insert_id
    assert_event_invariants(result, limits)


def test_conformance_data_covers_every_rule() -> None:
    failing = {c["reason"] for c in RULES if c["expect"] == "fail"}
    assert failing == REASONS - {"type"}  # "type" (non-JSON Python values) cannot be written as JSON
    assert sum(c["expect"] == "ok" for c in RULES) >= 60
    assert {c["strict"] for c in RULES} == {True, False}
    for value in RESERVED_IDS:
        assert f"distinct_id_reserved[{value}]" in {c["id"] for c in RULES}
        assert f"insert_id_reserved[{value}]" in {c["id"] for c in RULES}


# --- validate_batch -----------------------------------------------------------------------


def test_validate_batch_reports_failures_at_their_positions() -> None:
    raws = [
        good(),
        good(time="yesterday"),
        good(**{"$insert_id": "b-2"}),
        "not an event",
        good(distinct_id="null", **{"$insert_id": "d-4"}),
        good(**{"$insert_id": "e-5"}),
    ]
    events, failures = validate_batch(raws, project_id=3, strict=True, limits=LIMITS, now_ms=NOW_MS, body_bytes=10_000)
    assert [e.insert_id for e in events] == ["abc-123", "b-2", "e-5"]
    assert all(e.project_id == 3 for e in events)
    assert [(f.index, f.field, f.insert_id) for f in failures] == [
        (1, "properties.time", "abc-123"),
        (3, "", None),
        (4, "properties.distinct_id", "d-4"),
    ]


def test_validate_batch_empty() -> None:
    assert validate_batch([], project_id=1, strict=True, limits=LIMITS, now_ms=NOW_MS, body_bytes=2) == ([], [])


def test_validate_batch_nonstrict_drops_only_unstorable_events() -> None:
    raws = [
        good(**{"$insert_id": "bad_id"}),
        good(time=None),
        {"event": "x", "properties": {"time": 1_767_225_000, "distinct_id": ""}},
    ]
    events, failures = validate_batch(raws, project_id=1, strict=False, limits=LIMITS, now_ms=NOW_MS, body_bytes=500)
    assert len(events) == 2 and all(DERIVED_RE.fullmatch(e.insert_id) for e in events)
    assert [(f.index, f.reason) for f in failures] == [(1, "time")]


# --- non-strict derived $insert_id ------------------------------------------------------------


def _derived(raw: dict[str, Any]) -> str:
    result = run(raw, strict=False)
    assert isinstance(result, Event), result
    assert DERIVED_RE.fullmatch(result.insert_id)
    return result.insert_id


def test_derived_insert_id_is_deterministic_and_pinned() -> None:
    props = {"time": 1_767_225_000, "distinct_id": "u1", "plan": "pro", "o": {"b": 1, "a": [1, "x"]}}
    raw = {"event": "Sign Up", "properties": props}
    first = _derived(raw)
    assert _derived(copy.deepcopy(raw)) == first
    # member order does not matter, nor does the form of the time (seconds vs ms) or a dropped token
    reordered_props = {
        "o": {"a": [1, "x"], "b": 1},
        "plan": "pro",
        "distinct_id": "u1",
        "time": 1_767_225_000_000,
        "token": "tok",
    }
    reordered = {"properties": reordered_props, "event": "Sign Up"}
    assert _derived(reordered) == first
    # pinned: a change here means retries across a deploy stop deduplicating
    assert first == "25be22c7540eff46c623b8aac4c7af4d"


def test_derived_insert_id_differs_for_different_content() -> None:
    base = {"event": "Sign Up", "properties": {"time": 1_767_225_000, "distinct_id": "u1", "plan": "pro"}}
    variants = [
        {**base, "event": "Sign In"},
        {**base, "properties": {**base["properties"], "time": 1_767_225_001}},
        {**base, "properties": {**base["properties"], "distinct_id": "u2"}},
        {**base, "properties": {**base["properties"], "plan": "free"}},
        {**base, "properties": {**base["properties"], "plan": 1}},
        {**base, "properties": {**base["properties"], "extra": None}},
        {**base, "properties": {**base["properties"], "ip": "203.0.113.9"}},
    ]
    ids = {_derived(base)} | {_derived(v) for v in variants}
    assert len(ids) == len(variants) + 1


def test_derived_insert_id_replaces_invalid_one_in_nonstrict_mode() -> None:
    missing = good()
    del missing["properties"]["$insert_id"]
    invalid = good(**{"$insert_id": "not valid!"})
    assert _derived(invalid) == _derived(missing)
    assert run(invalid, strict=True).reason == "insert_id"  # type: ignore[union-attr]


# --- copies, sizes, odd inputs ------------------------------------------------------------------


def test_truncation_does_not_mutate_input() -> None:
    raw = good(s="x" * 300, o={"n": {"s": "y" * 300}, "k": 1}, a=["z" * 300, {"s": "w" * 300}], token="t", ip="1.1.1.1")
    before = copy.deepcopy(raw)
    result = run(raw)
    assert raw == before
    assert isinstance(result, Event)
    p = result.properties
    assert p["s"] == "x" * 255 and p["o"]["n"]["s"] == "y" * 255
    assert p["a"] == ["z" * 255, {"s": "w" * 255}]
    assert raw["properties"]["o"]["n"]["s"] == "y" * 300


def test_untouched_containers_are_shared_not_copied() -> None:
    raw = good(o={"a": {"b": 1}}, tags=["a", "b"])
    result = run(raw)
    assert isinstance(result, Event)
    assert result.properties["o"] is raw["properties"]["o"]
    assert result.properties["tags"] is raw["properties"]["tags"]
    assert result.properties is not raw["properties"]


def test_size_is_measured_only_when_the_body_could_hold_an_oversized_event() -> None:
    limits = dataclasses.replace(LIMITS, max_event_bytes=300)
    raw = good(pad="x" * 250, more="y" * 250)
    assert run(raw, limits=limits, body_bytes=300).reason == "size"  # type: ignore[union-attr]
    # the caller's promise: body_bytes is the whole body, so below the limit nothing can be too big
    assert isinstance(run(raw, limits=limits, body_bytes=299), Event)


def test_invalid_utf8_body_through_the_surrogateescape_fallback() -> None:
    body = (
        b'[{"event":"Purchase","properties":{"time":1767225000,"distinct_id":"u","$insert_id":"i-1",'
        b'"utm_source":"news\xffletter"}}]'
    )
    raws = json.loads(body.decode("utf-8", "surrogateescape"))
    events, failures = validate_batch(
        raws, project_id=1, strict=True, limits=LIMITS, now_ms=NOW_MS, body_bytes=len(body)
    )
    assert events == []
    assert [(f.field, f.reason, f.insert_id) for f in failures] == [("properties.utm_source", "utf8", "i-1")]
    assert failures[0].message == "'properties.utm_source' is invalid: string should be valid utf8"


def test_stdlib_only_values_are_rejected_not_raised() -> None:
    # stdlib json (the invalid-UTF-8 fallback) accepts NaN, Infinity and integers beyond 64 bits
    nan = json.loads('{"event":"x","properties":{"time":NaN,"distinct_id":"u","$insert_id":"i"}}')
    assert run(nan).field == "properties.time"  # type: ignore[union-attr]
    assert run(good(time=float("inf"))).field == "properties.time"  # type: ignore[union-attr]
    assert run(good(f=float("-inf"))).reason == "number"  # type: ignore[union-attr]
    assert run(good(o={"f": float("nan")})).field == "properties.o.f"  # type: ignore[union-attr]
    assert run(good(big=-(2**63) - 1)).reason == "number"  # type: ignore[union-attr]
    huge = run(good(distinct_id=10**5000))
    assert isinstance(huge, Failure) and huge.field == "properties.distinct_id"


def test_non_json_python_values_are_rejected_not_raised() -> None:
    assert run(("event", "x")).reason == "malformed"  # type: ignore[union-attr]
    assert run(good(s={1, 2})).reason == "type"  # type: ignore[union-attr]
    assert run(good(o={1: "x"})).reason == "type"  # type: ignore[union-attr]
    assert run(good(t=(1, 2))).reason == "type"  # type: ignore[union-attr]
    raw = good()
    raw["properties"][3] = "x"  # type: ignore[index]
    assert run(raw).reason == "type"  # type: ignore[union-attr]


def test_failure_echoes_only_string_insert_ids_and_encodes_surrogates() -> None:
    assert run(good(time=None, **{"$insert_id": 5})).insert_id is None  # type: ignore[union-attr]
    f = run(good(**{"$insert_id": "a\udc80b", "k\ud800": 1}))
    assert isinstance(f, Failure) and f.insert_id == "a\ufffdb"
    orjson.dumps(f.as_record())
    g = run(good(**{"k\ud800": 1}))
    assert isinstance(g, Failure) and g.field == "properties.k\ufffd"
    orjson.dumps(g.as_record())


# --- Hypothesis: never raises; every Event satisfies the invariants ----------------------------

SMALL = dataclasses.replace(
    LIMITS, max_properties=8, max_nested_keys=5, max_array_len=5, max_string_len=12, max_event_bytes=400
)
# lone surrogates stand for invalid UTF-8 after decoding; drawn on purpose, or they would be rare
any_char = st.characters(exclude_categories=()) | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
texts = (
    st.text(max_size=20)
    | st.text(any_char, max_size=20)
    | st.sampled_from(sorted(RESERVED_IDS))
    | st.text(st.sampled_from("ab-é😀 "), min_size=10, max_size=20)  # long enough to truncate under SMALL
)
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=7) | st.dictionaries(texts, inner, max_size=7),
    max_leaves=30,
)
times = st.one_of(
    st.integers(min_value=TIME_FLOOR_MS // 1000 - 5, max_value=NOW_MS // 1000 + 4000),
    st.integers(min_value=TIME_FLOOR_MS - 5000, max_value=NOW_MS + 4_000_000),
    st.floats(min_value=0, max_value=2e12),
    json_values,
)
insert_ids = st.from_regex(r"[A-Za-z0-9-]{1,40}", fullmatch=True) | json_values
near_events = st.builds(
    lambda name, t, did, iid, extra, drop: {
        "event": name,
        "properties": {
            k: v for k, v in {"time": t, "distinct_id": did, "$insert_id": iid, **extra}.items() if k not in drop
        },
    },
    st.text(min_size=1, max_size=20) | texts,
    times,
    texts | st.integers(-5, 10**20) | json_values,
    insert_ids,
    st.dictionaries(texts | st.sampled_from(["token", "ip"]), json_values, max_size=9),
    st.sets(st.sampled_from(["time", "distinct_id", "$insert_id"]), max_size=1),
)


def _walk(v: Any, depth: int, limits: ImportLimits) -> None:
    assert depth <= limits.max_depth
    if isinstance(v, str):
        assert len(v) <= limits.max_string_len
        v.encode("utf-8")
    elif isinstance(v, dict):
        assert len(v) < limits.max_nested_keys
        for k, x in v.items():
            k.encode("utf-8")
            _walk(x, depth + 1, limits)
    elif isinstance(v, list):
        assert len(v) < limits.max_array_len
        for x in v:
            _walk(x, depth + 1, limits)


def assert_event_invariants(e: Event, limits: ImportLimits) -> None:
    assert type(e.event) is str and 1 <= len(e.event) <= limits.max_string_len
    e.event.encode("utf-8")
    assert type(e.time_ms) is int
    assert TIME_FLOOR_MS <= e.time_ms <= NOW_MS + limits.max_future_seconds * 1000
    assert type(e.distinct_id) is str and len(e.distinct_id) <= limits.max_string_len
    assert e.distinct_id.strip().lower() not in RESERVED_IDS
    e.distinct_id.encode("utf-8")
    assert INSERT_ID_RE.fullmatch(e.insert_id) and e.insert_id.lower() not in RESERVED_IDS
    assert e.ip is None or (type(e.ip) is str and len(e.ip) <= limits.max_string_len)
    assert type(e.properties) is dict and not (LIFTED & e.properties.keys())
    assert len(e.properties) < limits.max_properties
    for k, v in e.properties.items():
        assert type(k) is str
        k.encode("utf-8")
        _walk(v, 1, limits)
    orjson.dumps(e.properties)  # storable


def _check_any(raw: Any, strict: bool, limits: ImportLimits) -> None:
    before = repr(raw)
    result = run(raw, strict=strict, limits=limits, index=5)
    assert repr(raw) == before
    if isinstance(result, Event):
        assert_event_invariants(result, limits)
        if strict:
            assert result.insert_id == raw["properties"]["$insert_id"]
    else:
        assert isinstance(result, Failure)
        assert result.index == 5 and result.reason in REASONS
        assert type(result.field) is str and type(result.message) is str and result.message
        orjson.dumps(result.as_record())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=json_values | near_events, strict=st.booleans())
def test_fuzz_never_raises_and_events_hold_invariants(raw: Any, strict: bool) -> None:
    _check_any(raw, strict, SMALL)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=near_events, strict=st.booleans())
def test_fuzz_default_limits(raw: Any, strict: bool) -> None:
    _check_any(raw, strict, LIMITS)
