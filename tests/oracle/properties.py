"""Reference `/events/properties`, `/events/properties/top`, `/events/properties/values`.

Signatures: `(events, tz, params, now)`.

Interpretations:
- /events/properties: segments are the keys of the property value exactly as `on=properties["<name>"]`
  would give (expr.segment_keys: string() form, lists -> one key per element, undefined/null/object -> no
  key). `values` (JSON array) keeps only segments whose key equals one of the listed values (after
  string()); listed values without events do not appear. Then the top `limit` (default 255) by the type's
  total over the range; zero-filled over `series`. Range/unit/interval as for /events (events.py).
- /events/properties/top: window = the last 31 local days (as /events/names). Counts events named `event`
  whose stored properties contain the key (any value, null included). The lifted keys (time, distinct_id,
  $insert_id, token, ip) are not properties. Top `limit` (default 10) by count, ties by name ascending;
  the dict is emitted in that order.
- /events/properties/values: same 31-day window; without `event` all events are searched. Values are the
  segment keys of the property (as above), ranked by the number of events carrying them, ties by value
  ascending; top `limit` (default 255).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from ._common import Event, dates_timeline, json_list, measure, prepare, rank_total, top_keys, zone
from .events import last_31_days
from .expr import UNDEFINED, segment_keys, to_string

__all__ = ["properties", "top", "values"]


def properties(raw_events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    kind = params.get("type") or "general"
    prop = params["name"]
    tl = dates_timeline(zone(tz), params, "day", now)
    allowed = None
    if params.get("values"):
        allowed = {s for s in (to_string(v) for v in json_list(params["values"])) if isinstance(s, str)}
    cells: dict[str, dict[str, list[Event]]] = defaultdict(lambda: defaultdict(list))
    for e in prepare(raw_events):
        key = tl.key(e.time_ms) if e.name == params["event"] else None
        if key is None:
            continue
        for seg in segment_keys(e.properties.get(prop, UNDEFINED)):
            if allowed is None or seg in allowed:
                cells[seg][key].append(e)
    totals = {seg: rank_total(kind, [e for evs in by_key.values() for e in evs]) for seg, by_key in cells.items()}
    keep = top_keys(totals, int(params.get("limit") or 255))
    out = {seg: {k: measure(kind, cells[seg].get(k, [])) for k in tl.series} for seg in keep}
    return {"data": {"series": list(tl.series), "values": out}, "legend_size": len(out)}


def top(raw_events: list[dict], tz, params: dict, now: datetime) -> dict:
    start_ms, end_ms = last_31_days(tz, now)
    counts: Counter[str] = Counter()
    for e in prepare(raw_events):
        if e.name == params["event"] and start_ms <= e.time_ms < end_ms:
            counts.update(e.properties.keys())
    keep = top_keys(dict(counts), int(params.get("limit") or 10))
    return {k: {"count": counts[k]} for k in keep}


def values(raw_events: list[dict], tz, params: dict, now: datetime) -> list[str]:
    start_ms, end_ms = last_31_days(tz, now)
    event, prop = params.get("event"), params["name"]
    counts: Counter[str] = Counter()
    for e in prepare(raw_events):
        if (not event or e.name == event) and start_ms <= e.time_ms < end_ms:
            counts.update(segment_keys(e.properties.get(prop, UNDEFINED)))
    return top_keys(dict(counts), int(params.get("limit") or 255))
