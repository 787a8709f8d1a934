"""Reference `/events`, `/events/top`, `/events/names`.

Signatures: `(events, tz, params, now)`; `now` is an aware datetime (the service's clock at query time).

Interpretations:
- /events: `event` is a JSON array; every requested name (deduplicated, in request order) is a key of
  `values`, zero-filled over `series`, even when it has no events; `legend_size` = len(values). `unit`
  default day. With from_date+to_date the range is those local days; without them `interval` N means the
  current `unit` bucket (holding `now`) and the N-1 before it (see _common.timeline_back_from_now). Dates
  win when both are given. `interval` is never a bucket width here. type=unique with hour/minute is computed.
- /events/top: "today" = [local midnight of now's date, now); "yesterday" = the same elapsed duration from
  the previous local midnight. Only events with a non-zero amount today are listed. `amount` = today's
  value of `type` (average is a float); percent_change = (today - yesterday) / yesterday as a float, 1.0
  when yesterday is 0. Sorted by amount descending, then name ascending; `limit` default 100.
- /events/names: window = the last 31 local days including today (today-30 .. now). Names ranked by the
  `type` measure over the window (ties: name ascending), top `limit` (default 255) kept, then returned in
  descending code-point order (decisions.md). Names whose measure is 0 (e.g. unique with only anonymous
  events) still count as seen.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from ._common import Event, dates_timeline, day_start_ms, json_list, local, measure, prepare, to_ms, zone

__all__ = ["events", "last_31_days", "names", "top"]


def events(raw_events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    wanted = list(dict.fromkeys(str(n) for n in json_list(params["event"])))
    kind = params.get("type") or "general"
    tl = dates_timeline(zone(tz), params, "day", now)
    cells: dict[str, dict[str, list[Event]]] = {n: defaultdict(list) for n in wanted}
    for e in prepare(raw_events):
        key = tl.key(e.time_ms) if e.name in cells else None
        if key is not None:
            cells[e.name][key].append(e)
    values = {n: {k: measure(kind, cells[n].get(k, [])) for k in tl.series} for n in wanted}
    return {"data": {"series": list(tl.series), "values": values}, "legend_size": len(values)}


def _window(evs: list[Event], start_ms: int, end_ms: int) -> dict[str, list[Event]]:
    by_name: dict[str, list[Event]] = defaultdict(list)
    for e in evs:
        if start_ms <= e.time_ms < end_ms:
            by_name[e.name].append(e)
    return by_name


def top(raw_events: list[dict], tz, params: dict, now: datetime) -> dict:
    tz = zone(tz)
    kind = params.get("type") or "general"
    now_ms = to_ms(now)
    today = local(now_ms, tz).date()
    today_ms = day_start_ms(today, tz)
    yesterday_ms = day_start_ms(today - timedelta(days=1), tz)
    evs = prepare(raw_events)
    today_by = _window(evs, today_ms, now_ms)
    yest_by = _window(evs, yesterday_ms, yesterday_ms + (now_ms - today_ms))
    rows = []
    for name, today_evs in today_by.items():
        amount = measure(kind, today_evs)
        if not amount:
            continue
        before = measure(kind, yest_by.get(name, []))
        change = (amount - before) / before if before else 1.0
        rows.append({"amount": amount, "event": name, "percent_change": float(change)})
    rows.sort(key=lambda r: (-r["amount"], r["event"]))
    return {"events": rows[: int(params.get("limit") or 100)], "type": kind}


def last_31_days(tz, now: datetime) -> tuple[int, int]:
    """[local midnight 30 days before today, now)."""
    tz = zone(tz)
    now_ms = to_ms(now)
    return day_start_ms(local(now_ms, tz).date() - timedelta(days=30), tz), now_ms


def names(raw_events: list[dict], tz, params: dict, now: datetime) -> list[str]:
    kind = params.get("type") or "general"
    start_ms, end_ms = last_31_days(tz, now)
    by_name = _window(prepare(raw_events), start_ms, end_ms)
    volume = {n: measure(kind, evs) for n, evs in by_name.items()}
    chosen = sorted(volume, key=lambda n: (-volume[n], n))[: int(params.get("limit") or 255)]
    return sorted(chosen, reverse=True)
