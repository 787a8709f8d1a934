"""Reference `/funnels` (semantics.md §2.1, decisions.md).

`funnels(events, tz, params, funnel, now=None)`; `funnel` = {"steps": [{"event": name, "selector"?: expr,
"custom_event"?: {"id", "name", "events": [...]}}, ...], "length": int, "length_unit": str}; `params` may
override length/length_unit and gives from_date, to_date, interval, unit, on, where, limit.

Algorithm, per date bucket B and user U (non-empty distinct_id), over U's events that pass `where`:
1. entry = U's first event (by time) matching step 0 whose time lies in B (B is clipped to
   [from_date, to_date]); no entry -> U is not in B's funnel.
2. window end = entry time + length*length_unit (absolute: day = 86 400 s, week = 7 days); the end is
   INCLUSIVE (an event exactly at entry + window still converts).
3. for k = 1..n-1: the earliest (by time, then position) not-yet-used event matching step k whose time is
   >= t(k-1) - 2 s (the 2-second grace between consecutive steps) and <= window end. Events after to_date
   are examined; grace can select an event up to 2 s before the previous step (even before the entry).
   No such event -> U stops at step k-1. (Greedy earliest is optimal for loose ordering.)
Steps: `count` = users reaching the step. `avg_time` (step 0: null) = mean over users reaching step i of
max(0, t(i) - t(i-1)); `avg_time_from_start` (step 0: 0) = mean of max(0, t(i) - t(0)); both in seconds,
rounded half up to an int (exact arithmetic on ms); 0 when nobody reached the step.
`step_conv_ratio`: step 0 is 1.0; else count[i]/count[i-1], 0.0 when count[i-1] is 0. `overall_conv_ratio`:
step 0 is 1.0; else count[i]/count[0], 0.0 when count[0] is 0. Floats.
Step labels: plain step -> goal = event = step_label = event name. Custom event -> goal = event =
"$custom_event:<id>", step_label = the custom event's name, custom_event = true, custom_event_id = id;
a custom step matches any of its `events` (OR). `selector` (if any) must also match (where_matches).
`analysis`: completion = last step count, starting_amount = step 0 count, steps = n, worst = 0-based index
of the lowest step_conv_ratio among steps >= 1 (first one on ties; 0 for a 1-step funnel).
Buckets: `unit` (day/week/month: calendar buckets, Monday weeks, keyed by their first day, which may be
before from_date) wins over `interval` (N-day buckets anchored at from_date; default 1). Every bucket is in
`meta.dates` and `data`, empty ones with zero counts.
`on`: the segment keys of the ENTRY (step-0) event's `on` value (expr.on_keys); a user's whole attempt
counts in each of those segments (and always in $overall); entries whose value has no key count only in
$overall. Segments ranked by the number of entries (users x buckets) over the whole range, ties by key,
top `limit` (default 255). With `on`, data[date] = {"$overall": [steps], "<key>": [steps], ...} with every
kept key present in every date (zero counts where empty) and no `analysis`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from fractions import Fraction

from ._common import UNIT_MS, Event, dates_timeline, prepare, top_keys, zone
from .expr import on_keys, where_matches

__all__ = ["GRACE_MS", "funnels", "run_attempt", "step_rows"]

GRACE_MS = 2000


def _matches(step: dict, e: Event) -> bool:
    names = step["custom_event"]["events"] if step.get("custom_event") else [step["event"]]
    return e.name in names and where_matches(step.get("selector"), e)


def run_attempt(steps: list[dict], user_events: list[Event], entry: int, window_ms: int) -> list[int]:
    """Times (ms) of the steps reached, starting with the entry event at index `entry`."""
    t0 = user_events[entry].time_ms
    times, used = [t0], {entry}
    for step in steps[1:]:
        best = None
        for i, e in enumerate(user_events):
            if i in used or not (times[-1] - GRACE_MS <= e.time_ms <= t0 + window_ms) or not _matches(step, e):
                continue
            if best is None or e.time_ms < user_events[best].time_ms:
                best = i
        if best is None:
            break
        used.add(best)
        times.append(user_events[best].time_ms)
    return times


def _avg_seconds(deltas_ms: list[int]) -> int:
    if not deltas_ms:
        return 0
    mean = Fraction(sum(max(0, d) for d in deltas_ms), 1000 * len(deltas_ms))
    return math.floor(mean + Fraction(1, 2))


def step_rows(steps: list[dict], attempts: list[list[int]]) -> list[dict]:
    counts = [sum(1 for a in attempts if len(a) > i) for i in range(len(steps))]
    rows = []
    for i, step in enumerate(steps):
        reached = [a for a in attempts if len(a) > i]
        custom = step.get("custom_event")
        goal = f"$custom_event:{custom['id']}" if custom else step["event"]
        row = {
            "count": counts[i],
            "avg_time": None if i == 0 else _avg_seconds([a[i] - a[i - 1] for a in reached]),
            "avg_time_from_start": 0 if i == 0 else _avg_seconds([a[i] - a[0] for a in reached]),
            "step_conv_ratio": 1.0 if i == 0 else (counts[i] / counts[i - 1] if counts[i - 1] else 0.0),
            "overall_conv_ratio": 1.0 if i == 0 else (counts[i] / counts[0] if counts[0] else 0.0),
            "goal": goal,
            "event": goal,
            "step_label": custom["name"] if custom else step["event"],
        }
        if custom:
            row["custom_event"] = True
            row["custom_event_id"] = custom["id"]
        rows.append(row)
    return rows


def _analysis(rows: list[dict]) -> dict:
    later = range(1, len(rows))
    worst = min(later, key=lambda i: (rows[i]["step_conv_ratio"], i)) if len(rows) > 1 else 0
    return {"completion": rows[-1]["count"], "starting_amount": rows[0]["count"], "steps": len(rows), "worst": worst}


def funnels(events: list[dict], tz, params: dict, funnel: dict, now: datetime | None = None) -> dict:
    tz = zone(tz)
    steps = funnel["steps"]
    window_ms = (
        int(params.get("length") or funnel["length"]) * UNIT_MS[params.get("length_unit") or funnel["length_unit"]]
    )
    if params.get("unit"):
        tl = dates_timeline(tz, {**params, "interval": None}, "day", now)
    else:
        tl = dates_timeline(
            tz,
            {**params, "unit": "day", "interval": params.get("interval") or "1"},
            "day",
            now,
            allow_interval_days=True,
        )
    where, on = params.get("where"), params.get("on")

    by_user: dict[str, list[Event]] = defaultdict(list)
    for e in prepare(events):
        if e.distinct_id and where_matches(where, e):
            by_user[e.distinct_id].append(e)

    # bucket -> list of (attempt times, segment keys of the entry event)
    per_bucket: dict[str, list[tuple[list[int], list[str]]]] = {k: [] for k in tl.series}
    for uid in sorted(by_user):
        evs = by_user[uid]
        seen: set[str] = set()
        for i, e in enumerate(evs):
            key = tl.key(e.time_ms)
            if key is None or key in seen or not _matches(steps[0], e):
                continue
            seen.add(key)
            segs = on_keys(on, e) if on else []
            per_bucket[key].append((run_attempt(steps, evs, i, window_ms), segs))

    data: dict[str, dict] = {}
    if not on:
        for key in tl.series:
            rows = step_rows(steps, [a for a, _ in per_bucket[key]])
            data[key] = {"steps": rows, "analysis": _analysis(rows)}
        return {"meta": {"dates": list(tl.series)}, "data": data}

    entries: dict[str, int] = defaultdict(int)
    for items in per_bucket.values():
        for _, segs in items:
            for s in segs:
                entries[s] += 1
    keep = top_keys(dict(entries), int(params.get("limit") or 255))
    for key in tl.series:
        out = {"$overall": step_rows(steps, [a for a, _ in per_bucket[key]])}
        for seg in keep:
            out[seg] = step_rows(steps, [a for a, segs in per_bucket[key] if seg in segs])
        data[key] = out
    return {"meta": {"dates": list(tl.series)}, "data": data}
