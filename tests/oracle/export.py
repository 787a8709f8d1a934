"""Reference `/api/2.0/export`: the stored events of a date range, one JSON object each.

Signature: `export(events, tz, params)` → the list of exported objects, in a canonical order
(time, then `$insert_id`; the service's order among equal times is its own).

Interpretations:
- `from_date`/`to_date` are inclusive local days of the project's time zone; the events are
  deduplicated first (the last copy of a duplicate wins, `_common.prepare`).
- `event` (a JSON array) keeps only those names; `where` keeps an event only when the
  expression is boolean true for it (`expr.where_matches`, evaluated on the stored event).
- Each object: `{"event": name, "properties": {"time": seconds (ms with time_in_ms=true),
  "distinct_id", "$insert_id", ...the stored properties}}`. `mp_processing_time_ms` (the
  ingestion time) is not modelled: compare without it.
"""

from __future__ import annotations

from ._common import day_start_ms, json_list, parse_date, prepare, zone
from .expr import where_matches

__all__ = ["export"]


def export(raw_events: list[dict], tz, params: dict) -> list[dict]:
    z = zone(tz)
    start = day_start_ms(parse_date(params["from_date"]), z)
    last = parse_date(params["to_date"])
    end = day_start_ms(last.fromordinal(last.toordinal() + 1), z)
    names = set(json_list(params["event"])) if params.get("event") else None
    in_ms = str(params.get("time_in_ms", "")).lower() == "true"
    out = []
    for e in prepare(raw_events):
        if not start <= e.time_ms < end or (names is not None and e.name not in names):
            continue
        if not where_matches(params.get("where"), e):
            continue
        props = {
            "time": e.time_ms if in_ms else e.time_ms // 1000,
            "distinct_id": e.distinct_id,
            "$insert_id": e.insert_id,
            **e.properties,
        }
        out.append({"event": e.name, "properties": props})
    out.sort(key=_order)
    return out


def _order(o: dict) -> tuple:
    p = o["properties"]
    return (p["time"], p["$insert_id"], o["event"], p["distinct_id"])
