"""ClickHouse computes the same bucket key as the Python timeline for every instant:
minute, hour, day, week, month and N-day buckets, in zones with DST, 30- and 45-minute
offsets and Lord Howe's 30-minute DST change (where `toStartOfHour` would be wrong)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from footfall.services.query.reports._common import Binds, bucket_key, timeline_for_dates
from footfall.shared.sql import render, sql
from footfall.shared.warehouse import ClickHouseWarehouse

pytestmark = pytest.mark.warehouse

ZONES = ["America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Asia/Kathmandu", "Europe/Berlin", "UTC"]


def python_key(t: datetime, tz: str, unit: str, anchor: date | None = None, width: int = 0) -> str:
    local = t.astimezone(ZoneInfo(tz))
    if unit == "minute":
        return local.strftime("%Y-%m-%d %H:%M:00")
    if unit == "hour":
        return local.strftime("%Y-%m-%d %H:00:00")
    d = local.date()
    if anchor is not None:
        return (anchor + timedelta(days=(d - anchor).days // width * width)).isoformat()
    if unit == "week":
        d -= timedelta(days=d.weekday())
    if unit == "month":
        d = d.replace(day=1)
    return d.isoformat()


@pytest.mark.parametrize("tz", ZONES)
def test_sql_bucket_keys_equal_python(warehouse: ClickHouseWarehouse, tz: str) -> None:
    start = datetime(2024, 3, 8, tzinfo=UTC)
    step_ms = 7 * 60_000 + 13_457  # odd step: every minute-of-hour and second phase gets visited
    count = 24_000  # about 128 days: every 2024 DST change of the northern zones and Lord Howe's April one
    cases = [
        ("minute", None, 0),
        ("hour", None, 0),
        ("day", None, 0),
        ("week", None, 0),
        ("month", None, 0),
        ("day", date(2024, 3, 9), 4),
    ]
    for unit, anchor, width in cases:
        tl = timeline_for_dates(date(2024, 3, 9), date(2024, 3, 10), tz, unit, width or None)
        binds = Binds()
        ts = sql("t")
        key = bucket_key(ts, tl, binds)
        binds_start = binds.add(start, "DateTime64(3, 'UTC')")
        binds_step = binds.add(step_ms, "UInt32")
        text = render(
            sql(
                "SELECT number, {} FROM (SELECT number, {} + toIntervalMillisecond(number * {}) AS t "
                "FROM numbers(24000)) ORDER BY number",
                key,
                binds_start,
                binds_step,
            )
        )
        rows = warehouse.query(text, binds.values)
        assert len(rows) == count
        for n, got in rows:
            t = start + timedelta(milliseconds=n * step_ms)
            if anchor is not None and t < tl.start:
                continue  # N-day buckets are only asked for instants of the range, all after the anchor
            assert got == python_key(t, tz, unit, anchor, width), (unit, t, tz)
