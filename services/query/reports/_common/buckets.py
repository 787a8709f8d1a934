"""Bucket keys computed by ClickHouse, the same keys as `Timeline.series`.

* `bucket_key()`: the key of a timestamp, as a String. The key is taken from the local
  wall-clock text (`toString(toDateTime(t, tz))`), never from `toStartOfHour`, whose
  instants are wrong in 30-minute DST zones (Australia/Lord_Howe).
* `bucket_date()`: the key of a local day, as a Date, for calendar units and N-day
  buckets; a Date keeps per-user arrays numeric. `bucket_date_of_ms()`: the same for an
  instant in epoch milliseconds.
"""

from __future__ import annotations

from footfall.services.query.reports._common.scan import Binds
from footfall.services.query.reports._common.timeline import Timeline
from footfall.shared.sql import Sql, sql

__all__ = ["bucket_date", "bucket_date_of_ms", "bucket_key"]


def bucket_key(ts: Sql, timeline: Timeline, binds: Binds) -> Sql:
    """The bucket key (String) of timestamp expression `ts`, as `Timeline` keys them."""
    tz = binds.add(timeline.tz, "String")
    match timeline.unit:
        case "minute":
            return sql("concat(substring(toString(toDateTime({}, {})), 1, 16), ':00')", ts, tz)
        case "hour":
            return sql("concat(substring(toString(toDateTime({}, {})), 1, 13), ':00:00')", ts, tz)
    return sql("toString({})", bucket_date(sql("toDate({}, {})", ts, tz), timeline, binds))


def bucket_date(day: Sql, timeline: Timeline, binds: Binds) -> Sql:
    """The bucket key, as a Date, of `day` (a Date in the timeline's zone): the first day
    of its `interval_days` bucket (anchored at `timeline.anchor`), else its day, Monday or
    first of the month."""
    if timeline.interval_days:
        if timeline.anchor is None:
            raise AssertionError("invariant: timeline.anchor is not None")
        anchor = binds.add(timeline.anchor, "Date")
        width = binds.add(timeline.interval_days, "UInt32")
        return sql("addDays({}, intDiv(dateDiff('day', {}, {}), {}) * {})", anchor, anchor, day, width, width)
    match timeline.unit:
        case "day":
            return day
        case "week":
            return sql("toMonday({})", day)
        case "month":
            return sql("toStartOfMonth({})", day)
    raise AssertionError(f"no Date bucket for unit {timeline.unit!r}")  # pragma: no cover


def bucket_date_of_ms(ms: Sql, timeline: Timeline, binds: Binds) -> Sql:
    """`bucket_date` of the instant `ms` (Int64 epoch milliseconds)."""
    day = sql("toDate(fromUnixTimestamp64Milli({}, {}))", ms, binds.add(timeline.tz, "String"))
    return bucket_date(day, timeline, binds)
