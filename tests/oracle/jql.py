"""Plain-Python reference for JQL (semantics.md §5): sources, transformations, reducers.

Written from the semantics, sharing no code with footfall.*. Tests express each JQL script
a second time as a pipeline of these functions and compare the service's JSON answer.

Interpretations (decisions.md-style; the service follows them):
- Events: the deduplicated events (last copy wins) of the local days from_date..to_date;
  `event_selectors` OR-ed, each = event name AND selector expression (either optional).
  Item `{name, distinct_id, time, sampling_factor: 1, properties}`; `time` = epoch ms plus
  the project zone's UTC offset at that instant (local wall time read as UTC).
- People: live user profiles, `user_selectors` OR-ed. Item `{distinct_id, time, last_seen,
  properties}`, both times = the last update, shifted like event times.
- join: items `{distinct_id, event?, user?}` in (distinct_id, event time) order; full/left
  keep events without a profile, full/right profiles without events.
- groupBy / groupByUser output groups sorted by key: element-wise, null < boolean < number
  < string < list; missing key values are null; `multiple_keys` explodes a list value into
  one group per element; `slice` as a key spreads its elements into the key.
- Reducers: numbers are JS numbers or numeric strings ("42"), booleans 1/0; sum/min/max/avg
  ignore other values; avg/min/max of nothing is null; numeric_summary's stddev is the
  population one; numeric_percentiles interpolates linearly between closest ranks.
- numeric_bucket: boundaries → the largest boundary ≤ v (below the first: null);
  {bucket_size, offset} → offset + floor((v − offset)/size)·size; time buckets on the
  shifted time (UTC calendar of the local wall time; weeks start on Monday).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.oracle._common import Event, day_start_ms, prepare
from tests.oracle.expr import join_where_matches, profile_where_matches, where_matches

Item = Any
Accessor = Callable[[Item], Any]
_NUMERIC = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")


# -- sources ---------------------------------------------------------------------------------------
def shifted_ms(ms: int, tz: str) -> int:
    offset = datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(tz)).utcoffset() or timedelta(0)
    return ms + int(offset.total_seconds()) * 1000


def _event_item(e: Event, tz: str) -> dict[str, Any]:
    return {
        "name": e.name,
        "distinct_id": e.distinct_id,
        "time": shifted_ms(e.time_ms, tz),
        "sampling_factor": 1,
        "properties": e.properties,
    }


def _selected(e: Event, selectors: list[dict[str, str]] | None) -> bool:
    if not selectors:
        return True
    return any(("event" not in s or s["event"] == e.name) and where_matches(s.get("selector"), e) for s in selectors)


def events(
    raw: Iterable[dict], tz: str, from_date: str, to_date: str, selectors: list[dict[str, str]] | None = None
) -> list[dict[str, Any]]:
    zone = ZoneInfo(tz)
    start = day_start_ms(date.fromisoformat(from_date), zone)
    end = day_start_ms(date.fromisoformat(to_date) + timedelta(days=1), zone)
    return [_event_item(e, tz) for e in prepare(raw) if start <= e.time_ms < end and _selected(e, selectors)]


def people(
    profiles: dict[str, tuple[dict, int]], tz: str, selectors: list[dict[str, str]] | None = None
) -> list[dict[str, Any]]:
    """`profiles`: live user profiles, id -> (properties, last update epoch ms)."""
    out = []
    for pid in sorted(profiles):
        props, ms = profiles[pid]
        if selectors and not any(profile_where_matches(s.get("selector"), props) for s in selectors):
            continue
        t = shifted_ms(ms, tz)
        out.append({"distinct_id": pid, "time": t, "last_seen": t, "properties": props})
    return out


def join_events(
    raw: Iterable[dict],
    tz: str,
    from_date: str,
    to_date: str,
    selectors: list[dict[str, str]],
    profiles: dict[str, tuple[dict, int]],
) -> list[dict[str, Any]]:
    """The events a `join(...)` sees under its `selectors` (OR-ed; each = event name AND an
    expression that may read `user["x"]`, the event's live profile property)."""
    zone = ZoneInfo(tz)
    start = day_start_ms(date.fromisoformat(from_date), zone)
    end = day_start_ms(date.fromisoformat(to_date) + timedelta(days=1), zone)
    out = []
    for e in prepare(raw):
        if not start <= e.time_ms < end:
            continue
        user = profiles.get(e.distinct_id)
        props = user[0] if user is not None else None
        if any(
            ("event" not in s or s["event"] == e.name) and join_where_matches(s.get("selector"), e, props)
            for s in selectors
        ):
            out.append(_event_item(e, tz))
    return out


def join(evs: list[dict], users: list[dict], kind: str = "full") -> list[dict[str, Any]]:
    by_id: dict[str, list[dict]] = {}
    for e in evs:
        by_id.setdefault(e["distinct_id"], []).append(e)
    user_of = {u["distinct_id"]: u for u in users}
    out = []
    for did in sorted(set(by_id) | set(user_of)):
        user = user_of.get(did)
        mine = sorted(by_id.get(did, []), key=lambda e: e["time"])
        if mine and (user is not None or kind in ("full", "left")):
            for e in mine:
                out.append({"distinct_id": did, "event": e, **({"user": user} if user is not None else {})})
        elif not mine and user is not None and kind in ("full", "right"):
            out.append({"distinct_id": did, "user": user})
    return out


# -- values and keys -------------------------------------------------------------------------------
def to_number(v: Any) -> float | int | None:
    if isinstance(v, bool):
        return 1 if v else 0
    if isinstance(v, int | float):
        return v if math.isfinite(v) else None
    if isinstance(v, str) and _NUMERIC.match(v):
        x = float(v)
        return int(x) if x.is_integer() and "." not in v and "e" not in v.lower() else x
    return None


def path(p: str) -> Accessor:
    parts = p.split(".")

    def get(item: Any) -> Any:
        for part in parts:
            if not isinstance(item, dict):
                return None
            item = item.get(part)
        return item

    return get


def _rank(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return 1
    if isinstance(v, int | float):
        return 2
    if isinstance(v, str):
        return 3
    return 4 if isinstance(v, list) else 5


def compare(a: Any, b: Any) -> int:
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return ra - rb
    if ra == 0:
        return 0
    if ra == 4:
        for x, y in zip(a, b, strict=False):
            c = compare(x, y)
            if c:
                return c
        return len(a) - len(b)
    if ra == 5:
        return 0
    return -1 if a < b else 1 if a > b else 0


key_order = functools.cmp_to_key(compare)


class Multiple:
    def __init__(self, accessor: Accessor) -> None:
        self.accessor = accessor


class Spread:
    def __init__(self, accessor: Accessor) -> None:
        self.accessor = accessor


def slice_key(accessor: Accessor, start: int, limit: int | None = None) -> Spread:
    def get(item: Any) -> Any:
        v = accessor(item)
        return v[start:] if limit is None else v[start : start + limit]

    return Spread(get)


def _keys(item: Any, keys: list[Any], prefix: list[Any]) -> list[list[Any]]:
    out = [list(prefix)]
    for k in keys:
        if isinstance(k, Spread):
            v = k.accessor(item)
            out = [o + list(v) for o in out]
            continue
        fn = k.accessor if isinstance(k, Multiple) else k
        v = fn(item)
        values = v if isinstance(k, Multiple) and isinstance(v, list) else [v]
        out = [[*o, x] for o in out for x in values]
    return out


# -- reducers: functions of the whole list of items ------------------------------------------------
def count() -> Callable[[list], Any]:
    return len


def _numbers(acc: Accessor, items: list) -> list[float]:
    return [x for x in (to_number(acc(i)) for i in items) if x is not None]


def sum_(acc: Accessor) -> Callable[[list], Any]:
    return lambda items: sum(_numbers(acc, items))


def avg(acc: Accessor) -> Callable[[list], Any]:
    def f(items: list) -> Any:
        xs = _numbers(acc, items)
        return sum(xs) / len(xs) if xs else None

    return f


def min_(acc: Accessor) -> Callable[[list], Any]:
    return lambda items: min(_numbers(acc, items), default=None)


def max_(acc: Accessor) -> Callable[[list], Any]:
    return lambda items: max(_numbers(acc, items), default=None)


def numeric_summary(acc: Accessor) -> Callable[[list], Any]:
    def f(items: list) -> Any:
        xs = _numbers(acc, items)
        n, s, sq = len(xs), sum(xs), sum(x * x for x in xs)
        mean = s / n if n else 0
        return {
            "count": n,
            "sum": s,
            "sum_squares": sq,
            "avg": mean,
            "stddev": math.sqrt(max(0, sq / n - mean * mean)) if n else 0,
        }

    return f


def numeric_percentiles(acc: Accessor, ps: list[float]) -> Callable[[list], Any]:
    def f(items: list) -> Any:
        xs = sorted(_numbers(acc, items))
        out = []
        for p in ps:
            if not xs:
                out.append({"percentile": p, "value": None})
                continue
            pos = p / 100 * (len(xs) - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            out.append({"percentile": p, "value": xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)})
        return out

    return f


def numeric_bucket(acc: Accessor, spec: Any) -> Accessor:
    def get(item: Any) -> Any:
        v = to_number(acc(item))
        if v is None:
            return None
        if isinstance(spec, str):  # a time bucket unit on the shifted time
            d = datetime.fromtimestamp(v / 1000, UTC)
            if spec == "day":
                d = d.replace(hour=0, minute=0, second=0, microsecond=0)
            elif spec == "week":
                d = (d - timedelta(days=d.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
            elif spec == "month":
                d = datetime(d.year, d.month, 1, tzinfo=UTC)
            return int(d.timestamp() * 1000)
        if isinstance(spec, list):
            below = [b for b in sorted(spec) if b <= v]
            return below[-1] if below else None
        size, offset = spec["bucket_size"], spec.get("offset", 0)
        return offset + math.floor((v - offset) / size) * size

    return get


# -- transformations -------------------------------------------------------------------------------
def group_by(items: list, keys: list[Any], reducer: Callable[[list], Any] | list[Callable[[list], Any]]) -> list[dict]:
    groups: dict[str, tuple[list, list]] = {}
    for item in items:
        for k in _keys(item, keys, []):
            groups.setdefault(repr(k), (k, []))[1].append(item)
    out = [
        {"key": k, "value": [r(its) for r in reducer] if isinstance(reducer, list) else reducer(its)}
        for k, its in groups.values()
    ]
    return sorted(out, key=lambda g: key_order(g["key"]))


def group_by_user(items: list, keys: list[Any], fn: Callable[[list], Any]) -> list[dict]:
    """`fn` gets all of one user's (and key's) items in time order."""
    ordered = sorted(items, key=lambda i: (i["distinct_id"], i["time"]))
    groups: dict[str, tuple[list, list]] = {}
    for item in ordered:
        for k in _keys(item, keys, [item["distinct_id"]]):
            groups.setdefault(repr(k), (k, []))[1].append(item)
    out = [{"key": k, "value": fn(its)} for k, its in groups.values()]
    return sorted(out, key=lambda g: key_order(g["key"]))


def reduce(items: list, reducer: Callable[[list], Any]) -> list:
    return [reducer(items)]


def sort(items: list, acc: Accessor, descending: bool = False) -> list:
    sign = -1 if descending else 1
    return sorted(items, key=functools.cmp_to_key(lambda a, b: sign * compare(acc(a), acc(b))))


def apply_group_limits(groups: list[dict], limits: list[int]) -> list[dict]:
    def total(gs: list[dict]) -> float:
        return sum(to_number(g["value"]) or 0 for g in gs)

    def limit(gs: list[dict], level: int) -> list[dict]:
        if level >= len(limits):
            return gs
        parts: dict[str, tuple[Any, list]] = {}
        for g in gs:
            parts.setdefault(repr(g["key"][level]), (g["key"][level], []))[1].append(g)
        ranked = sorted(
            parts.values(),
            key=functools.cmp_to_key(
                lambda a, b: (total(b[1]) > total(a[1])) - (total(b[1]) < total(a[1])) or compare(a[0], b[0])
            ),
        )
        out: list[dict] = []
        for _, members in ranked[: limits[level]]:
            out += limit(members, level + 1)
        return out

    return sorted(limit(groups, 0), key=lambda g: key_order(g["key"]))
