"""Pure parts of /funnels, /retention, /retention/addiction, /stream/query and /insights:
request parsing (defaults, ranges, errors naming the parameter), the builders (variant
choice, bound values only, project and time range always in the SQL) and the shapes
(ratios, averages, analysis, zero-filled buckets, unbounded and "at least k" sums)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from footfall.services.query.params import Params
from footfall.services.query.reports import frequency, insights, retention, stream
from footfall.services.query.reports.funnels import build, parse_request, shape
from footfall.services.query.reports.funnels.query import is_disjoint
from footfall.shared.errors import ParamError
from footfall.shared.saved import SavedFunnel, parse_funnel
from footfall.shared.sql import render

NOW = datetime(2024, 3, 20, tzinfo=UTC)
MARKER = "Zq7Marker"  # request text that must never reach the SQL


def saved(definition: dict[str, Any]) -> SavedFunnel:
    name, parsed = parse_funnel({"name": "f", **definition})
    return SavedFunnel(7, 1, name, parsed, NOW, NOW)


ABC = saved({"steps": [{"event": "A"}, {"event": "B"}, {"event": "C"}], "length": 1, "length_unit": "day"})
RANGE = {"from_date": "2024-03-04", "to_date": "2024-03-10"}


def funnel_req(funnel: SavedFunnel = ABC, **params: str) -> Any:
    return parse_request(Params({**RANGE, **params}), funnel, 1, "America/New_York")


# -- /funnels request --------------------------------------------------------------------------------
def test_funnel_defaults_come_from_the_saved_funnel() -> None:
    req = funnel_req()
    assert req.window_ms == 86_400_000 and req.limit == 255 and req.where is None and req.on is None
    assert req.timeline.series == tuple(f"2024-03-{d:02d}" for d in range(4, 11))
    assert funnel_req(length="90", length_unit="minute").window_ms == 90 * 60_000


@pytest.mark.parametrize(
    ("params", "series"),
    [
        ({"interval": "3"}, ("2024-03-04", "2024-03-07", "2024-03-10")),
        ({"unit": "week"}, ("2024-03-04",)),
        ({"unit": "week", "from_date": "2024-03-06"}, ("2024-03-04",)),
        ({"unit": "month", "interval": "2", "to_date": "2024-04-02"}, ("2024-03-01", "2024-04-01")),
    ],
    ids=["interval", "week", "week-before-from", "unit-wins"],
)
def test_funnel_buckets(params: dict[str, str], series: tuple[str, ...]) -> None:
    assert funnel_req(**params).timeline.series == series


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"length": "91", "length_unit": "day"}, "Error in length"),
        ({"length": "2161", "length_unit": "hour"}, "Error in length"),
        ({"length": "0"}, "Error in length"),
        ({"length_unit": "week"}, "Error in length_unit"),
        ({"unit": "hour"}, "Error in unit"),
        ({"interval": "0"}, "Error in interval"),
        ({"limit": "0"}, "Error in limit"),
        ({"where": 'properties["a" =='}, "Error in where: syntax error at position"),
        ({"on": "nosuch(1)"}, "Error in on: invalid expression"),
        ({"from_date": "2024-02-30"}, "Error in from_date"),
        ({"to_date": "2024-03-01"}, "to_date"),
    ],
    ids=[
        "over-90-days",
        "over-90-days-hours",
        "zero-length",
        "bad-length-unit",
        "bad-unit",
        "zero-interval",
        "zero-limit",
        "bad-where",
        "bad-on",
        "bad-date",
        "reversed",
    ],
)
def test_funnel_request_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError) as info:
        funnel_req(**params)
    assert message in info.value.message


# -- /funnels builder --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("steps", "disjoint"),
    [
        ([{"event": "A"}, {"event": "B"}], True),
        ([{"event": "A"}, {"custom_event": {"id": 1, "name": "c", "events": ["B", "C"]}}, {"event": "D"}], True),
        ([{"event": "A"}, {"event": "A"}], False),
        ([{"event": "A"}, {"custom_event": {"id": 1, "name": "c", "events": ["B", "A"]}}], False),
        ([{"event": "A", "selector": "1 == 1"}, {"event": "A", "selector": "2 == 2"}], False),
    ],
    ids=["plain", "custom", "repeated", "custom-overlap", "same-name-selectors"],
)
def test_variant_choice(steps: list[dict[str, Any]], disjoint: bool) -> None:
    req = funnel_req(saved({"steps": steps}))
    assert is_disjoint(req) is disjoint
    text = render(build(req).sql)
    assert ("arrayFold" in text) is not disjoint  # the general variant folds over the steps


@pytest.mark.parametrize(
    "steps", [[f"{MARKER}-A", f"{MARKER}-B"], [f"{MARKER}-A", f"{MARKER}-A"]], ids=["disjoint", "general"]
)
@pytest.mark.parametrize(
    "extra",
    [{}, {"where": f'properties["{MARKER}"] == "{MARKER}"'}, {"on": f'properties["{MARKER}"]'}],
    ids=["plain", "where", "on"],
)
def test_funnel_sql_binds_every_request_value(steps: list[str], extra: dict[str, str]) -> None:
    funnel = saved({"steps": [{"event": s, "selector": f'properties["{MARKER}"] != 1'} for s in steps]})
    q = build(funnel_req(funnel, **extra))
    text = render(q.sql)
    assert MARKER not in text
    values = q.binds.values
    assert 1 in values.values()  # the project id
    assert any(isinstance(v, datetime) for v in values.values())  # the scanned time range
    assert "project_id = {" in text and "time >= {" in text


def test_funnel_reads_properties_only_when_asked() -> None:
    assert "FINAL" not in render(build(funnel_req()).sql)
    assert "FINAL" not in render(build(funnel_req(on='properties["x"]')).sql)  # latest copy picked in arrays
    assert "FINAL" in render(build(funnel_req(where='properties["x"] == 1')).sql)
    repeated = saved({"steps": [{"event": "A"}, {"event": "A"}]})
    assert "FINAL" in render(build(funnel_req(repeated)).sql)  # a copy must not serve two steps


def test_many_steps_build() -> None:
    funnel = saved({"steps": [{"event": f"E{i}"} for i in range(32)]})
    assert render(build(funnel_req(funnel)).sql).count("arrayFirstIndex(") == 31  # one search per later step


# -- /funnels shape ----------------------------------------------------------------------------------
def test_funnel_shape_ratios_times_and_analysis() -> None:
    req = funnel_req(to_date="2024-03-05")
    d = date(2024, 3, 4)
    rows = [(d, None, 0, 4, 0, 0), (d, None, 1, 2, 3000, 3000), (d, None, 2, 1, 1500, 5500)]
    body = shape(rows, req)
    assert body["meta"] == {"dates": ["2024-03-04", "2024-03-05"]}
    steps = body["data"]["2024-03-04"]["steps"]
    assert [s["count"] for s in steps] == [4, 2, 1]
    assert [s["step_conv_ratio"] for s in steps] == [1.0, 0.5, 0.5]
    assert [s["overall_conv_ratio"] for s in steps] == [1.0, 0.5, 0.25]
    assert [s["avg_time"] for s in steps] == [None, 2, 2]  # 1.5 s rounds half up
    assert [s["avg_time_from_start"] for s in steps] == [0, 2, 6]  # 5.5 s rounds half up
    assert steps[0] == {
        "count": 4,
        "avg_time": None,
        "avg_time_from_start": 0,
        "step_conv_ratio": 1.0,
        "overall_conv_ratio": 1.0,
        "goal": "A",
        "event": "A",
        "step_label": "A",
    }
    assert body["data"]["2024-03-04"]["analysis"] == {"completion": 1, "starting_amount": 4, "steps": 3, "worst": 1}
    empty = body["data"]["2024-03-05"]
    assert [s["count"] for s in empty["steps"]] == [0, 0, 0]
    assert [s["step_conv_ratio"] for s in empty["steps"]] == [1.0, 0.0, 0.0]
    assert empty["analysis"]["worst"] == 1


def test_funnel_shape_custom_event_and_segments() -> None:
    funnel = saved({"steps": [{"event": "A"}, {"custom_event": {"id": 12, "name": "Any view", "events": ["V", "W"]}}]})
    req = funnel_req(funnel, on='properties["p"]', limit="1", to_date="2024-03-04")
    d = date(2024, 3, 4)
    rows = [
        (d, None, 0, 3, 0, 0),
        (d, None, 1, 1, 10_000, 10_000),
        (d, "x", 0, 2, 0, 0),
        (d, "x", 1, 1, 10_000, 10_000),
    ]
    value = shape(rows, req)["data"]["2024-03-04"]
    assert list(value) == ["$overall", "x"]
    assert value["x"][1] == {
        "count": 1,
        "avg_time": 10,
        "avg_time_from_start": 10,
        "step_conv_ratio": 0.5,
        "overall_conv_ratio": 0.5,
        "goal": "$custom_event:12",
        "event": "$custom_event:12",
        "step_label": "Any view",
        "custom_event": True,
        "custom_event_id": 12,
    }


# -- /retention ------------------------------------------------------------------------------------
def ret_req(**params: str) -> retention.RetentionRequest:
    return retention.parse_request(Params({**RANGE, "born_event": "S", **params}), 1, "Europe/Berlin")


def test_retention_defaults() -> None:
    req = ret_req()
    assert (req.retention_type, req.unit, req.interval, req.interval_count, req.unbounded) == (
        "birth",
        "day",
        1,
        1,
        False,
    )
    assert req.buckets == 2 and req.limit == 255
    compounded = retention.parse_request(Params({**RANGE, "retention_type": "compounded"}), 1, "UTC")
    assert compounded.born_event is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"born_event": ""}, "born_event"),
        ({"interval": "91"}, "Error in interval"),
        ({"unit": "hour"}, "Error in unit"),
        ({"retention_type": "first"}, "Error in retention_type"),
        ({"interval_count": "-1"}, "Error in interval_count"),
        ({"unbounded_retention": "maybe"}, "Error in unbounded_retention"),
        ({"born_where": "("}, "Error in born_where"),
    ],
    ids=[
        "no-born-event",
        "interval-over-90-days",
        "bad-unit",
        "bad-type",
        "negative-count",
        "bad-bool",
        "bad-born-where",
    ],
)
def test_retention_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError) as info:
        ret_req(**params)
    assert message in info.value.message


def test_retention_week_interval_may_exceed_90() -> None:
    assert ret_req(unit="week", interval="100").interval == 100


@pytest.mark.parametrize("kind", ["birth", "compounded"])
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"on": f'properties["{MARKER}"]', "unbounded_retention": "1"},
        {"where": f'properties["{MARKER}"] == 1', "unit": "month"},
    ],
    ids=["plain", "on-unbounded", "where-month"],
)
def test_retention_sql_binds_every_request_value(kind: str, extra: dict[str, str]) -> None:
    req = ret_req(
        retention_type=kind, born_event=MARKER, event=MARKER, born_where=f'properties["{MARKER}"] != 2', **extra
    )
    text = render(retention.build(req).sql)
    assert MARKER not in text and "project_id = {" in text


def test_retention_shape_bounded_and_unbounded() -> None:
    d = date(2024, 3, 4)
    rows = [(d, None, -1, 5, 0), (d, None, 0, 3, 0), (d, None, 2, 1, 0)]
    body = retention.shape(rows, ret_req(interval_count="2", to_date="2024-03-05"))
    assert body == {"2024-03-04": {"counts": [3, 0, 1], "first": 5}, "2024-03-05": {"counts": [0, 0, 0], "first": 0}}
    # unbounded rows hold each user's LAST bucket: counts[i] = users whose last bucket >= i
    rows = [(d, None, -1, 5, 0), (d, None, 0, 2, 0), (d, None, 2, 1, 0)]
    body = retention.shape(rows, ret_req(interval_count="2", unbounded_retention="true", to_date="2024-03-04"))
    assert body == {"2024-03-04": {"counts": [3, 1, 1], "first": 5}}


def test_retention_shape_segments_in_rank_order() -> None:
    d = date(2024, 3, 4)
    rows = [(d, None, -1, 4, 1), (d, None, 0, 2, 1), (d, "b", 0, 2, 2), (d, "a", 0, 1, 3)]
    body = retention.shape(rows, ret_req(on='properties["p"]', to_date="2024-03-04"))
    assert list(body["2024-03-04"]) == ["$overall", "b", "a"]
    assert body["2024-03-04"]["a"] == {"counts": [1, 0], "first": 4}


# -- /retention/addiction ----------------------------------------------------------------------------
def freq_req(**params: str) -> frequency.FrequencyRequest:
    return frequency.parse_request(
        Params({**RANGE, "unit": "week", "addiction_unit": "day", **params}), 1, "America/New_York"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"unit": ""}, "unit"),
        ({"addiction_unit": ""}, "addiction_unit"),
        ({"addiction_unit": "week"}, "addiction_unit"),
        ({"unit": "hour"}, "Error in unit"),
    ],
    ids=["no-unit", "no-addiction-unit", "bad-addiction-unit", "bad-unit"],
)
def test_frequency_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError) as info:
        freq_req(**params)
    assert message in info.value.message


def test_frequency_shape_counts_at_least_k_slots() -> None:
    req = freq_req(unit="day", addiction_unit="hour", from_date="2024-03-10", to_date="2024-03-10")
    rows = [(date(2024, 3, 10), None, 1, 5, 0), (date(2024, 3, 10), None, 3, 2, 0)]
    row = frequency.shape(rows, req)["data"]["2024-03-10"]
    assert len(row) == 24  # the DST day still has 24 slots
    assert row[:4] == [7, 2, 2, 0]
    month = freq_req(unit="month", from_date="2024-02-10", to_date="2024-02-10")
    assert frequency.shape([], month)["data"] == {"2024-02-01": [0] * 29}


def test_frequency_sql_binds_every_request_value() -> None:
    text = render(
        frequency.build(freq_req(event=MARKER, where=f'properties["{MARKER}"] == 1', on=f'properties["{MARKER}"]')).sql
    )
    assert MARKER not in text and "project_id = {" in text


# -- /stream/query -----------------------------------------------------------------------------------
def test_stream_ids_are_text_and_unique() -> None:
    req = stream.parse_request(Params({**RANGE, "distinct_ids": '["a", 12345, 1.0, "a", ""]'}), 1, "UTC")
    assert req.distinct_ids == ("a", "12345", "1", "")
    q = stream.build(req)
    assert ["a", "12345", "1", ""] in q.binds.values.values()
    assert "distinct_id IN {p" in render(q.sql)


@pytest.mark.parametrize(
    "ids", ["", "not json", '{"a": 1}', "[true]", "[[1]]"], ids=["missing", "garbage", "object", "boolean", "nested"]
)
def test_stream_bad_ids(ids: str) -> None:
    with pytest.raises(ParamError) as info:
        stream.parse_request(Params({**RANGE, "distinct_ids": ids}), 1, "UTC")
    assert "distinct_ids" in info.value.message


def test_stream_shape_adds_lifted_properties() -> None:
    req = stream.parse_request(Params({**RANGE, "distinct_ids": '["u"]'}), 1, "UTC")
    body = stream.shape([("E", 1709596800999, "u", "i-1", '{"b": [1, "x"], "a": null}')], req)
    assert body == {
        "status": "ok",
        "results": {
            "events": [
                {
                    "event": "E",
                    "properties": {
                        "b": [1, "x"],
                        "a": None,
                        "time": 1709596800,
                        "distinct_id": "u",
                        "$insert_id": "i-1",
                    },
                }
            ]
        },
    }


# -- /insights ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "tz", "stamp"),
    [
        ("2024-03-10", "America/New_York", "2024-03-10T00:00:00-05:00"),
        ("2024-03-11", "America/New_York", "2024-03-11T00:00:00-04:00"),
        ("2024-11-03 01:00:00", "America/New_York", "2024-11-03T01:00:00-04:00"),
        ("2024-04-07 01:00:00", "Australia/Lord_Howe", "2024-04-07T01:00:00+11:00"),
        ("2024-04-07 02:00:00", "Australia/Lord_Howe", "2024-04-07T02:00:00+10:30"),
        ("2024-01-01", "Asia/Kolkata", "2024-01-01T00:00:00+05:30"),
    ],
    ids=["before-dst", "after-dst", "repeated-hour-first", "lord-howe-repeated", "lord-howe-after", "kolkata"],
)
def test_insights_bucket_timestamps(key: str, tz: str, stamp: str) -> None:
    assert insights.bucket_timestamp(key, tz) == stamp


def test_insights_date_range() -> None:
    assert insights._date_range(date(2020, 8, 31), date(2020, 9, 12), "America/Los_Angeles") == {
        "from_date": "2020-08-31T00:00:00-07:00",
        "to_date": "2020-09-12T23:59:59.999000-07:00",
    }
