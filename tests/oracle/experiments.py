"""Independent reference for experiment exposures and results (semantics-2.md §16.6).

Plain Python over the stored (deduplicated) events, written from the semantics and the decisions
documented in services/app/experiments/results.py; shares no code with `footfall.*`.

`reference(events, spec, start_s, end_s)`: `events` are `_common.Event`s, `spec` a dict with
`exposure_event`, `name_property`, `variant_property`, `experiment_name`, `variants` (keys),
`control`, `metrics` ([{id, type, event, selector}]) and `confidence`; `start_s` / `end_s` the
first and last second of the range (epoch seconds, UTC). Returns `(exposures, metrics)`:
`{"total", "variants": {key: n}}` and `[{"id", "variants": {key: {exposures, value, lift,
p_value, significant}}}]`.
"""

from __future__ import annotations

import math
import statistics

from tests.oracle._common import Event
from tests.oracle.expr import where_matches

NINETY_DAYS_MS = 90 * 86_400_000


def _in_range(time_ms: int, start_s: int, end_s: int) -> bool:
    second = time_ms // 1000  # an instant belongs to the range when its second does
    return start_s <= second <= end_s


def _normal_two_sided(z: float) -> float:
    # 2 * (1 - Phi(|z|)), through the error function's series-free identity
    return 2.0 * (1.0 - 0.5 * (1.0 + math.erf(abs(z) / math.sqrt(2.0))))


def reference(events: list[Event], spec: dict, start_s: int, end_s: int) -> tuple[dict, list[dict]]:
    variants = list(spec["variants"])
    # first exposure per user: (time, variant) smallest; last exposure time
    first: dict[str, tuple[int, str]] = {}
    last: dict[str, int] = {}
    for e in events:
        if e.name != spec["exposure_event"] or not e.distinct_id or not _in_range(e.time_ms, start_s, end_s):
            continue
        name = e.properties.get(spec["name_property"])
        variant = e.properties.get(spec["variant_property"])
        if not isinstance(name, str) or name != spec["experiment_name"]:
            continue
        if not isinstance(variant, str) or variant not in variants:
            continue
        mark = (e.time_ms, variant)
        if e.distinct_id not in first or mark < first[e.distinct_id]:
            first[e.distinct_id] = mark
        last[e.distinct_id] = max(last.get(e.distinct_id, e.time_ms), e.time_ms)
    users_of: dict[str, list[str]] = {v: [] for v in variants}
    for user, (_, variant) in first.items():
        users_of[variant].append(user)
    exposures = {"total": len(first), "variants": {v: len(users_of[v]) for v in variants}}

    by_user: dict[str, list[Event]] = {}
    for e in events:
        if e.distinct_id in first and _in_range(e.time_ms, start_s, end_s):
            by_user.setdefault(e.distinct_id, []).append(e)

    out = []
    threshold = (1 - spec["confidence"]) / 2
    for metric in spec["metrics"]:
        stats: dict[str, tuple[int, float | None, float | None]] = {}
        for v in variants:
            counts = []
            for user in users_of[v]:
                lo, hi = first[user][0], last[user] + NINETY_DAYS_MS
                n = sum(
                    1
                    for e in by_user.get(user, [])
                    if e.name == metric["event"]
                    and lo <= e.time_ms <= hi
                    and (not metric.get("selector") or where_matches(metric["selector"], e))
                )
                counts.append(n)
            size = len(counts)
            if size == 0:
                stats[v] = (0, None, None)
            elif metric["type"] == "conversion":
                p = sum(1 for c in counts if c > 0) / size
                stats[v] = (size, p, p * (1 - p))
            else:
                stats[v] = (size, statistics.fmean(counts), statistics.variance(counts) if size > 1 else 0.0)
        control = stats[spec["control"]]
        cells = {}
        for v in variants:
            n, value, var = stats[v]
            lift = p_value = None
            if v != spec["control"]:
                if value is not None and control[1]:
                    lift = (value - control[1]) / control[1]
                if value is not None and control[1] is not None:
                    se = math.sqrt(var / n + control[2] / control[0])
                    if se > 0:
                        p_value = _normal_two_sided((value - control[1]) / se)
            cells[v] = {
                "exposures": n,
                "value": value,
                "lift": lift,
                "p_value": p_value,
                "significant": p_value is not None and p_value <= threshold,
            }
        out.append({"id": metric["id"], "variants": cells})
    return exposures, out
