"""Reference `/retention` (semantics.md §2.2, decisions.md).

`retention(events, tz, params, now=None)`. Only users with a non-empty distinct_id take part.

Interpretations:
- Cohort keys are the calendar `unit` buckets (day; Monday week; first of month) of the local birth date,
  for every bucket intersecting [from_date, to_date]; each is present (zero-filled: first 0, counts of 0s).
  Only births inside the inclusive local range form cohorts.
- birth: a user's birth = their FIRST-EVER event named `born_event` passing `born_where` (history before
  from_date included); the user joins the cohort of that birth only. `where` does not apply to births.
- compounded: `born_event`/`born_where` are ignored; cohort-defining events are those matching `event`
  (any event when absent) and `where`; a user joins the cohort of every bucket in which they have one,
  anchored at their first such event in that bucket (decisions.md).
- Returns: events matching `event` (any event when absent) and `where`, at or after the anchor, other than
  the anchor instance itself (another event at the same instant counts). Return r falls in bucket
  i = the i with anchor + i*L <= t(r) < anchor + (i+1)*L, L = interval x unit; day/week are absolute
  (24 h / 168 h), month is wall-clock calendar months in the project zone with the day clamped (Jan 31 ->
  Feb 29). counts[i] = users with a return in bucket i, for i = 0..interval_count (interval_count + 1 values).
  `interval` default 1, `interval_count` default 1, `unit` default day.
- unbounded_retention=true: counts[i] = users with a return in any bucket j >= i, j <= interval_count
  (right-to-left OR over the reported buckets only).
- `on` segments the RETURN events: segment v's counts[i] = users with a return in bucket i whose `on` keys
  include v; its `first` is the whole cohort size (births are not split). Keys ranked by the number of
  distinct users with a counted return (any cohort, any reported bucket) carrying the key, ties by key; top
  `limit` (default 255). Shape: {date: {"$overall": {"first", "counts"}, "<key>": {...}, ...}}, every kept
  key present in every date.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from ._common import UNIT_MS, Event, add_months, dates_timeline, flag, local, prepare, to_ms, top_keys, zone
from .expr import on_keys, where_matches

__all__ = ["bucket_index", "retention"]


def bucket_index(anchor_ms: int, t_ms: int, unit: str, interval: int, tz) -> int:
    """The rolling bucket of a return at t_ms (>= anchor_ms)."""
    if unit in ("day", "week"):
        return (t_ms - anchor_ms) // (interval * UNIT_MS[unit])
    base = local(anchor_ms, tz)
    i = 0
    while to_ms(add_months(base, (i + 1) * interval)) <= t_ms:
        i += 1
    return i


def retention(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    tz = zone(tz)
    unit = params.get("unit") or "day"
    interval = int(params.get("interval") or 1)
    n_buckets = int(params.get("interval_count") or 1) + 1
    tl = dates_timeline(tz, {**params, "unit": unit, "interval": None}, unit, now)
    event, where, on = params.get("event"), params.get("where"), params.get("on")

    def is_return(e: Event) -> bool:
        return (not event or e.name == event) and where_matches(where, e)

    by_user: dict[str, list[Event]] = defaultdict(list)
    for e in prepare(events):
        if e.distinct_id:
            by_user[e.distinct_id].append(e)

    # cohort key -> list of (user, anchor event)
    cohorts: dict[str, list[tuple[str, Event]]] = {k: [] for k in tl.series}
    for uid in sorted(by_user):
        evs = by_user[uid]
        if (params.get("retention_type") or "birth") == "birth":
            born = [e for e in evs if e.name == params["born_event"] and where_matches(params.get("born_where"), e)]
            anchors = born[:1]
        else:
            firsts: dict[str, Event] = {}
            for e in evs:
                key = tl.key(e.time_ms)
                if key is not None and key not in firsts and is_return(e):
                    firsts[key] = e
            anchors = list(firsts.values())
        for a in anchors:
            key = tl.key(a.time_ms)
            if key is not None:
                cohorts[key].append((uid, a))

    # (cohort key, segment or None for overall) -> per bucket set of users
    hits: dict[tuple[str, str | None], list[set[str]]] = defaultdict(lambda: [set() for _ in range(n_buckets)])
    seg_users: dict[str, set[str]] = defaultdict(set)
    for key, members in cohorts.items():
        for uid, anchor in members:
            for r in by_user[uid]:
                if r is anchor or r.time_ms < anchor.time_ms or not is_return(r):
                    continue
                i = bucket_index(anchor.time_ms, r.time_ms, unit, interval, tz)
                if i >= n_buckets:
                    continue
                hits[(key, None)][i].add(uid)
                for seg in on_keys(on, r) if on else []:
                    hits[(key, seg)][i].add(uid)
                    seg_users[seg].add(uid)

    def counts(key: str, seg: str | None) -> list[int]:
        sets = hits.get((key, seg)) or [set() for _ in range(n_buckets)]
        if flag(params, "unbounded_retention"):
            acc: set[str] = set()
            out = []
            for s in reversed(sets):
                acc |= s
                out.append(len(acc))
            return out[::-1]
        return [len(s) for s in sets]

    if not on:
        return {key: {"counts": counts(key, None), "first": len(cohorts[key])} for key in tl.series}
    keep = top_keys({s: len(u) for s, u in seg_users.items()}, int(params.get("limit") or 255))
    result = {}
    for key in tl.series:
        first = len(cohorts[key])
        result[key] = {"$overall": {"counts": counts(key, None), "first": first}}
        for seg in keep:
            result[key][seg] = {"counts": counts(key, seg), "first": first}
    return result
