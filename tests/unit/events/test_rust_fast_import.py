"""The Rust `/import` fast path (`footfall.shared.events.fast_import`) against the Python path.

The one property that makes the fast path safe: whenever it takes a body, the Python path
(`parse_json` → `validate_batch` → `build_event_rows`) accepts every event of it unchanged and
builds the same rows — every column, the property JSON byte for byte as `orjson.dumps` writes
it, the dedup keys, the in-request duplicates dropped. Checked on generated bodies, valid and
not, written with and without escapes and whitespace, and with limits small enough that every
boundary is hit. It must also take the bodies that are plain (or it would be useless), and
decline each kind of event the Python path changes or rejects.
"""

from __future__ import annotations

import json
import math
import random
import string
import struct
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from footfall.services.gateway.decode import parse_json
from footfall.services.worker.enrich import Enricher
from footfall.shared.config import ImportLimits
from footfall.shared.events import fast_import
from footfall.shared.events.validate import TIME_FLOOR_MS, validate_batch
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.streams.events import build_event_rows
from footfall.shared.warehouse import native
from tests.fastpath import require_extension

require_extension()

NOW_MS = 1_790_000_000_000
INGESTED_MS = NOW_MS + 7
PROJECT = 42
# Small limits: strings of 8 characters, 4 members or elements, depth 3, 8 properties.
SMALL = ImportLimits(
    max_event_bytes=600,
    max_properties=8,
    max_nested_keys=4,
    max_depth=3,
    max_array_len=4,
    max_string_len=8,
    max_events_per_request=40,
)


def python_path(body: bytes, limits: ImportLimits, strict: bool) -> tuple[dict[str, list[Any]] | None, bytes, int]:
    """The Python path's columns, keys and item count; columns None when an event failed."""
    items = parse_json(body)
    if not isinstance(items, list):
        return None, b"", 0
    events, failures = validate_batch(
        items, project_id=PROJECT, strict=strict, limits=limits, now_ms=NOW_MS, body_bytes=len(body)
    )
    if failures:
        return None, b"", len(items)
    rows, _dropped = build_event_rows(events, Enricher(None), INGESTED_MS)
    columns = dict(zip(EVENTS_TABLE.column_names, rows.columns, strict=True))
    return columns, b"".join(rows.keys), len(items)


def fast_path(body: bytes, limits: ImportLimits, *, geo: bool = False) -> fast_import.FastRows | None:
    return fast_import.FastImport(limits, geo=geo).rows(
        body, project_id=PROJECT, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS
    )


