"""Pure parts of the breakdown reports: timelines and bucket keys in project time zones
(DST, 30- and 45-minute offsets), parameter reading, numeric buckets, and that the SQL a
request builds carries no request text."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from footfall.services.query.params import Params
from footfall.services.query.reports import _common, events, properties, segmentation
from footfall.services.query.reports._common import Scope, timeline_back_from_now, timeline_for_dates
from footfall.shared.errors import ParamError


def keys_by_brute_force(first: date, last: date, tz: str, unit: str) -> list[str]:
    zone = ZoneInfo(tz)
    start = datetime(first.year, first.month, first.day, tzinfo=zone).astimezone(UTC)
    end = (datetime.combine(last + timedelta(days=1), datetime.min.time(), zone)).astimezone(UTC)
    fmt = "%Y-%m-%d %H:%M:00" if unit == "minute" else "%Y-%m-%d %H:00:00"
    keys, t = set(), start
    while t < end:
        keys.add(t.astimezone(zone).strftime(fmt))
        t += timedelta(minutes=1)
    return sorted(keys)


@pytest.mark.parametrize(
    ("tz", "first", "last"),
    [
        ("America/New_York", date(2024, 3, 10), date(2024, 3, 10)),  # 02:00-03:00 skipped
        ("America/New_York", date(2024, 11, 3), date(2024, 11, 3)),  # 01:00-02:00 twice
        ("Australia/Lord_Howe", date(2024, 4, 7), date(2024, 4, 7)),  # 30-minute fall back
        ("Australia/Lord_Howe", date(2024, 10, 6), date(2024, 10, 6)),
        ("Asia/Kolkata", date(2024, 1, 1), date(2024, 1, 2)),
        ("Asia/Kathmandu", date(2024, 1, 1), date(2024, 1, 1)),
        ("Europe/Berlin", date(2024, 3, 30), date(2024, 4, 1)),
    ],
)
@pytest.mark.parametrize("unit", ["hour", "minute"])
def test_sub_day_series_matches_every_minute(tz: str, first: date, last: date, unit: str) -> None:
    assert list(timeline_for_dates(first, last, tz, unit).series) == keys_by_brute_force(first, last, tz, unit)


def test_dst_day_has_23_and_25_hours() -> None:
    spring = timeline_for_dates(date(2024, 3, 10), date(2024, 3, 10), "America/New_York", "hour")
    autumn = timeline_for_dates(date(2024, 11, 3), date(2024, 11, 3), "America/New_York", "hour")
    assert len(spring.series) == 23 and "2024-03-10 02:00:00" not in spring.series
    assert len(autumn.series) == 24  # 01:00 repeats but is one key
    assert autumn.end - autumn.start == timedelta(hours=25)


def test_calendar_series_and_range() -> None:
    tl = timeline_for_dates(date(2024, 3, 30), date(2024, 4, 2), "Europe/Berlin", "day")
    assert tl.series == ("2024-03-30", "2024-03-31", "2024-04-01", "2024-04-02")
    assert tl.start == datetime(2024, 3, 29, 23, tzinfo=UTC) and tl.end == datetime(2024, 4, 2, 22, tzinfo=UTC)
    weeks = timeline_for_dates(date(2024, 3, 6), date(2024, 3, 20), "UTC", "week")
    assert weeks.series == ("2024-03-04", "2024-03-11", "2024-03-18")
    months = timeline_for_dates(date(2024, 1, 31), date(2024, 3, 1), "UTC", "month")
    assert months.series == ("2024-01-01", "2024-02-01", "2024-03-01")
    interval = timeline_for_dates(date(2024, 3, 1), date(2024, 3, 8), "UTC", "day", interval_days=3)
    assert interval.series == ("2024-03-01", "2024-03-04", "2024-03-07") and interval.anchor == date(2024, 3, 1)


def test_back_from_now() -> None:
    now = datetime(2024, 3, 10, 7, 20, tzinfo=UTC)  # 03:20 EDT, just after the spring-forward gap
    hours = timeline_back_from_now(now, "America/New_York", "hour", 3)
    assert hours.series == ("2024-03-10 00:00:00", "2024-03-10 01:00:00", "2024-03-10 03:00:00")
    days = timeline_back_from_now(now, "America/New_York", "day", 2)
    assert days.series == ("2024-03-09", "2024-03-10")
    weeks = timeline_back_from_now(now, "UTC", "week", 2)
    assert weeks.series == ("2024-02-26", "2024-03-04") and weeks.end == datetime(2024, 3, 11, tzinfo=UTC)
    months = timeline_back_from_now(now, "UTC", "month", 3)
    assert months.series == ("2024-01-01", "2024-02-01", "2024-03-01")


def test_timeline_reading() -> None:
    now = datetime(2024, 3, 10, tzinfo=UTC)
    with pytest.raises(ParamError, match="Missing required parameter: from_date"):
        _common.read_timeline(Params({}), "UTC", now, unit="day")
    with pytest.raises(ParamError, match="Error in to_date"):
        _common.read_timeline(Params({"from_date": "2024-03-02", "to_date": "2024-03-01"}), "UTC", now, unit="day")
    with pytest.raises(ParamError, match="Error in unit: the range holds more than"):
        _common.read_timeline(Params({"from_date": "2000-01-01", "to_date": "2024-03-01"}), "UTC", now, unit="minute")
    tl = _common.read_timeline(Params({"interval": "2"}), "UTC", now, unit="day")
    assert tl.series == ("2024-03-09", "2024-03-10")


def test_mv_covers() -> None:
    day = timeline_for_dates(date(2024, 4, 7), date(2024, 4, 7), "Australia/Lord_Howe", "hour")
    assert _common.mv_covers(_common.scope_of(1, day), day)
    minute = timeline_for_dates(date(2024, 4, 7), date(2024, 4, 7), "UTC", "minute")
    assert not _common.mv_covers(_common.scope_of(1, minute), minute)
    t = datetime(2024, 4, 7, 10, 1, tzinfo=UTC)
    assert not _common.mv_covers(Scope(1, t, t + timedelta(minutes=20)), None)  # no whole quarter hour


@pytest.mark.parametrize(
    ("low", "high", "count", "labels"),
    [
        (2003.5, 2499.0, 5, ["2,000 - 2,100", "2,100 - 2,200", "2,200 - 2,300", "2,300 - 2,400", "2,400 - 2,500"]),
        (0.0, 10.0, 10, [f"{i} - {i + 1}" for i in range(10)]),
        # width 10,003.45 rounds up to 20,000; the first edge is the multiple below -35.5
        (
            -35.5,
            99_999.0,
            10,
            ["-20,000 - 0", "0 - 20,000", "20,000 - 40,000", "40,000 - 60,000", "60,000 - 80,000", "80,000 - 100,000"],
        ),
        (0.1, 0.7, 4, ["0.0 - 0.2", "0.2 - 0.4", "0.4 - 0.6", "0.6 - 0.8"]),  # 0.15 -> 0.2
        (0.1, 0.35, 1, ["0.00 - 0.25", "0.25 - 0.50"]),  # width 0.25 exactly (2.5 x 10^-1)
        (1.0, 1.75, 3, ["1.00 - 1.25", "1.25 - 1.50", "1.50 - 1.75"]),  # the max joins the last bucket
        (9.99, 9.99, 10, ["9.99 - 9.99"]),
        (42.0, 42.0, 3, ["42 - 42"]),
    ],
    ids=[
        "doc-example",
        "exact-top-edge",
        "negative",
        "fractional",
        "quarter-width",
        "quarter-width-top-edge",
        "equal-decimal",
        "equal-integer",
    ],
)
def test_numeric_buckets(low: float, high: float, count: int, labels: list[str]) -> None:
    buckets = segmentation.numeric_buckets(low, high, count)
    assert list(buckets.labels) == labels
    assert len(buckets.edges) == len(labels) - 1


def test_numeric_bucket_edges_are_exact_decimals() -> None:
    buckets = segmentation.numeric_buckets(0.0, 0.7, 7)  # width 0.1: 0.1 + 0.2 must not drift
    assert buckets.edges == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


class _Ctx:
    def __init__(self, params: dict[str, str], tz: str = "UTC") -> None:
        self.project_id, self.timezone, self.params = 7, tz, Params(params)


INJECTION = "x') OR 1=1; DROP TABLE events --"
NOW = datetime(2024, 3, 10, tzinfo=UTC)
RANGE = {"from_date": "2024-03-01", "to_date": "2024-03-05"}


def test_sql_carries_no_request_text() -> None:
    seg = segmentation.SegmentationRequest.parse(
        _Ctx(
            {
                "event": INJECTION,
                "on": f'properties["{INJECTION}"]',
                "where": f'properties["a"] == "{INJECTION}"',
                **RANGE,
            }
        ),
        NOW,
    )  # type: ignore[arg-type]
    prop = properties.PropertiesRequest.parse(
        _Ctx({"event": INJECTION, "name": INJECTION, "values": f'["{INJECTION}"]', "type": "unique", **RANGE}), NOW
    )  # type: ignore[arg-type]
    ev = events.EventsRequest.parse(_Ctx({"event": f'["{INJECTION}"]', "unit": "hour", **RANGE}), NOW)  # type: ignore[arg-type]
    for query in (segmentation.build(seg), properties.build(prop), events.build(ev)):
        assert "DROP" not in query.text and "1=1" not in query.text
        assert INJECTION in str(query.binds.values.values()) or [INJECTION] in query.binds.values.values()
        assert 7 in query.binds.values.values()  # the project scope is always bound


def test_build_is_pure_and_stable() -> None:
    req = segmentation.SegmentationRequest.parse(
        _Ctx({"event": "e", "on": 'properties["a"]', "where": 'properties["b"] > 3', **RANGE}), NOW
    )  # type: ignore[arg-type]
    first, second = segmentation.build(req), segmentation.build(req)
    assert first.text == second.text and first.binds.values == second.binds.values
    assert "FINAL" in first.text


def test_defaults_and_ranges() -> None:
    req = segmentation.SegmentationRequest.parse(_Ctx({"event": "e", **RANGE}), NOW)  # type: ignore[arg-type]
    assert (req.type, req.timeline.unit, req.limit, req.format) == ("general", "day", 60, "json")
    names = events.NamesRequest.parse(_Ctx({}), NOW)  # type: ignore[arg-type]
    assert names.limit == 255 and names.window.end == NOW
    top = events.TopRequest.parse(_Ctx({}, "America/New_York"), NOW)  # type: ignore[arg-type]
    assert top.limit == 100 and top.today.start == datetime(2024, 3, 9, 5, tzinfo=UTC)
    assert properties.TopRequest.parse(_Ctx({"event": "e"}), NOW).limit == 10  # type: ignore[arg-type]
    assert properties.ValuesRequest.parse(_Ctx({"name": "n"}), NOW).limit == 255  # type: ignore[arg-type]
    with pytest.raises(ParamError, match="Error in limit: must be at most 10000"):
        segmentation.SegmentationRequest.parse(_Ctx({"event": "e", "limit": "10001", **RANGE}), NOW)  # type: ignore[arg-type]
    interval = segmentation.SegmentationRequest.parse(
        _Ctx({"event": "e", "interval": "2", "type": "unique", **RANGE}), NOW
    )  # type: ignore[arg-type]
    assert interval.timeline.interval_days == 2
    general = segmentation.SegmentationRequest.parse(_Ctx({"event": "e", "interval": "2", **RANGE}), NOW)  # type: ignore[arg-type]
    assert general.timeline.interval_days is None
