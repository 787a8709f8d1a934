"""`Timeline`: the local days `from_date`..`to_date` (inclusive) of the project's time zone,
or the last `interval` units back from now, cut into keyed buckets.

Bucket keys (decisions.md): `yyyy-mm-dd` for day, the Monday for week, the first of the
month for month, `yyyy-mm-dd HH:00:00` / `yyyy-mm-dd HH:MM:00` (local wall clock) for hour
and minute. A wall-clock hour that repeats at a DST fall-back is one bucket; a skipped one
has no key. `series` lists every key that has an instant in the range, ascending.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from footfall.services.query.params import Params, check_range
from footfall.services.query.reports._common.parameters import read_dates
from footfall.shared.errors import ParamError
from footfall.shared.timerange import local_midnight_utc

__all__ = ["MAX_BUCKETS", "QUARTER", "Timeline", "read_timeline", "timeline_back_from_now", "timeline_for_dates"]

MAX_BUCKETS = 50_000
QUARTER = timedelta(minutes=15)


@dataclass(frozen=True)
class Timeline:
    """Half-open UTC range [start, end) cut into local buckets of `unit`, or into
    `interval_days`-day buckets anchored at `anchor` (keyed by their first day)."""

    tz: str
    start: datetime
    end: datetime
    unit: str
    series: tuple[str, ...]
    interval_days: int | None = None
    anchor: date | None = None


_HOUR_SUFFIXES = tuple(f" {h:02d}:00:00" for h in range(24))
_MINUTE_SUFFIXES = tuple(f" {h:02d}:{m:02d}:00" for h in range(24) for m in range(60))


def _quarter_keys(start: datetime, end: datetime, tz: ZoneInfo, unit: str) -> list[str]:
    """Every local hour/minute key with an instant in [start, end), sorted. Offsets and DST
    transitions are whole quarter hours, so the offset is constant inside a UTC quarter
    hour: one zone conversion per quarter, the minutes inside it by arithmetic."""
    keys: set[str] = set()
    q = start - timedelta(minutes=start.minute % 15, seconds=start.second, microseconds=start.microsecond)
    while q < end:
        local = q.astimezone(tz)
        if unit == "hour":
            keys.add(local.strftime("%Y-%m-%d %H:00:00"))
        else:
            first = max(q, start)
            last = min(q + QUARTER, end)
            offset = local.utcoffset() or timedelta(0)
            m = first.replace(second=0, microsecond=0)
            while m < last:
                keys.add((m + offset).strftime("%Y-%m-%d %H:%M:00"))
                m += timedelta(minutes=1)
        q += QUARTER
    return sorted(keys)


def _sub_day_series(start: datetime, end: datetime, tz: ZoneInfo, unit: str) -> tuple[str, ...]:
    """Every local hour/minute key with an instant in [start, end), ascending.

    The size of the range is checked before any key is made (a 400 costs nothing). Keys
    are made per local day: a whole day without an offset change holds exactly the keys
    00:00..23:59 of its date (made by concatenation), any other day or part of a day is
    walked by quarter hours (`_quarter_keys`). A day's keys all carry its date, so the
    days' lists concatenate in order."""
    size = timedelta(hours=1) if unit == "hour" else timedelta(minutes=1)
    too_many = ParamError(f"Error in unit: the range holds more than {MAX_BUCKETS} {unit} buckets")
    if (end - start) // size > MAX_BUCKETS + 48:  # DST can add at most a bucket a day
        raise too_many
    suffixes = _HOUR_SUFFIXES if unit == "hour" else _MINUTE_SUFFIXES
    keys: list[str] = []
    day = start.astimezone(tz).date()
    day_start = local_midnight_utc(day, tz.key)
    while day_start < end:
        next_start = local_midnight_utc(day + timedelta(days=1), tz.key)
        lo, hi = max(start, day_start), min(end, next_start)
        if lo < hi:
            whole = lo == day_start and hi == next_start and next_start - day_start == timedelta(days=1)
            if whole and day_start.astimezone(tz).utcoffset() == (next_start - QUARTER).astimezone(tz).utcoffset():
                iso = day.isoformat()
                keys.extend(iso + suffix for suffix in suffixes)
            else:
                keys.extend(_quarter_keys(lo, hi, tz, unit))
        if len(keys) > MAX_BUCKETS:
            raise too_many
        day, day_start = day + timedelta(days=1), next_start
    return tuple(keys)