def python_columns(columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The Python rows as they read back from a Native block (datetimes, padded bytes)."""
    block = native.encode("events", list(columns), list(columns.values()))
    return native.decode(block)


def assert_same(body: bytes, limits: ImportLimits, strict: bool, *, must_take: bool = False) -> None:
    fast = fast_path(body, limits)
    columns, keys, items = python_path(body, limits, strict)
    if must_take:
        assert fast is not None, body
    if fast is None:
        return
    assert columns is not None, f"the fast path took a body the Python path rejects: {body!r}"
    assert fast.items == items
    assert fast.rows == len(columns["event"])
    assert fast.keys == keys
    assert native.decode(fast.block) == python_columns(columns)


# -- generated bodies ----------------------------------------------------------------------

# Mostly valid, each part now and then at or past a boundary (SMALL: 8 characters, 4 members
# or elements, depth 3, 8 properties), so that about half the bodies are plain and the others
# fail or change in every way. Text of every kind but lone surrogates (JSON cannot carry them
# as UTF-8; the decode tests cover escaped ones).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=9)
ascii_texts = st.text(string.printable, max_size=9)
names = st.one_of(st.sampled_from(["a", "b", "plan", "time", "ip", "token", "$os", "ip"]), texts)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=5,
)
valid_times = st.one_of(
    st.integers(min_value=TIME_FLOOR_MS // 1000, max_value=NOW_MS // 1000 + 3600),
    st.integers(min_value=TIME_FLOOR_MS, max_value=NOW_MS + 3_600_000),
    st.floats(min_value=TIME_FLOOR_MS / 1000, max_value=NOW_MS + 3.6e6),
)
times = st.one_of(
    valid_times,
    valid_times,
    st.integers(min_value=TIME_FLOOR_MS // 1000 - 5, max_value=NOW_MS // 1000 + 4000),
    st.sampled_from(
        [None, "1700000000", True, 2**63, -(2**63), TIME_FLOOR_MS - 1, NOW_MS + 3_600_001, 9_999_999_999, -0.5]
    ),
)
distinct_ids = st.one_of(
    st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True),
    st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    ascii_texts,
    texts,
    st.sampled_from(["null", " Anon\t", "\x1cnone", "0", "-1", "", None, 1.5, ["x"]]),
)
valid = {
    "time": valid_times,
    "distinct_id": st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True),
    "$insert_id": st.from_regex(r"[A-Za-z0-9-]{1,36}", fullmatch=True),
}
insert_ids = st.one_of(
    st.from_regex(r"[A-Za-z0-9-]{1,36}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9-]{30,40}", fullmatch=True),
    st.sampled_from(["", "NULL", "abc_def", "é", None, 7, "00000000-0000-0000-0000-000000000000"]),
)


rarely = st.sampled_from([False] * 15 + [True])  # (integers would favour their bounds)


@st.composite
def events(draw: st.DrawFn) -> Any:
    props: dict[str, Any] = {}
    for name, strategy in (("time", times), ("distinct_id", distinct_ids), ("$insert_id", insert_ids)):
        if not draw(rarely):
            props[name] = draw(strategy if draw(rarely) else valid[name])
    props.update(draw(st.dictionaries(names, values, max_size=draw(st.sampled_from([2, 3, 5])))))
    event: Any = {"event": draw(texts if draw(rarely) else texts.filter(bool)), "properties": props}
    if draw(rarely):
        event = draw(st.sampled_from([[], "x", None, {"event": "a"}, {**event, "extra": 1}]))
    return event


@st.composite
def bodies(draw: st.DrawFn, items: st.SearchStrategy[Any]) -> bytes:
    batch = draw(st.lists(items, min_size=1, max_size=3))
    if draw(st.booleans()):  # a retried event inside the request
        batch.append(draw(st.sampled_from(batch)))
    if draw(st.booleans()):
        return orjson.dumps(batch)
    # the stdlib writes escapes (\u00e9, \ud83d\ude00), other float forms (1e-07) and whitespace
    return json.dumps(batch, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1]))).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(events()), strict=st.booleans())
def test_a_body_the_fast_path_takes_gives_the_python_paths_rows(body: bytes, strict: bool) -> None:
    assert_same(body, SMALL, strict)


@st.composite
def plain_events(draw: st.DrawFn) -> Any:
    """Events the Python path takes unchanged under the default limits."""
    plain_texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
    plain_values = st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**63), 2**64 - 1),
            st.floats(allow_nan=False, allow_infinity=False),
            plain_texts,
        ),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(plain_texts, inner, max_size=3)),
        max_leaves=6,
    ).filter(fits)
    props = {
        "time": draw(
            st.one_of(st.integers(1_600_000_000, 1_780_000_000), st.floats(1.6e9, 1.78e9), st.floats(1.6e12, 1.78e12))
        ),
        "distinct_id": draw(st.one_of(st.from_regex(r"user-[a-z0-9]{1,20}", fullmatch=True), st.integers(1, 10**12))),
        "$insert_id": draw(st.from_regex(r"[A-Za-z0-9-]{8,36}", fullmatch=True)),
    }
    for name, value in draw(st.dictionaries(plain_texts, plain_values, max_size=10)).items():
        props.setdefault(name if name not in ("ip",) else "ip_", value)
    return {"event": draw(plain_texts.filter(bool)), "properties": props}


def fits(value: Any, at: int = 1) -> bool:
    """A property's value within the default depth of 3: a container found at depth 3 is empty."""
    children = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else []
    if children and at >= 3:
        return False
    return all(fits(child, at + 1) for child in children)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(plain_events()))
def test_plain_bodies_take_the_fast_path(body: bytes) -> None:
    assert_same(body, ImportLimits(), strict=True, must_take=True)


# -- what it declines ----------------------------------------------------------------------


def event(**props: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"time": 1_700_000_000, "distinct_id": "u1", "$insert_id": "id-1"}
    base.update(props)
    return {"event": "Signed up", "properties": {k: v for k, v in base.items() if v is not DROP}}


DROP = object()


