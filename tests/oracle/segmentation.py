"""Reference `/segmentation`, `/segmentation/numeric`, `/segmentation/sum`, `/segmentation/average`.

Every function takes `(events, tz, params, now=None)`: raw import events, the project's IANA zone, the query
parameters as strings, and the clock (unused here) and returns the JSON body.

Interpretations (beyond _common's):
- /segmentation: `interval` (N-day buckets anchored at from_date, keyed by their first day) applies only when
  `type` is not general, as the interface says; otherwise `unit` (default day) is used. Without `on` the only
  segment is the event name (present, zero-filled, even with no events). With `on`, events whose `on` value
  yields no key (undefined, null, object) are dropped; list values count the event once in every element's
  segment. All kept segments are zero-filled over `series`. `limit` default 60; `legend_size` = len(values).
  Values: general/unique are ints, average is a float.
- /segmentation/numeric: `on` values that are not numbers (after evaluation; no implicit cast) are skipped.
  Bucketing per semantics §2.5 with B = `buckets` (default 10): raw width (max-min)/B rounded UP to the
  nearest 1, 2, 2.5 or 5 x 10^k; lo = floor(min/w)*w; n = max(1, ceil((max-lo)/w)) buckets [lo+jw, lo+(j+1)w),
  the value at the top edge goes into the last bucket. All values equal v: one bucket labelled "v - v".
  Labels use "," thousands separators and as many decimals as the width needs (2.5 -> 1, 0.25 -> 2).
  Cells whose value is 0 are omitted, and so are labels with no cell; `series` still lists every bucket key.
  Arithmetic is exact (Fractions of the values' shortest decimal form).
- /segmentation/sum: sum of `on` per bucket, non-numbers count 0.0; every bucket present (0.0 when empty);
  floats (compare with a tolerance). `computed_at` is `now` (or "") and must be ignored by comparisons.
- /segmentation/average: mean of `on` per bucket where non-numbers are 0.0 and stay in the denominator;
  buckets without events are 0.0. No `computed_at` (the interface lists only results and status).
- sum/average `unit` is hour or day (default day); other units are accepted too.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from ._common import Event, dates_timeline, measure, prepare, rank_total, top_keys, zone
from .expr import as_number, on_keys, where_matches

__all__ = ["average", "bucket_labels", "nice_width", "numeric", "segmentation", "sum_"]


def _selected(events: list[dict], tz, params: dict, now, allow_interval_days: bool = False):
    """(timeline, [(bucket key, event)]) for events named `event` inside the range that pass `where`."""
    tl = dates_timeline(zone(tz), params, "day", now, allow_interval_days)
    name, where = params["event"], params.get("where")
    picked = []
    for e in prepare(events):
        key = tl.key(e.time_ms) if e.name == name else None
        if key is not None and where_matches(where, e):
            picked.append((key, e))
    return tl, picked


def segmentation(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    kind = params.get("type") or "general"
    tl, picked = _selected(events, tz, params, now, allow_interval_days=kind != "general")
    on = params.get("on")
    cells: dict[str, dict[str, list[Event]]] = defaultdict(lambda: defaultdict(list))
    for key, e in picked:
        for seg in on_keys(on, e) if on else [params["event"]]:
            cells[seg][key].append(e)
    if on:
        totals = {seg: rank_total(kind, [e for evs in by_key.values() for e in evs]) for seg, by_key in cells.items()}
        keep = top_keys(totals, int(params.get("limit") or 60))
    else:
        keep = [params["event"]]
    values = {seg: {k: measure(kind, cells[seg].get(k, [])) for k in tl.series} for seg in keep}
    return {"data": {"series": list(tl.series), "values": values}, "legend_size": len(values)}


# ------------------------------------------------------------------------------------------------ numeric
def _exact(x: float) -> Fraction:
    return Fraction(Decimal(repr(x)))


def nice_width(raw: Fraction) -> Fraction:
    """Smallest m * 10^k >= raw with m in (1, 2, 2.5, 5)."""
    assert raw > 0
    k = math.floor(math.log10(raw)) - 1
    while True:
        for m in (Fraction(1), Fraction(2), Fraction(5, 2), Fraction(5)):
            cand = m * Fraction(10) ** k
            if cand >= raw:
                return cand
        k += 1


def _decimals(w: Fraction) -> int:
    d = 0
    while (w * 10**d).denominator != 1:
        d += 1
    return d


def _fmt(x: Fraction, decimals: int) -> str:
    return f"{Decimal(x.numerator) / Decimal(x.denominator):,.{decimals}f}"


def bucket_labels(values: list[float], buckets: int = 10) -> tuple[list[str], Callable[[float], str]]:
    """The labels and a value -> label function for the given numbers (see the module docstring)."""
    lo_v, hi_v = _exact(min(values)), _exact(max(values))
    if lo_v == hi_v:
        d = _decimals(lo_v)
        label = f"{_fmt(lo_v, d)} - {_fmt(lo_v, d)}"
        return [label], lambda x: label
    w = nice_width((hi_v - lo_v) / buckets)
    lo = math.floor(lo_v / w) * w
    n = max(1, math.ceil((hi_v - lo) / w))
    d = _decimals(w)
    labels = [f"{_fmt(lo + j * w, d)} - {_fmt(lo + (j + 1) * w, d)}" for j in range(n)]
    return labels, lambda x: labels[min(math.floor((_exact(x) - lo) / w), n - 1)]


def numeric(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    kind = params.get("type") or "general"
    tl, picked = _selected(events, tz, params, now)
    numbers = [(key, e, as_number(params["on"], e)) for key, e in picked]
    numbers = [(key, e, x) for key, e, x in numbers if x is not None]
    values: dict[str, dict[str, int | float]] = {}
    if numbers:
        labels, label_of = bucket_labels([x for _, _, x in numbers], int(params.get("buckets") or 10))
        cells: dict[str, dict[str, list[Event]]] = {label: defaultdict(list) for label in labels}
        for key, e, x in numbers:
            cells[label_of(x)][key].append(e)
        for label in labels:
            row = {k: measure(kind, cells[label].get(k, [])) for k in tl.series}
            row = {k: v for k, v in row.items() if v != 0}
            if row:
                values[label] = row
    return {"data": {"series": list(tl.series), "values": values}, "legend_size": len(values)}


# ---------------------------------------------------------------------------------------------- sum / avg
def _per_bucket(events: list[dict], tz, params: dict, now) -> tuple[tuple[str, ...], dict[str, list[float]]]:
    tl, picked = _selected(events, tz, params, now)
    per: dict[str, list[float]] = {k: [] for k in tl.series}
    for key, e in picked:
        x = as_number(params["on"], e)
        per[key].append(0.0 if x is None else x)
    return tl.series, per


def sum_(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    series, per = _per_bucket(events, tz, params, now)
    return {
        "status": "ok",
        "computed_at": now.isoformat() if now else "",
        "results": {k: math.fsum(per[k]) for k in series},
    }


def average(events: list[dict], tz, params: dict, now: datetime | None = None) -> dict:
    series, per = _per_bucket(events, tz, params, now)
    return {"status": "ok", "results": {k: (math.fsum(per[k]) / len(per[k]) if per[k] else 0.0) for k in series}}
