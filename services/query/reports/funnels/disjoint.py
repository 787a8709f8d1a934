"""The funnel query when no event name belongs to two steps (see `query.py` for the rules).

Then an event can serve one step only, so "not yet used" never excludes anything and the
event found for step k depends only on the time of step k-1: it is the user's first
step-k event at or after t(k-1) - 2 s (the lower bound of that time in the user's sorted
step-k times), accepted when it is at most t(0) + window. Ties in time do not matter:
only times are reported.

Per user (one GROUP BY over the step events of the scanned range):

* `s1`…`s{n-1}`: the sorted times of each later step; `e0`: the step-0 times inside the
  range, sorted;
* the entries: the first step-0 event of each bucket (with `on`: found before the GROUP BY,
  by time, event, insert_id and latest copy first, with a hash of its segment keys, from a
  scan of their own so that `on` is computed for those rows only);
* for each step k, the attempts still going (`xp{k-1}`: their step k-1 times, which are
  non-decreasing along the attempts) are merged with `s{k}` in one `arraySort` of numbers
  encoded `2t` (a query) and `2t + 1` (a step-k time), so a query sorts before an equal
  time; `arrayReverseFill` then gives each query the next step-k time after it. The
  queries come out in attempt order, so no gather (and no lambda capturing a user's
  arrays, which ClickHouse would copy once per element) is needed.
"""

from __future__ import annotations

from footfall.services.query.reports._common import bucket_date_of_ms, event_filter
from footfall.services.query.reports.funnels._common import (
    GRACE_MS,
    Query,
    aggregate,
    alias,
    events_scan,
    funnel_scan,
    step_condition,
)
from footfall.services.query.reports.funnels.request import FunnelsRequest
from footfall.shared.sql import Params, Sql, join, number, sql

__all__ = ["build_disjoint"]


def _per_user(req: FunnelsRequest, p: Params) -> Sql:
    """Per user: `e0` (the range's step-0 times, sorted) and `s1`… (each later step's sorted times)."""
    sc = funnel_scan(req, p)
    n = len(req.funnel.steps)
    conditions = [
        sql("({} AND ms >= {} AND ms < {}) AS c0", step_condition(req, 0, p), sc.start_ms, sc.end_ms),
        *(sql("{} AS {}", step_condition(req, k, p), alias("c", k)) for k in range(1, n)),
    ]
    arrays = [
        sql("arraySort(groupArrayIf(ms, c0)) AS e0"),
        *(sql("arraySort(groupArrayIf(ms, {})) AS {}", alias("c", k), alias("s", k)) for k in range(1, n)),
    ]
    return sql(
        "SELECT distinct_id, {} FROM (SELECT distinct_id, toUnixTimestamp64Milli(time) AS ms, {} FROM {}) "
        "GROUP BY distinct_id HAVING notEmpty(e0)",
        join(", ", arrays),
        join(", ", conditions),
        events_scan(sc.scanned, sc.final, sc.names, sc.where, p),
    )