@pytest.mark.parametrize(
    "item",
    [
        pytest.param(event(time=DROP), id="no time"),
        pytest.param(event(time="1700000000"), id="time as text"),
        pytest.param(event(time=10), id="time before 1971"),
        pytest.param(event(time=NOW_MS // 1000 + 3601), id="time too far ahead"),
        pytest.param(event(distinct_id="undefined"), id="reserved distinct_id"),
        pytest.param(event(distinct_id=" NULL "), id="reserved after strip and lower"),
        pytest.param(event(distinct_id="\x1fnil"), id="reserved after stripping a separator"),
        pytest.param(event(distinct_id=0), id="reserved integer distinct_id"),
        pytest.param(event(distinct_id="x" * 256), id="distinct_id to truncate"),
        pytest.param(event(distinct_id="caf\u00e9"), id="non-ASCII distinct_id (Unicode stripping)"),
        pytest.param(event(**{"$insert_id": DROP}), id="no insert id (strict fails, else derived)"),
        pytest.param(event(**{"$insert_id": "a_b"}), id="insert id with a bad character"),
        pytest.param(event(**{"$insert_id": "x" * 37}), id="insert id too long"),
        pytest.param(event(**{"$insert_id": "Anonymous"}), id="reserved insert id"),
        pytest.param(event(page="p" * 256), id="string to truncate"),
        pytest.param(event(**{"k" * 256: 1}), id="name to truncate"),
        pytest.param(event(a={"b": {"c": {"d": 1}}}), id="too deep"),
        pytest.param(event(a=list(range(255))), id="array too long"),
        pytest.param(event(a={str(i): i for i in range(255)}), id="nested object too wide"),
        pytest.param(event(**{f"p{i}": i for i in range(252)}), id="too many properties"),
        pytest.param({"event": "", "properties": event()["properties"]}, id="empty event name"),
        pytest.param({"event": "e" * 256, "properties": event()["properties"]}, id="event name to truncate"),
        pytest.param({**event(), "extra": 1}, id="unknown member"),
        pytest.param({"properties": event()["properties"]}, id="no event"),
        pytest.param([1], id="not an object"),
    ],
)
def test_what_the_python_path_changes_or_rejects_is_declined(item: Any) -> None:
    body = orjson.dumps([event(), item])
    assert fast_path(body, ImportLimits()) is None
    assert fast_path(orjson.dumps([event()]), ImportLimits()) is not None  # the first one alone is taken


def test_an_address_is_declined_only_when_places_can_be_found() -> None:
    body = orjson.dumps([event(ip="203.0.113.9")])
    assert fast_path(body, ImportLimits(), geo=True) is None
    rows = fast_path(body, ImportLimits(), geo=False)
    assert rows is not None  # nothing to locate: `ip` is dropped, as the Python path drops it
    assert_same(body, ImportLimits(), strict=True, must_take=True)
    assert fast_path(orjson.dumps([event(ip=0)]), ImportLimits(), geo=True) is not None  # 0: no geolocation


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{}",
        b'{"event": "a", "properties": {}}',  # one object: the Python path's shape rules
        b"[]",
        b"[1,",
        b'[{"event": "\\ud800", "properties": {}}]',  # a lone surrogate: the Python path rejects that event
        b'[{"event": "a\xff", "properties": {}}]',  # invalid UTF-8
        b'[{"event": "a", "properties": {"n": 1e400}}]',  # beyond a float
        b"[" + b",".join([orjson.dumps(event())] * 2001) + b"]",  # more than a request may hold
    ],
)
def test_bodies_that_are_not_a_plain_array_are_declined(body: bytes) -> None:
    assert fast_path(body, ImportLimits()) is None


def test_a_repeated_member_keeps_its_first_place_and_last_value_as_in_python() -> None:
    body = b'[{"event": "a", "properties": {"x": 1, "time": 1700000000, "x": 2, "distinct_id": "u", '
    body += b'"$insert_id": "i1", "y": {"k": 1, "k": [3]}}}]'
    assert_same(body, ImportLimits(), strict=True, must_take=True)
    rows = fast_path(body, ImportLimits())
    assert rows is not None
    assert native.decode(rows.block)["properties"] == ['{"x":2,"y":{"k":[3]}}']


def test_in_request_duplicates_keep_the_last_copy_in_the_first_place() -> None:
    first, other = event(plan="free"), event(**{"$insert_id": "id-2"})
    last = event(plan="pro")
    rows = fast_path(orjson.dumps([first, other, last]), ImportLimits())
    assert rows is not None and (rows.items, rows.rows, rows.dropped) == (3, 2, 1)
    assert native.decode(rows.block)["properties"] == ['{"plan":"pro"}', "{}"]
    assert len(rows.key_set()) == 2