def _calendar_key(day: date, unit: str) -> str:
    if unit == "week":
        day -= timedelta(days=day.weekday())
    elif unit == "month":
        day = day.replace(day=1)
    return day.isoformat()


def _series(start: datetime, end: datetime, first: date, last: date, tz: ZoneInfo, unit: str) -> tuple[str, ...]:
    if unit in ("minute", "hour"):
        return _sub_day_series(start, end, tz, unit)
    if (last - first).days > MAX_BUCKETS:
        raise ParamError(f"Error in to_date: the range holds more than {MAX_BUCKETS} days")
    return tuple(sorted({_calendar_key(first + timedelta(days=i), unit) for i in range((last - first).days + 1)}))


def timeline_for_dates(
    first: date, last: date, tz: str, unit: str = "day", interval_days: int | None = None
) -> Timeline:
    check_range(first, last)
    zone = ZoneInfo(tz)
    start, end = local_midnight_utc(first, tz), local_midnight_utc(last + timedelta(days=1), tz)
    if interval_days:
        span = (last - first).days + 1
        series = tuple((first + timedelta(days=i)).isoformat() for i in range(0, span, interval_days))
        return Timeline(tz, start, end, "day", series, interval_days, first)
    return Timeline(tz, start, end, unit, _series(start, end, first, last, zone, unit))


def _add_months(day: date, n: int) -> date:
    months = day.year * 12 + day.month - 1 + n
    return date(months // 12, months % 12 + 1, 1)


def timeline_back_from_now(now: datetime, tz: str, unit: str, n: int) -> Timeline:
    """`interval` on /events*: the `unit` bucket holding `now` and the n-1 before it.
    Calendar units step back in local calendar units; hour/minute in absolute ones."""
    zone = ZoneInfo(tz)
    if unit in ("minute", "hour"):
        size = timedelta(minutes=1) if unit == "minute" else timedelta(hours=1)
        local = now.astimezone(zone)
        floored = local.replace(second=0, microsecond=0)
        if unit == "hour":
            floored = floored.replace(minute=0)
        end = floored.astimezone(UTC) + size
        start = end - n * size
        return Timeline(tz, start, end, unit, _sub_day_series(start, end, zone, unit))
    today = now.astimezone(zone).date()
    if unit == "day":
        first, last = today - timedelta(days=n - 1), today
    elif unit == "week":
        monday = today - timedelta(days=today.weekday())
        first, last = monday - timedelta(weeks=n - 1), monday + timedelta(days=6)
    else:
        month = today.replace(day=1)
        first, last = _add_months(month, -(n - 1)), _add_months(month, 1) - timedelta(days=1)
    return timeline_for_dates(first, last, tz, unit)


def read_timeline(
    p: Params, tz: str, now: datetime, *, unit: str, allow_interval_days: bool = False, max_interval: int = 36_500
) -> Timeline:
    """`from_date`+`to_date` (inclusive local days) when given, cut by `unit`, or by
    `interval`-day buckets when `allow_interval_days`; else the last `interval` units."""
    interval = p.integer("interval", None, minimum=1, maximum=max_interval)
    if p.get("from_date") is not None or p.get("to_date") is not None or interval is None:
        first, last = read_dates(p)
        return timeline_for_dates(first, last, tz, unit, interval if allow_interval_days else None)
    return timeline_back_from_now(now, tz, unit, interval)