def _per_user_segmented(req: FunnelsRequest, p: Params) -> tuple[Sql, Sql]:
    """With `on`: the per-user arrays, and the segment keys of each key hash (`h`, `keys`).

    Two scans, UNION ALL: the step-0 events of the range, where the segment keys are
    computed (so `on` is evaluated on those rows only), and the later steps' events of the
    widened range. The names of the steps are disjoint, so the two never share a row.

    The step-0 events are reduced to the entries before the per-user GROUP BY: per user and
    bucket the first one by (time, name, insert_id, latest copy first), carrying a 128-bit
    hash of its segment keys. Everything per user is then numbers (`a_x`: the entries' times,
    `a_b`: their buckets, `a_g`: their key hashes): ClickHouse gathers numbers column-wise but
    strings and arrays value by value, and sorting parallel arrays with an insert_id string
    among the sort keys was most of this report's time on 100M events. The keys of each hash
    come from a second, small aggregation of the same step-0 rows (`keys_of`)."""
    sc = funnel_scan(req, p)
    if sc.on_keys is None:
        raise AssertionError("invariant: sc.on_keys is not None")
    n = len(req.funnel.steps)
    later_names = sorted({name for step in req.funnel.steps[1:] for name in step.names})
    later = [sql("arraySort(groupArrayIf(ms, step = {})) AS {}", number(k), alias("s", k)) for k in range(1, n)]
    keys = sql("arrayMap(x -> assumeNotNull(x), {})", sc.on_keys)
    key_hash = sql("reinterpretAsUInt128(sipHash128({}))", keys)
    step0_scan = events_scan(
        sc.entries,
        sc.final,
        event_filter(list(req.funnel.steps[0].names), p),
        sql("{} AND {}", step_condition(req, 0, p), sc.where),
        p,
    )
    # Names in code point order, which is the byte order of their UTF-8 that ClickHouse compares.
    ranked_names = p.add(sorted(req.funnel.steps[0].names), "Array(String)")
    # The entry's order as one string, compared bytewise like the tuple (time, name rank,
    # insert_id, -ingested_at, hash): big-endian fixed-width numbers, and the insert_id ended
    # by a zero byte (it has none: at most 36 of [A-Za-z0-9-]) so that a prefix sorts first.
    # argMin over a tuple holding a string compares generically, ~2x slower on 100M events.
    order = sql(
        "concat(reverse(reinterpretAsFixedString(toUInt64(t - {}))), "
        "reverse(reinterpretAsFixedString(toUInt32(indexOf({}, event)))), insert_id, '\\0', "
        "reverse(reinterpretAsFixedString(bitNot(toUInt64(toUnixTimestamp64Milli(ingested_at))))), "
        "reinterpretAsFixedString(h))",
        sc.start_ms,
        ranked_names,
    )
    entries = sql(
        "SELECT distinct_id, min(t) AS ms, b, argMin(h, {}) AS g, toUInt8(0) AS step FROM ("
        "SELECT distinct_id, event, insert_id, ingested_at, toUnixTimestamp64Milli(time) AS t, {} AS b, {} AS h FROM {}"
        ") GROUP BY distinct_id, b",
        order,
        bucket_date_of_ms(sql("t"), req.timeline, p),
        key_hash,
        step0_scan,
    )
    if n == 1:
        rows = entries
    else:
        step_of = sql(
            "multiIf({}, toUInt8(255))",
            join(", ", [sql("{}, toUInt8({})", step_condition(req, k, p), number(k)) for k in range(1, n)]),
        )
        rest = sql(
            "SELECT distinct_id, toUnixTimestamp64Milli(time) AS ms, toDate(0) AS b, toUInt128(0) AS g, {} AS step "
            "FROM {}",
            step_of,
            events_scan(sc.scanned, sc.final, event_filter(later_names, p), sc.where, p),
        )
        rows = sql("{} UNION ALL {}", entries, rest)
    step0 = sql("groupArrayIf(ms, step = 0) AS a_x, groupArrayIf(b, step = 0) AS a_b, groupArrayIf(g, step = 0) AS a_g")
    per_user = sql(
        "SELECT distinct_id, {} FROM ({}) GROUP BY distinct_id HAVING notEmpty(a_x)", join(", ", [step0, *later]), rows
    )
    keys_of = sql(
        "SELECT h, any(keys) AS keys FROM (SELECT {} AS h, {} AS keys FROM {}) GROUP BY h", key_hash, keys, step0_scan
    )
    return per_user, keys_of