def test_an_event_over_the_size_limit_is_declined_when_the_body_could_hold_one() -> None:
    limits = ImportLimits(max_event_bytes=200)
    small, big = event(), event(pad="x" * 150)
    assert len(orjson.dumps(big)) >= 200 > len(orjson.dumps(small))
    assert fast_path(orjson.dumps([small, big]), limits) is None
    assert_same(orjson.dumps([small, small]), limits, strict=True, must_take=True)


# -- hot property columns ----------------------------------------------------------------------

HOT = (("plan", "hp_plan"), ("n", "hp_n"), ("nested", "hp_nested"), ("absent", "hp_absent"), ("time", "hp_time"))


def hot_block(*items: Any) -> tuple[fast_import.FastRows, dict[str, list[Any]]]:
    rows = fast_import.FastImport(ImportLimits(), geo=False, hot_columns=lambda: HOT).rows(
        orjson.dumps(list(items)), project_id=PROJECT, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS
    )
    assert rows is not None
    return rows, native.decode(rows.block)


def test_hot_columns_hold_the_raw_text_of_each_value_when_every_value_is_of_a_safe_kind() -> None:
    nested = {"a": [1, "x/y", None], "b": {"c": True, "q": 'say "hi" \\'}}
    rows, columns = hot_block(event(plan="pro", n=-(2**63), nested=nested), event(**{"$insert_id": "id-2", "n": 7}))
    assert rows.columns == (*EVENTS_TABLE.column_names, "hp_plan", "hp_n", "hp_nested", "hp_absent", "hp_time")
    assert columns["hp_plan"] == ['"pro"', ""]  # '' where the property is missing
    assert columns["hp_n"] == [str(-(2**63)), "7"]
    assert columns["hp_nested"] == [orjson.dumps(nested).decode(), ""]
    assert columns["hp_absent"] == ["", ""] and columns["hp_time"] == ["", ""]  # time is not a property
    assert python_columns(python_path(orjson.dumps([event(plan="pro")]), ImportLimits(), True)[0] or {}) == {
        name: values[:1]
        for name, values in native.decode(hot_block(event(plan="pro"))[0].block).items()
        if not name.startswith("hp_")
    }


@pytest.mark.parametrize("value", [2.5, 1e16, "café", "tab\there", "\u2028", ["ok", 1.0], {"k": "ü"}])
def test_a_value_the_engine_may_write_otherwise_leaves_every_hot_column_to_the_engine(value: Any) -> None:
    rows, columns = hot_block(event(plan="pro"), event(**{"$insert_id": "id-2", "nested": value}))
    assert rows.columns == EVENTS_TABLE.column_names and not any(name.startswith("hp_") for name in columns)


# -- JSON as orjson writes it ----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**63), 2**64 - 1)))
def test_numbers_are_written_as_orjson_writes_them(value: float | int) -> None:
    from footfall.shared.events import _fastpath

    assert _fastpath.dumps(orjson.dumps([value])) == orjson.dumps([value])


@pytest.mark.parametrize(
    "value",
    [
        *(1e16, 1e15, 1e-5, 1e-6, 1.2345e-5, 123456789012345680000.0, 5e-324, -0.0, 0.0, 1.7976931348623157e308),
        0.1,
        562949953421312.25,  # two shortest candidates (…312.2, …312.3): the even one, as Python's repr
    ],
)
def test_float_notation_switches_where_orjson_switches(value: float) -> None:
    from footfall.shared.events import _fastpath

    assert _fastpath.dumps(orjson.dumps(value)) == orjson.dumps(value)


def test_floats_of_every_bit_pattern_are_written_as_orjson_writes_them() -> None:
    from footfall.shared.events import _fastpath

    rng = random.Random(17)
    floats = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(50_000)]
    floats = [f for f in floats if math.isfinite(f)] + [
        round(rng.uniform(-1e6, 1e6), rng.randint(0, 8)) for _ in range(20_000)
    ]
    body = orjson.dumps(floats)
    assert _fastpath.dumps(body) == body


@settings(max_examples=300, deadline=None)
@given(value=values)
def test_values_are_written_as_orjson_writes_them(value: Any) -> None:
    from footfall.shared.events import _fastpath

    assert _fastpath.dumps(json.dumps(value).encode()) == orjson.dumps(value)
    assert _fastpath.dumps(orjson.dumps(value)) == orjson.dumps(value)
