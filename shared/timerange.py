"""Project-time-zone date ranges: `from_date`/`to_date` are inclusive local calendar days."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo


def local_midnight_utc(day: date, tz: str) -> datetime:
    """The UTC instant at which `day` starts in `tz` (DST-safe: midnight always exists or is
    resolved by zoneinfo's fold rules to the first instant of the day)."""
    local = datetime.combine(day, time(0), tzinfo=ZoneInfo(tz))
    return local.astimezone(UTC)


def day_range_utc(from_date: date, to_date: date, tz: str) -> tuple[datetime, datetime]:
    """[start, end) in UTC covering the local days from_date..to_date inclusive."""
    return local_midnight_utc(from_date, tz), local_midnight_utc(to_date + timedelta(days=1), tz)
