"""Hand-written cases pinning the oracle to semantics.md / decisions.md (pure, no IO)."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import factories

from . import events as ev_mod
from . import expr, frequency, funnels, properties, retention, segmentation, stream
from ._common import Event, day_start_ms, key_of, parse_date, prepare, timeline, to_ms

UTC = UTC
T0 = datetime(2024, 3, 5, 1, 0, tzinfo=UTC)  # a Tuesday
_seq = iter(range(10**9))


def ev(name: str, at: datetime | int | float, uid: str | int = "u1", **props) -> dict:
    ms = to_ms(at) if isinstance(at, datetime) else at
    return {"event": name, "properties": {"time": ms, "distinct_id": uid, "$insert_id": f"id-{next(_seq)}", **props}}


def m(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def funnel_counts(events, names, length=1, unit="day", **params) -> list[int]:
    body = funnels.funnels(
        events,
        "UTC",
        {"from_date": "2024-03-05", "to_date": "2024-03-05", **params},
        {"steps": [{"event": n} for n in names], "length": length, "length_unit": unit},
    )
    return [s["count"] for s in body["data"]["2024-03-05"]["steps"]]


# ------------------------------------------------------------------------------------------------ funnels
def test_funnel_loose_order_converts_through_repeats():
    names = ["A", "B", "D", "C", "D", "E"]
    assert funnel_counts([ev(n, m(i)) for i, n in enumerate(names)], "ABCDE") == [1, 1, 1, 1, 1]
    assert funnel_counts([ev(n, m(i)) for i, n in enumerate("ABCE")], "ABCDE") == [1, 1, 1, 0, 0]


def test_funnel_window_counts_from_first_step_one_event():
    evs = [ev("A", m(0)), ev("A", m(30)), ev("B", m(45)), ev("C", m(75))]
    assert funnel_counts(evs, "ABC", length=1, unit="hour") == [1, 1, 0]


@pytest.mark.parametrize(
    ("gap_ms", "expected"), [(1000, [1, 1]), (2000, [1, 1]), (2001, [1, 0])], ids=["1s", "2s-inclusive", "over-2s"]
)
def test_funnel_two_second_grace_swaps_steps(gap_ms, expected):
    b = to_ms(m(10))
    assert funnel_counts([ev("B", b), ev("A", b + gap_ms)], "AB") == expected


def test_funnel_window_end_inclusive_and_after_to_date_examined():
    a = to_ms(datetime(2024, 3, 5, 23, 30, tzinfo=UTC))
    assert funnel_counts([ev("A", a), ev("B", a + 86_400_000)], "AB") == [1, 1]
    assert funnel_counts([ev("A", a), ev("B", a + 86_400_001)], "AB") == [1, 0]


def test_funnel_fields_times_ratios_analysis_custom_event():
    evs = [
        ev("A", m(0), "u1"),
        ev("B", to_ms(m(0)) + 1500, "u1"),
        ev("A", m(0), "u2"),
        ev("V", to_ms(m(0)) + 2000, "u2"),
        ev("A", m(5), "u3"),
        ev("A", m(5), ""),
    ]  # anonymous: not a user
    steps = [{"event": "A"}, {"event": "B", "custom_event": {"id": 7, "name": "B or V", "events": ["B", "V"]}}]
    body = funnels.funnels(
        evs,
        "UTC",
        {"from_date": "2024-03-05", "to_date": "2024-03-05"},
        {"steps": steps, "length": 1, "length_unit": "hour"},
    )
    s0, s1 = body["data"]["2024-03-05"]["steps"]
    assert s0 == {
        "count": 3,
        "avg_time": None,
        "avg_time_from_start": 0,
        "step_conv_ratio": 1.0,
        "overall_conv_ratio": 1.0,
        "goal": "A",
        "event": "A",
        "step_label": "A",
    }
    assert s1 == {
        "count": 2,
        "avg_time": 2,
        "avg_time_from_start": 2,
        "step_conv_ratio": 2 / 3,
        "overall_conv_ratio": 2 / 3,
        "goal": "$custom_event:7",
        "event": "$custom_event:7",
        "step_label": "B or V",
        "custom_event": True,
        "custom_event_id": 7,
    }  # mean 1.75 s -> 2
    assert body["data"]["2024-03-05"]["analysis"] == {"completion": 2, "starting_amount": 3, "steps": 2, "worst": 1}


def test_funnel_per_bucket_where_on_and_selector():
    evs = [
        ev("A", m(0), plan="pro"),
        ev("B", m(1), plan="pro"),
        ev("A", m(24 * 60), plan="free"),
        ev("B", m(24 * 60 + 1), plan="x"),
        ev("A", m(5), "u2", plan="free"),
    ]
    params = {"from_date": "2024-03-05", "to_date": "2024-03-06", "on": 'properties["plan"]'}
    body = funnels.funnels(
        evs, "UTC", params, {"steps": [{"event": "A"}, {"event": "B"}], "length": 1, "length_unit": "hour"}
    )
    assert body["meta"]["dates"] == ["2024-03-05", "2024-03-06"]
    day1, day2 = body["data"]["2024-03-05"], body["data"]["2024-03-06"]
    assert list(day1) == ["$overall", "free", "pro"]  # ranked by entries: free 2, pro 1
    assert [s["count"] for s in day1["$overall"]] == [2, 1] and [s["count"] for s in day1["pro"]] == [1, 1]
    assert [s["count"] for s in day2["free"]] == [1, 1]  # attributed from the step-1 event
    where = {"from_date": "2024-03-05", "to_date": "2024-03-05", "where": 'properties["plan"] == "pro"'}
    assert [
        s["count"]
        for s in funnels.funnels(
            evs, "UTC", where, {"steps": [{"event": "A"}, {"event": "B"}], "length": 1, "length_unit": "day"}
        )["data"]["2024-03-05"]["steps"]
    ] == [1, 1]
    sel = [{"event": "A", "selector": 'properties["plan"] == "free"'}, {"event": "B"}]
    assert [
        s["count"]
        for s in funnels.funnels(
            evs, "UTC", where | {"where": None}, {"steps": sel, "length": 1, "length_unit": "day"}
        )["data"]["2024-03-05"]["steps"]
    ] == [1, 0]


# ---------------------------------------------------------------------------------------------- retention
def _ret(evs, **params):
    return retention.retention(evs, "UTC", {"from_date": "2024-03-05", "to_date": "2024-03-06", **params})


def test_retention_birth_rolling_buckets_not_monotone():
    h = 3_600_000
    b = to_ms(m(0))
    evs = [
        ev("S", b - 86_400_000 * 3, "old"),
        ev("S", b, "old"),  # born before the range
        ev("S", b),
        ev("X", b + h),
        ev("X", b + 49 * h),  # u1: buckets 0 and 2
        ev("S", b, "u2"),
        ev("X", b + 25 * h, "u2"),
    ]  # u2: bucket 1
    out = _ret(evs, born_event="S", interval_count="2")
    assert out["2024-03-05"] == {"counts": [1, 1, 1], "first": 2}
    assert out["2024-03-06"] == {"counts": [0, 0, 0], "first": 0}
    assert _ret(evs, born_event="S", interval_count="2", event="X", unbounded_retention="true")["2024-03-05"][
        "counts"
    ] == [2, 2, 1]


def test_retention_birth_event_itself_is_not_a_return():
    b = to_ms(m(0))
    assert _ret([ev("S", b)], born_event="S", event="S")["2024-03-05"]["counts"] == [0, 0]
    assert _ret([ev("S", b), ev("S", b)], born_event="S", event="S")["2024-03-05"]["counts"] == [1, 0]


def test_retention_compounded_anchors_on_first_event_of_each_cohort_date():
    b = to_ms(m(0))
    evs = [ev("X", b), ev("X", b + 3_600_000), ev("X", b + 86_400_000 + 1000)]
    out = _ret(evs, retention_type="compounded", event="X")
    assert out["2024-03-05"] == {"counts": [1, 1], "first": 1}  # +1 h in bucket 0, +24 h in bucket 1
    assert out["2024-03-06"] == {"counts": [0, 0], "first": 1}  # the anchor itself is not a return


def test_retention_on_segments_the_return_event():
    b = to_ms(m(0))
    evs = [ev("S", b), ev("X", b + 1000, c="a"), ev("S", b, "u2"), ev("X", b + 90_000_000, "u2", c="b")]
    out = _ret(evs, born_event="S", on='properties["c"]')["2024-03-05"]
    assert out == {
        "$overall": {"counts": [1, 1], "first": 2},
        "a": {"counts": [1, 0], "first": 2},
        "b": {"counts": [0, 1], "first": 2},
    }


# ---------------------------------------------------------------------------------------------- frequency
def test_frequency_is_cumulative_at_least_k_plus_one_slots():
    evs = [ev("X", m(0)), ev("X", m(10)), ev("X", m(60)), ev("X", m(180)), ev("X", m(0), "u2"), ev("X", m(0), "")]
    row = frequency.frequency(
        evs, "UTC", {"from_date": "2024-03-05", "to_date": "2024-03-05", "unit": "day", "addiction_unit": "hour"}
    )["data"]["2024-03-05"]
    assert row == [2, 1, 1] + [0] * 21


def test_frequency_rows_non_increasing_on_generated_data():
    p = factories.make_dataset(3, n_events=600).projects[2]
    body = frequency.frequency(
        p.events, p.tz, {"from_date": p.from_date, "to_date": p.to_date, "unit": "week", "addiction_unit": "day"}
    )
    for row in body["data"].values():
        assert len(row) == 7 and all(a >= b for a, b in itertools.pairwise(row))


# ---------------------------------------------------------------------------------------------- DST, keys
NY, LH = ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")


def test_hour_series_on_dst_days():
    spring = timeline(NY, datetime(2024, 3, 10).date(), datetime(2024, 3, 10).date(), "hour").series
    assert len(spring) == 23 and "2024-03-10 02:00:00" not in spring
    fall = timeline(NY, datetime(2024, 11, 3).date(), datetime(2024, 11, 3).date(), "hour").series
    assert len(fall) == 24  # the repeated 01:00 hour is one bucket
    lh = timeline(LH, datetime(2024, 4, 7).date(), datetime(2024, 4, 7).date(), "hour")
    assert len(lh.series) == 24 and lh.end_ms - lh.start_ms == 24.5 * 3_600_000


def test_bucket_keys_at_edges():
    jump = to_ms(datetime(2024, 3, 10, 7, tzinfo=UTC))  # 02:00 EST -> 03:00 EDT
    assert key_of(jump, NY, "hour") == "2024-03-10 03:00:00"
    assert key_of(jump - 1, NY, "minute") == "2024-03-10 01:59:00"
    midnight = to_ms(datetime(2024, 4, 7, tzinfo=LH))
    assert key_of(midnight, LH, "day") == "2024-04-07" and key_of(midnight - 1, LH, "day") == "2024-04-06"
    back = to_ms(datetime(2024, 4, 6, 15, tzinfo=UTC))  # 02:00 -> 01:30 on Lord Howe
    assert key_of(back - 1, LH, "minute") == "2024-04-07 01:59:00" and key_of(back, LH, "hour") == "2024-04-07 01:00:00"
    assert key_of(midnight, LH, "week") == "2024-04-01" and key_of(midnight, LH, "month") == "2024-04-01"


def test_segmentation_counts_in_local_days():
    at = to_ms(datetime(2024, 3, 10, 4, 59, 59, 999000, tzinfo=UTC))  # 23:59:59.999 EST on 03-09
    body = segmentation.segmentation(
        [ev("X", at), ev("X", at + 1)],
        "America/New_York",
        {"event": "X", "from_date": "2024-03-09", "to_date": "2024-03-10"},
    )
    assert body == {
        "data": {"series": ["2024-03-09", "2024-03-10"], "values": {"X": {"2024-03-09": 1, "2024-03-10": 1}}},
        "legend_size": 1,
    }


# --------------------------------------------------------------------------------------------------- dedup
def test_dedup_last_copy_wins_and_unit_insensitive_key():
    a = ev("X", 1_709_600_000_000, plan="first")
    b = {"event": "X", "properties": {**a["properties"], "time": 1_709_600_000, "plan": "last"}}
    other_time = {"event": "X", "properties": {**a["properties"], "time": 1_709_600_000_001}}
    out = prepare([a, other_time, b])
    assert [(e.time_ms, e.properties.get("plan")) for e in out] == [
        (1_709_600_000_000, "last"),
        (1_709_600_000_001, "first"),
    ]
    assert factories.dedupe([a, b])[0] is b


def test_import_normalisation():
    raw = ev("X" * 300, 1_709_600_000.9876, 12345, s="é" * 300, token="t", nested={"k": ["y" * 300]})
    (e,) = prepare([raw])
    assert e.time_ms == 1_709_600_000_987 and e.distinct_id == "12345" and len(e.name) == 255
    assert set(e.properties) == {"s", "nested"} and len(e.properties["nested"]["k"][0]) == 255


# ------------------------------------------------------------------------------------------------ numeric
@pytest.mark.parametrize(
    ("raw", "nice"),
    [
        (Fraction(998, 10), 100),
        (Fraction(101), 200),
        (Fraction(21, 10), Fraction(5, 2)),
        (Fraction(3), 5),
        (Fraction(6), 10),
        (Fraction(3, 100), Fraction(5, 100)),
    ],
    ids=["99.8", "101", "2.1", "3", "6", "0.03"],
)
def test_nice_width(raw, nice):
    assert segmentation.nice_width(raw) == nice


def test_numeric_labels_and_cells():
    vals = [2000, 2499, 2100.5, 2100, 2350]
    evs = [ev("X", m(i), time_spent=v) for i, v in enumerate(vals)] + [ev("X", m(9), time_spent="2200")]
    body = segmentation.numeric(
        evs,
        "UTC",
        {
            "event": "X",
            "from_date": "2024-03-04",
            "to_date": "2024-03-05",
            "on": 'properties["time_spent"]',
            "buckets": "5",
        },
    )
    assert body["data"]["values"] == {
        "2,000 - 2,100": {"2024-03-05": 1},
        "2,100 - 2,200": {"2024-03-05": 2},
        "2,300 - 2,400": {"2024-03-05": 1},
        "2,400 - 2,500": {"2024-03-05": 1},
    }
    assert body["legend_size"] == 4 and body["data"]["series"] == ["2024-03-04", "2024-03-05"]
    assert segmentation.bucket_labels([0, 1])[0][:2] == ["0.0 - 0.1", "0.1 - 0.2"]
    assert segmentation.bucket_labels([0, 2.4], 1)[0] == ["0.0 - 2.5"]
    assert segmentation.bucket_labels([7, 7])[0] == ["7 - 7"]
    assert segmentation.bucket_labels([-1500, 12000], 3)[0] == [
        "-5,000 - 0",
        "0 - 5,000",
        "5,000 - 10,000",
        "10,000 - 15,000",
    ]


# ------------------------------------------------------------------------------------- segmentation family
def test_segmentation_on_list_limit_unique_average():
    evs = [
        ev("X", m(0), tags=["a", "b", "a"]),
        ev("X", m(1), tags=["a"]),
        ev("X", m(2), "u2", tags="b"),
        ev("X", m(3), "", tags="c"),
        ev("X", m(4), "u3"),
        ev("X", m(5), "u3", tags=None),
    ]
    base = {"event": "X", "from_date": "2024-03-05", "to_date": "2024-03-06", "on": 'properties["tags"]'}
    gen = segmentation.segmentation(evs, "UTC", base | {"limit": "2"})["data"]["values"]
    assert gen == {"a": {"2024-03-05": 2, "2024-03-06": 0}, "b": {"2024-03-05": 2, "2024-03-06": 0}}
    uni = segmentation.segmentation(evs, "UTC", base | {"type": "unique"})["data"]["values"]
    assert {k: v["2024-03-05"] for k, v in uni.items()} == {"a": 1, "b": 2, "c": 0}
    avg = segmentation.segmentation(evs, "UTC", base | {"type": "average"})["data"]["values"]
    assert {k: v["2024-03-05"] for k, v in avg.items()} == {"a": 2.0, "b": 1.0, "c": 0.0}


def test_sum_and_average_count_non_numbers_as_zero():
    evs = [ev("X", m(0), p=10), ev("X", m(1), p="5"), ev("X", m(2)), ev("X", m(3), p=2.5)]
    params = {"event": "X", "from_date": "2024-03-05", "to_date": "2024-03-06", "on": 'properties["p"]'}
    assert segmentation.sum_(evs, "UTC", params)["results"] == {"2024-03-05": 12.5, "2024-03-06": 0.0}
    assert segmentation.average(evs, "UTC", params) == {
        "status": "ok",
        "results": {"2024-03-05": 12.5 / 4, "2024-03-06": 0.0},
    }


def test_events_names_top_and_properties():
    now = datetime(2024, 3, 6, 12, tzinfo=UTC)
    evs = [ev("b", m(i)) for i in range(3)] + [ev("a", m(0)), ev("a", m(5)), ev("C", m(0)), ev("C", m(1))]
    evs += [ev("b", now - timedelta(hours=1)), ev("a", now - timedelta(hours=2)), ev("a", now - timedelta(days=40))]
    evs += [ev("d", now - timedelta(minutes=30)), ev("b", now + timedelta(minutes=1))]  # the last one: future
    assert ev_mod.names(evs, "UTC", {"type": "general", "limit": "2"}, now) == ["b", "a"]  # b 4, a 3, C 2, d 1
    assert ev_mod.names(evs, "UTC", {"type": "general"}, now) == ["d", "b", "a", "C"]
    top = ev_mod.top(evs, "UTC", {"type": "general"}, now)
    assert top == {
        "events": [
            {"amount": 1, "event": "a", "percent_change": -0.5},
            {"amount": 1, "event": "b", "percent_change": -2 / 3},
            {"amount": 1, "event": "d", "percent_change": 1.0},
        ],
        "type": "general",
    }
    body = ev_mod.events(evs, "UTC", {"event": '["a", "zz"]', "type": "unique", "unit": "day", "interval": "2"}, now)
    assert body["data"] == {
        "series": ["2024-03-05", "2024-03-06"],
        "values": {"a": {"2024-03-05": 1, "2024-03-06": 1}, "zz": {"2024-03-05": 0, "2024-03-06": 0}},
    }
    pe = [ev("X", m(0), k=1, j=None), ev("X", m(1), k="1", l=[True]), ev("Y", m(2), z=1)]
    assert properties.top(pe, "UTC", {"event": "X"}, now) == {"k": {"count": 2}, "j": {"count": 1}, "l": {"count": 1}}
    assert properties.values(pe, "UTC", {"name": "k"}, now) == ["1"]
    assert properties.values(pe, "UTC", {"name": "l", "event": "X"}, now) == ["true"]


def test_stream_order_and_seconds():
    evs = [ev("B", 1_709_600_000_999, "u1", x=1), ev("A", 1_709_599_000_000, 7), ev("C", 1_709_600_001_000, "u9")]
    body = stream.stream(
        evs, "UTC", {"distinct_ids": '["u1", "7"]', "from_date": "2024-03-04", "to_date": "2024-03-05"}
    )
    assert [(e["event"], e["properties"]["time"]) for e in body["results"]["events"]] == [
        ("A", 1_709_599_000),
        ("B", 1_709_600_000),
    ]
    assert body["results"]["events"][1]["properties"]["x"] == 1


# ------------------------------------------------------------------------------------------------- expressions
P = {
    "ref": "www.Facebook.com",
    "n": "42",
    "x": 3,
    "ids": [1, 2, "P2"],
    "t": True,
    "z": None,
    "o": {"a": 1},
    "o2": {"a": 1.0},
    "ts": "true",
    "iso": "2024-01-01T00:00:00Z",
    "big": 10**400,
}
EV = prepare(
    [
        {
            "event": "X",
            "properties": {"time": 1_704_067_200_500, "distinct_id": 12345, "$insert_id": "ins-1", "token": "tok", **P},
        }
    ]
)[0]
CASES = [
    ('"Facebook" in properties["ref"]', True),
    ('"facebook" in properties["ref"]', False),
    ('not "Facebook" in properties["missing"]', True),
    ('"P2" in properties["ids"]', True),
    ('properties["x"] in [1, 2, 3, 4]', True),
    ('1 in "123"', expr.UNDEFINED),
    ('number(properties["n"]) >= 40', True),
    ('properties["n"] >= 40', expr.UNDEFINED),
    ('number("4x")', expr.UNDEFINED),
    ("number(true)", 1.0),
    ("string(2.0)", "2"),
    ("string(true)", "true"),
    ('string(properties["z"])', None),
    ('boolean("false")', False),
    ("boolean(0)", False),
    ('boolean("no")', True),
    ('defined(properties["z"])', True),
    ('not defined (properties["missing"])', True),
    ('properties["x"] == "3"', False),
    ('properties["x"] == 3.0', True),
    ('properties["missing"] == 1', False),
    ("7 % -2", 1.0),
    ("-7 % 2", -1.0),
    ("1 / 0", expr.UNDEFINED),
    ('"a" + 1', expr.UNDEFINED),
    ('"a" + "b"', "ab"),
    ("2 + 3 * 4 - -1", 15),
    ('not properties["missing"]', True),
    ("not 1", expr.UNDEFINED),
    ('properties["missing"] or properties["t"]', True),
    ('properties["missing"] and true', False),
    ("floor(-1.5)", -2),
    ("round(2.5)", 3),
    ('ceil("1")', expr.UNDEFINED),
    ('datetime("2024-01-02") > datetime("2024-01-01T23:59:59")', True),
    ('"2024-01-02T00:00:00" > datetime(1704067200)', True),
    ('"b" > "a"', True),
    ("true > false", expr.UNDEFINED),
    ('has_prefix(properties["ref"], "www")', True),
    ("'single'", "single"),
    # event fields: the lifted import keys are read from the event, not from the stored properties
    ('properties["time"] == datetime(1704067200500)', True),
    ('event["$time"] == event["time"]', True),
    ('string(properties["time"])', "2024-01-01T00:00:00"),
    ('number(event["time"])', 1704067200.5),
    ('properties["distinct_id"]', "12345"),
    ('event["$distinct_id"]', "12345"),
    ('event["distinct_id"]', "12345"),
    ('properties["$insert_id"]', "ins-1"),
    ('event["$insert_id"]', "ins-1"),
    ('properties["token"]', expr.UNDEFINED),
    ('properties["$time"]', expr.UNDEFINED),
    ('properties["$distinct_id"]', expr.UNDEFINED),
    # datetimes and ISO strings
    ('properties["iso"] == properties["time"]', False),
    ('properties["iso"] == datetime("2024-01-01")', True),
    ('datetime("2024-01-01 02:00+0200") == "2024-01-01T00:00:00"', True),
    ('datetime("2024-01-01") != "x"', True),
    ('datetime("2024-01-01") in ["x", "2024-01-01T00:00:00Z"]', True),
    ('"2024-01-01T00:00:00" in [datetime(1704067200)]', True),
    ('"2024-01-01" in [datetime(1704067200)]', False),
    ("datetime(null)", expr.UNDEFINED),
    ('datetime(properties["x"] * 1e14)', expr.UNDEFINED),
    ('datetime("1899-12-31T23:59:59Z" + "")', expr.UNDEFINED),
    ('datetime("2299-12-31T23:59:59Z" + "") > properties["iso"]', True),
    ('datetime("2024-01-01T10:00:00+05:60" + "")', expr.UNDEFINED),
    ('string(datetime("2024-01-01T23:59:59.9999999"))', "2024-01-01T23:59:59"),
    ("string(datetime(-0.5))", "1969-12-31T23:59:59"),
    ('datetime("2024-01-01T00:00:00.0009") == "2024-01-01T00:00:00Z"', True),
    ('number(datetime("1969-12-31T23:59:59.25"))', -0.75),
    # numbers are doubles; non-finite results are undefined
    ("1e308 * 10", expr.UNDEFINED),
    ("-1e308 - 1e308", expr.UNDEFINED),
    ("5 % 0", expr.UNDEFINED),
    ('number("1e400")', expr.UNDEFINED),
    ('number("-1e400")', expr.UNDEFINED),
    ('properties["big"] + 0', expr.UNDEFINED),
    ("string(-0)", "0"),
    ("string(1e21)", "1e+21"),
    ("string(1e-7)", "1e-7"),
    ("string(0.000001)", "0.000001"),
    ("string(123456789012345680000)", "123456789012345680000"),
    ("string(-1.5e-10)", "-1.5e-10"),
    ("string(0.1 + 0.2)", "0.30000000000000004"),
    ("string(2.5e+25)", "2.5e+25"),
    ("round(-2.5)", -2),
    ("round(0.49999999999999994)", 0),
    ("round(-0.5)", 0),
    # in: only scalars are members, by == rules
    ('[1] in properties["ids"]', expr.UNDEFINED),
    ('properties["o"] in [1]', expr.UNDEFINED),
    ('"1" in properties["ids"]', False),
    ('null in [properties["missing"]]', True),
    ('properties["missing"] in [null]', expr.UNDEFINED),
    ('[datetime(0)] == ["1970-01-01T00:00:00"]', True),
    ("datetime(0) in [datetime(0)]", True),
    # and/or: a run-time non-boolean counts as false
    ('properties["ts"] and true', False),
    ('properties["ts"] or true', True),
    ('properties["ts"] or false', False),
    ('properties["x"] + 1 or true', True),
    ('properties["o"] == properties["o2"]', False),
]


@pytest.mark.parametrize(("text", "value"), CASES, ids=[c[0] for c in CASES])
def test_expression_rules(text, value):
    got = expr.evaluate(text, EV)
    assert got is value if value is expr.UNDEFINED or value is None or isinstance(value, bool) else got == value
    assert type(got) is type(value) or (isinstance(value, (int, float)) and not isinstance(got, bool))


@pytest.mark.parametrize(
    "bad",
    [
        'properties["x"',
        "foo(1)",
        "properties[x]",
        "1 ==",
        "defined(1, 2)",
        '"\\q"',
        "1e400",
        "1" * 400,
        'user["$email"] == "x"',
        'behaviors["b"] > 0',
        'datetime("yesterday")',
        'datetime("2300-01-01")',
        'datetime("2024-01-01T10")',
        "datetime(1e14)",
        "1 and true",
        '"x" or true',
        "null and true",
        "[] or true",
        "-1 and true",
        '"a" + "b" and true',
        "string(1) and true",
        "floor(1) or true",
        'number(properties["time"]) or true',
        'properties["time"] and true',
        'event["$distinct_id"] or true',
        'properties["x"] == ' + '"' + "y" * 4096 + '"',
    ],
)
def test_expression_static_errors(bad):
    with pytest.raises(expr.ExprError):
        expr.parse(bad)


@pytest.mark.parametrize(
    "ok",
    [
        "not 1 and true",
        "1 + 2 and true",
        'number("1") and true',
        'properties["s"] and true',
        'datetime(properties["x"]) or true',
        'string(properties["x"]) and true',
        'string(properties["x"]) == "" and true',
    ],
)
def test_expression_and_or_operands_that_may_be_boolean_or_undefined(ok):
    assert expr.evaluate(ok, EV) in (True, False)


def test_expression_keys():
    assert expr.on_keys('properties["ids"]', EV) == ["1", "2", "P2"]
    assert expr.on_keys('properties["missing"]', EV) == [] and expr.on_keys('properties["z"]', EV) == []
    assert expr.on_keys('properties["o"]', EV) == [] and expr.on_keys('properties["x"] / 2', EV) == ["1.5"]
    assert expr.on_keys('properties["time"]', EV) == ["2024-01-01T00:00:00"]
    assert expr.on_keys("[datetime(0), 1e21, null, [1]]", EV) == ["1970-01-01T00:00:00", "1e+21"]
    assert expr.where_matches('properties["x"]', EV) is False and expr.where_matches(None, EV) is True
    assert expr.as_number('properties["n"]', EV) is None and expr.as_number('number(properties["n"])', EV) == 42.0
    assert (
        expr.as_number('properties["time"]', EV) is None
        and expr.as_number('number(properties["time"])', EV) == 1704067200.5
    )


CONFORMANCE = json.loads(
    (Path(__file__).resolve().parents[1] / "conformance" / "expr_semantics.json").read_text(encoding="utf-8")
)


def _conformance_event(props: dict) -> Event:
    """The stored event for a case: `time` (epoch seconds), `distinct_id` and `$insert_id` in its props are the
    event's own fields (defaults from the file), lifted out of the properties by the import normalisation."""
    (event,) = prepare([{"event": "Test event", "properties": {**CONFORMANCE["defaults"], **props}}])
    return event


