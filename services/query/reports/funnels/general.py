"""The funnel query for any funnel, including steps that share events (see `query.py`).

Per user: the deduplicated step events (FINAL: an event and its not-yet-merged copy must
not serve two steps) sorted by (time, event, insert_id) as parallel arrays `ts` (ms) and
`m` (bit k set when the event matches step k); the entries (first step-0 event of each
bucket); and for each entry an `arrayFold` over steps 1..n-1 that appends the index of
the first event that matches the step, is not used yet, and lies in
[t(k-1) - 2 s, t(0) + window]. The fold's lambdas capture the user's arrays, which
ClickHouse copies per entry, so this is the slower variant; `disjoint.py` serves funnels
whose steps share no event.
"""

from __future__ import annotations

from footfall.services.query.reports._common import bucket_date_of_ms
from footfall.services.query.reports.funnels._common import (
    GRACE_MS,
    USER,
    Query,
    aggregate,
    events_scan,
    funnel_scan,
    step_condition,
)
from footfall.services.query.reports.funnels.request import FunnelsRequest
from footfall.shared.sql import Params, Sql, join, number, sql

__all__ = ["build_general"]


def _chain(req: FunnelsRequest, p: Params) -> Sql:
    """For an entry index `i0` of the arrays `ts`/`m`: the indexes of the steps reached."""
    n = len(req.funnel.steps)
    if n == 1:
        return sql("[toUInt32(i0)]")
    return sql(
        "arrayFold((acc, k) -> if(length(acc) < k, acc, "
        "if((arrayFirstIndex((t, mm, j) -> bitTest(mm, k) AND t >= ts[acc[-1]] - {} AND t <= ts[i0] + {} "
        "AND NOT has(acc, j), ts, m, arrayEnumerate(ts)) AS nx) = 0, acc, arrayPushBack(acc, toUInt32(nx)))), "
        "range(1, {}), [toUInt32(i0)])",
        p.add(GRACE_MS, "Int64"),
        p.add(req.window_ms, "Int64"),
        number(n),
    )


def build_general(req: FunnelsRequest) -> Query:
    p = Params()
    sc = funnel_scan(req, p)
    n = len(req.funnel.steps)
    mask = join(" + ", [sql("bitShiftLeft(toUInt64({}), {})", step_condition(req, k, p), number(k)) for k in range(n)])
    if sc.on_keys is not None:
        seg_row = sql(", if(bitTest(mask, 0), {}, []) AS seg", sc.on_keys)
        seg_item, seg_array = sql(", seg"), sql(", arrayMap(x -> x.5, ev) AS sg")
        seg_entry = sql(", arrayMap(i0 -> sg[i0], entries) AS segs")
        out = sql(
            "arrayFlatten(arrayMap((b, c, g) -> arrayMap((t, q, j) -> (b, toUInt32(j - 1), "
            "toInt64(greatest(0, t - q)), toInt64(greatest(0, t - c[1])), g), c, "
            "arrayPushFront(arrayPopBack(c), c[1]), arrayEnumerate(c)), bs, chains, segs)) AS out"
        )
    else:
        seg_row = seg_item = seg_array = seg_entry = sql("")
        out = sql(
            "arrayFlatten(arrayMap((b, c) -> arrayMap((t, q, j) -> (b, toUInt32(j - 1), "
            "toInt64(greatest(0, t - q)), toInt64(greatest(0, t - c[1]))), c, "
            "arrayPushFront(arrayPopBack(c), c[1]), arrayEnumerate(c)), bs, chains)) AS out"
        )
    events = sql(
        "SELECT u, arraySort(groupArray((toUnixTimestamp64Milli(time), event, insert_id, mask{}))) AS ev "
        "FROM (SELECT time, event, insert_id, {} AS u, {} AS mask{} FROM {}) "
        "WHERE mask != 0 GROUP BY u",
        seg_item,
        USER,
        mask,
        seg_row,
        events_scan(sc.scanned, True, sc.names, sc.where, p),
    )
    per_user = sql(
        "SELECT arrayMap(x -> x.1, ev) AS ts, arrayMap(x -> x.4, ev) AS m{}, "
        "arrayMap((t, mm) -> bitTest(mm, 0) AND t >= {} AND t < {}, ts, m) AS is0, "
        "arrayFilter((j, e) -> e, arrayEnumerate(ts), is0) AS e0, "
        "arrayMap(t -> {}, arrayFilter((t, e) -> e, ts, is0)) AS k0, "
        "arrayPopBack(arrayPushFront(k0, toDate('1970-01-01'))) AS kp, "
        "arrayFilter((j, k, q) -> k != q, e0, k0, kp) AS entries, "
        "arrayFilter((k, q) -> k != q, k0, kp) AS bs, "
        "arrayMap(i0 -> arrayMap(i -> ts[i], {}), entries) AS chains{}, {} "
        "FROM ({}) WHERE notEmpty(entries)",
        seg_array,
        sc.start_ms,
        sc.end_ms,
        bucket_date_of_ms(sql("t"), req.timeline, p),
        _chain(req, p),
        seg_entry,
        out,
        events,
    )
    return aggregate(req, per_user, p)