def _step(k: int, window: Sql, grace: Sql, with_segments: bool) -> list[Sql]:
    """The columns of step k: the attempts that reach it and their times."""
    m, f, ok = alias("m", k), alias("f", k), alias("ok", k)
    prev = k - 1
    cols = [
        sql(
            "arraySort(arrayConcat(arrayMap(x -> (x - {}) * 2, {}), arrayMap(s -> s * 2 + 1, {}))) AS {}",
            grace,
            alias("xp", prev),
            alias("s", k),
            m,
        ),
        sql(
            "arrayMap(v -> if(bitAnd(v, 1) = 1, intDiv(v, 2), -1), "
            "arrayFilter((v, x) -> bitAnd(x, 1) = 0, arrayReverseFill(x -> bitAnd(x, 1) = 1, {}), {})) AS {}",
            m,
            m,
            f,
        ),
        sql("arrayMap((v, s) -> v >= 0 AND v <= s + {}, {}, {}) AS {}", window, f, alias("x", prev), ok),
        sql("arrayFilter((v, o) -> o, {}, {}) AS {}", alias("b", prev), ok, alias("b", k)),
        sql("arrayFilter((v, o) -> o, {}, {}) AS {}", alias("x", prev), ok, alias("x", k)),
        sql("arrayFilter((v, o) -> o, {}, {}) AS {}", alias("xp", prev), ok, alias("pp", k)),
        sql("arrayFilter((v, o) -> o, {}, {}) AS {}", f, ok, alias("xp", k)),
    ]
    if with_segments:
        cols.append(sql("arrayFilter((v, o) -> o, {}, {}) AS {}", alias("g", prev), ok, alias("g", k)))
    return cols


def _out(k: int, with_segments: bool) -> Sql:
    """Step k's tuples (bucket, step, ms since the previous step, ms since step 0[, segment keys])."""
    if k == 0:
        if with_segments:
            return sql("arrayMap((b, g) -> (b, toUInt32(0), toInt64(0), toInt64(0), g), b0, g0)")
        return sql("arrayMap(b -> (b, toUInt32(0), toInt64(0), toInt64(0)), b0)")
    args = [alias("b", k), alias("x", k), alias("pp", k), alias("xp", k)]
    if with_segments:
        return sql(
            "arrayMap((b, s, q, x, g) -> "
            "(b, toUInt32({}), toInt64(greatest(0, x - q)), toInt64(greatest(0, x - s)), g), {})",
            number(k),
            join(", ", [*args, alias("g", k)]),
        )
    return sql(
        "arrayMap((b, s, q, x) -> (b, toUInt32({}), toInt64(greatest(0, x - q)), toInt64(greatest(0, x - s))), {})",
        number(k),
        join(", ", args),
    )


def _entries(req: FunnelsRequest, p: Params) -> tuple[Sql, Sql | None]:
    """Per user, the entries (`x0`: times, ascending; `b0`: buckets; with `on`, `g0`: key
    hashes) and each later step's times, and with `on` the keys of each hash."""
    if req.on is not None:
        per_user, keys_of = _per_user_segmented(req, p)
        cols = sql(
            "arraySort(a_x) AS x0, arraySort((v, x) -> x, a_b, a_x) AS b0, "
            "arraySort((v, x) -> x, a_g, a_x) AS g0, x0 AS xp0"
        )
        return sql("SELECT *, {} FROM ({})", cols, per_user), keys_of
    # The entries: the first step-0 time of each bucket.
    entry_cols = [
        sql("arrayMap(t -> {}, e0) AS k0", bucket_date_of_ms(sql("t"), req.timeline, p)),
        sql("arrayPopBack(arrayPushFront(k0, toDate('1970-01-01'))) AS kp"),
        sql("arrayFilter((t, k, q) -> k != q, e0, k0, kp) AS x0"),
        sql("arrayFilter((k, q) -> k != q, k0, kp) AS b0"),
        sql("x0 AS xp0"),
    ]
    return sql("SELECT *, {} FROM ({})", join(", ", entry_cols), _per_user(req, p)), None


def build_disjoint(req: FunnelsRequest) -> Query:
    p = Params()
    n = len(req.funnel.steps)
    segments = req.on is not None
    query, keys_of = _entries(req, p)
    window, grace = p.add(req.window_ms, "Int64"), p.add(GRACE_MS, "Int64")
    # One SELECT per step: the analyzer expands aliases, so chaining every step's aliases in
    # one SELECT would grow the query tree exponentially with the number of steps.
    for k in range(1, n):
        query = sql("SELECT *, {} FROM ({})", join(", ", _step(k, window, grace, segments)), query)
    out = sql("arrayConcat({}) AS out", join(", ", [_out(k, segments) for k in range(n)]))
    return aggregate(req, sql("SELECT {} FROM ({})", out, query), p, keys_of)
