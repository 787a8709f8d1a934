"""Reference `/retention/addiction` (the frequency report, semantics.md §2.3).

`frequency(events, tz, params, now=None)` -> {"data": {period key: [int, ...]}}.

Interpretations:
- Periods are the calendar `unit` buckets (day; Monday week; first-of-month month) intersecting
  [from_date, to_date], keyed by their first day (which may precede from_date); each period's window is the
  WHOLE calendar period in local time, even where it extends outside [from_date, to_date].
- Slots are local wall-clock: `addiction_unit=day` -> the period's local dates; `hour` -> (local date,
  local hour) pairs. The array length is fixed: days_in_period x (24 for hour, 1 for day), so DST does not
  change it (a skipped hour just never has activity; a repeated hour is one slot).
- element k = number of users (non-empty distinct_id) with matching events (`event`, any when absent, and
  `where`) in at least k+1 distinct slots of the period. Non-increasing by construction.
- `on`: an event contributes to segment v when its `on` keys include v; data[date] becomes
  {"$overall": [...], "<key>": [...], ...}; keys ranked by distinct users having the key in any period
  (ties by key), top `limit` (default 255), every kept key in every period.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime

from ._common import add_units, calendar_start, dates_timeline, local, prepare, top_keys, zone
from .expr import on_keys, where_matches

__all__ = ["frequency"]


def frequency(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    tz = zone(tz)
    unit, slot_unit = params["unit"], params["addiction_unit"]
    tl = dates_timeline(tz, {**params, "interval": None}, unit, now)
    periods = [date.fromisoformat(k) for k in tl.series]
    event, where, on = params.get("event"), params.get("where"), params.get("on")
    per_hour = slot_unit == "hour"

    # (period key, segment or None) -> user -> set of slots
    slots: dict[tuple[str, str | None], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    seg_users: dict[str, set[str]] = defaultdict(set)
    for e in prepare(events):
        if not e.distinct_id or (event and e.name != event) or not where_matches(where, e):
            continue
        dt = local(e.time_ms, tz)
        start = calendar_start(dt.date(), unit)
        if start not in periods:
            continue
        offset = (dt.date() - start).days
        slot = offset * 24 + dt.hour if per_hour else offset
        key = start.isoformat()
        slots[(key, None)][e.distinct_id].add(slot)
        for seg in on_keys(on, e) if on else []:
            slots[(key, seg)][e.distinct_id].add(slot)
            seg_users[seg].add(e.distinct_id)

    def row(start: date, seg: str | None) -> list[int]:
        n = (add_units(start, unit, 1) - start).days * (24 if per_hour else 1)
        active = [len(s) for s in slots.get((start.isoformat(), seg), {}).values()]
        return [sum(1 for a in active if a >= k + 1) for k in range(n)]

    if not on:
        return {"data": {p.isoformat(): row(p, None) for p in periods}}
    keep = top_keys({s: len(u) for s, u in seg_users.items()}, int(params.get("limit") or 255))
    return {"data": {p.isoformat(): {"$overall": row(p, None), **{s: row(p, s) for s in keep}} for p in periods}}
