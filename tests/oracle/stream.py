"""Reference `/stream/query` (semantics.md §1.10).

`stream(events, tz, params, now=None)` -> {"status": "ok", "results": {"events": [...]}}.

Interpretations:
- `distinct_ids` is a JSON array; ids are compared as strings (an int id 12345 matches "12345", as /import
  stores it). The empty string is an ordinary id here (only listed ids are returned).
- Range: inclusive local days [from_date, to_date]. Deduplicated events, ascending by time, ties by
  (event name, distinct_id, $insert_id).
- Each item is {"event": name, "properties": {...}} where properties = the stored properties (strings
  truncated, `token`/`ip` gone) plus "time" (epoch SECONDS, int, ms truncated), "distinct_id" and
  "$insert_id" (the normalised values).
"""

from __future__ import annotations

from datetime import datetime

from ._common import dates_timeline, json_list, prepare, zone

__all__ = ["stream"]


def stream(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    wanted = {str(i) for i in json_list(params["distinct_ids"])}
    tl = dates_timeline(zone(tz), {**params, "unit": "day", "interval": None}, "day", now)
    out = []
    for e in prepare(events):  # already sorted by (time, name, distinct_id, insert_id)
        if e.distinct_id in wanted and tl.key(e.time_ms) is not None:
            props = {**e.properties, "time": e.time_ms // 1000, "distinct_id": e.distinct_id, "$insert_id": e.insert_id}
            out.append({"event": e.name, "properties": props})
    return {"status": "ok", "results": {"events": out}}