@pytest.mark.parametrize("case", CONFORMANCE["cases"], ids=[c["id"] for c in CONFORMANCE["cases"]])
def test_conformance_case(case):
    event = _conformance_event(case["props"])
    got = expr.evaluate(case["expr"], event)
    kind, want = case["type"], case.get("value")
    assert expr._type(got) == kind, (case["expr"], got)
    if kind == "datetime":
        assert got.epoch == datetime.fromisoformat(want).replace(tzinfo=UTC).timestamp()
    elif kind == "number":
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    elif kind in ("undefined", "null"):
        assert "value" not in case
    else:  # boolean, string, list, object: the JSON value
        assert got == want
    assert expr.where_matches(case["expr"], event) is (kind == "boolean" and want is True)
    number = expr.as_number(case["expr"], event)
    assert number is None if kind != "number" else number == pytest.approx(want, rel=1e-12, abs=1e-12)
    if "on" in case:
        on = case["on"]
        assert expr.on_keys(case["expr"], event) == ([] if on is None else on if isinstance(on, list) else [on])


# ------------------------------------------------------------------------------------------------- factories
def test_factory_is_deterministic_valid_and_rich():
    d1, d2 = factories.make_dataset(11, n_events=500), factories.make_dataset(11, n_events=500)
    assert d1 == d2 and set(d1.projects) == {1, 2, 3, 4, 5}
    reserved = {
        "00000000-0000-0000-0000-000000000000",
        "anon",
        "anonymous",
        "nil",
        "none",
        "null",
        "n/a",
        "na",
        "undefined",
        "unknown",
        "<nil>",
        "0",
        "-1",
        "true",
        "false",
        "[]",
        "{}",
    }
    for p in d1.projects.values():
        raws = p.events
        assert len(factories.dedupe(raws)) < len(raws)
        for raw in raws:
            props = raw["properties"]
            assert re.fullmatch(r"[A-Za-z0-9-]{1,36}", props["$insert_id"]) and props["$insert_id"] not in reserved
            assert str(props["distinct_id"]).strip().lower() not in reserved
            assert 31_536_000_000 <= factories.time_to_ms(props["time"]) < to_ms(d1.now)
            assert "ip" not in props and "token" not in props and 10 <= len(props) - 3 <= 20
        assert any(raw["properties"]["distinct_id"] == "" for raw in raws)


def test_generated_funnels_and_retention_invariants():
    d = factories.make_dataset(5, n_events=800)
    for p in d.projects.values():
        base = {"from_date": p.from_date, "to_date": p.to_date}
        for f in d.funnels.values():
            for day in funnels.funnels(p.events, p.tz, base, f)["data"].values():
                counts = [s["count"] for s in day["steps"]]
                assert all(a >= b for a, b in itertools.pairwise(counts))
        out = retention.retention(
            p.events, p.tz, base | {"born_event": "Sign Up", "interval_count": "4", "unbounded_retention": "1"}
        )
        for cell in out.values():
            assert (
                all(a >= b for a, b in zip(cell["counts"], cell["counts"][1:], strict=False))
                and cell["counts"][0] <= cell["first"]
            )


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(factories.DEFAULT_ZONES)))
def test_generated_totals_agree_across_endpoints(seed, pid):
    tz = factories.DEFAULT_ZONES[pid]
    p = factories.make_dataset(seed, n_events=300, zones={pid: tz}).projects[pid]
    start = day_start_ms(parse_date(p.from_date), ZoneInfo(tz))
    end = day_start_ms(parse_date(p.to_date) + timedelta(days=1), ZoneInfo(tz))
    in_range = [e for e in prepare(p.events) if start <= e.time_ms < end]
    base = {"from_date": p.from_date, "to_date": p.to_date}
    for name in ("App Open", "Purchase"):
        n = sum(1 for e in in_range if e.name == name)
        hourly = segmentation.segmentation(p.events, tz, base | {"event": name, "unit": "hour"})
        weekly = ev_mod.events(p.events, tz, base | {"event": json.dumps([name]), "unit": "week"})
        assert sum(hourly["data"]["values"][name].values()) == n == sum(weekly["data"]["values"][name].values())
    assert factories.dedupe(factories.dedupe(p.events)) == factories.dedupe(p.events)
