"""The funnel query when no event name belongs to two steps (see `query.py` for the rules).

Then an event can serve one step only, so "not yet used" never excludes anything and the
event found for step k depends only on the time of step k-1: it is the user's first
step-k event at or after t(k-1) - 2 s (the lower bound of that time in the user's sorted
step-k times), accepted when it is at most t(0) + window. Ties in time do not matter:
only times are reported.

Per user (one GROUP BY over the step events of the scanned range; with `on`, one over the
step-0 events and one over the later steps' events, joined):

* `s1`…`s{n-1}`: the sorted times of each later step; `e0`: the step-0 times inside the
  range, sorted (with `on`, each step-0 event also with its name, insert_id and segment
  keys, from a scan of their own so that `on` is computed for those rows only);
* the entries: the first step-0 event of each bucket (with `on`: by time, name, insert_id
  and latest copy first);
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
    USER,
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


def _later_steps(req: FunnelsRequest, p: Params) -> tuple[list[Sql], list[Sql]]:
    """Each later step k: the row's condition `c{k}`, and the user's sorted times `s{k}`."""
    later = range(1, len(req.funnel.steps))
    conditions = [sql("{} AS {}", step_condition(req, k, p), alias("c", k)) for k in later]
    arrays = [sql("arraySort(groupArrayIf(ms, {})) AS {}", alias("c", k), alias("s", k)) for k in later]
    return conditions, arrays


def _per_user(req: FunnelsRequest, p: Params) -> Sql:
    """Per user: `e0` (the range's step-0 times, sorted) and `s1`… (each later step's sorted times)."""
    sc = funnel_scan(req, p)
    later_conditions, later_arrays = _later_steps(req, p)
    conditions = [
        sql("({} AND ms >= {} AND ms < {}) AS c0", step_condition(req, 0, p), sc.start_ms, sc.end_ms),
        *later_conditions,
    ]
    arrays = [sql("arraySort(groupArrayIf(ms, c0)) AS e0"), *later_arrays]
    return sql(
        "SELECT u, {} FROM (SELECT {} AS u, toUnixTimestamp64Milli(time) AS ms, {} FROM {}) "
        "GROUP BY u HAVING notEmpty(e0)",
        join(", ", arrays),
        USER,
        join(", ", conditions),
        events_scan(sc.scanned, sc.final, sc.names, sc.where, p),
    )


def _per_user_segmented(req: FunnelsRequest, p: Params) -> Sql:
    """With `on`: the per-user arrays.

    Two scans, each grouped per user, then joined: the step-0 events of the range, where the
    segment keys are computed (so `on` is evaluated on those rows only), and the later steps'
    events of the widened range. The names of the steps are disjoint, so the two never share
    a row. Per step-0 event: its time (`a_ms`), the rank of its name among the step's names
    sorted in code point order (`a_name`; the byte order of their UTF-8, which ClickHouse
    compares), its insert_id ended by a zero byte (it has none: at most 36 of [A-Za-z0-9-])
    and followed by the complement of its ingestion time as a big-endian number (`a_ih`:
    compared bytewise, a prefix sorts first and the latest copy of a duplicate first), and its
    segment keys (`a_g`).

    Measured on 100M events (5-step funnel, `on`, same store and hour): one GROUP BY over both
    scans (UNION ALL) made every later-step row pass the step-0 string aggregates: 6.2 s;
    grouped apart and joined, the join's hash table built from the step-0 side: 3.0 s. (The
    keys carried as a 128-bit hash and joined to their keys after counting gained nothing at
    100M with the keys in a column, and lost a third at 10M where `on` parses the JSON text:
    the keys are computed twice.)"""
    sc = funnel_scan(req, p)
    if sc.on_keys is None:
        raise AssertionError("invariant: sc.on_keys is not None")
    later_names = sorted({name for step in req.funnel.steps[1:] for name in step.names})
    keys = sql("arrayMap(x -> assumeNotNull(x), {})", sc.on_keys)
    step0_scan = events_scan(
        sc.entries,
        sc.final,
        event_filter(list(req.funnel.steps[0].names), p),
        sql("{} AND {}", step_condition(req, 0, p), sc.where),
        p,
    )
    ranked_names = p.add(sorted(req.funnel.steps[0].names), "Array(String)")
    entries = sql(
        "SELECT {} AS u, groupArray(toUnixTimestamp64Milli(time)) AS a_ms, "
        "groupArray(toUInt32(indexOf({}, event))) AS a_name, "
        "groupArray(concat(insert_id, '\\0', "
        "reverse(reinterpretAsFixedString(bitNot(toUInt64(toUnixTimestamp64Milli(ingested_at))))))) AS a_ih, "
        "groupArray({}) AS a_g, arraySort(a_ms) AS e0 FROM {} GROUP BY u",
        USER,
        ranked_names,
        keys,
        step0_scan,
    )
    if not later_names:
        return entries
    conditions, arrays = _later_steps(req, p)
    rest = sql(
        "SELECT u, {} FROM (SELECT {} AS u, toUnixTimestamp64Milli(time) AS ms, {} FROM {}) GROUP BY u",
        join(", ", arrays),
        USER,
        join(", ", conditions),
        events_scan(sc.scanned, sc.final, event_filter(later_names, p), sc.where, p),
    )
    # Every user with a step-0 event; one without later events gets empty `s1`… (the join's
    # default for an unmatched row).
    return sql("SELECT * FROM ({}) AS r RIGHT JOIN ({}) AS f USING u", rest, entries)


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


def _entries(req: FunnelsRequest, p: Params) -> Sql:
    """Per user, the entries (the first step-0 event of each bucket: `x0`, their times,
    ascending; `b0`, their buckets; with `on`, `g0`, their segment keys) and each later
    step's times."""
    if req.on is None:
        per_user = _per_user(req, p)
        times = sql("e0 AS t0")
    else:
        per_user = _per_user_segmented(req, p)
        # Ties in time by name, insert_id, the latest copy first (then the keys: a total order).
        times = sql("e0 AS t0, arraySort((g, m, n, i) -> (m, n, i, g), a_g, a_ms, a_name, a_ih) AS ga")
    entry_cols = [
        times,
        sql("arrayMap(t -> {}, t0) AS k0", bucket_date_of_ms(sql("t"), req.timeline, p)),
        sql("arrayPopBack(arrayPushFront(k0, toDate('1970-01-01'))) AS kp"),
        sql("arrayFilter((t, k, q) -> k != q, t0, k0, kp) AS x0"),
        sql("arrayFilter((k, q) -> k != q, k0, kp) AS b0"),
        sql("x0 AS xp0"),
    ]
    if req.on is not None:
        entry_cols.append(sql("arrayFilter((g, k, q) -> k != q, ga, k0, kp) AS g0"))
    return sql("SELECT *, {} FROM ({})", join(", ", entry_cols), per_user)


def build_disjoint(req: FunnelsRequest) -> Query:
    p = Params()
    n = len(req.funnel.steps)
    segments = req.on is not None
    query = _entries(req, p)
    window, grace = p.add(req.window_ms, "Int64"), p.add(GRACE_MS, "Int64")
    # One SELECT per step: the analyzer expands aliases, so chaining every step's aliases in
    # one SELECT would grow the query tree exponentially with the number of steps.
    for k in range(1, n):
        query = sql("SELECT *, {} FROM ({})", join(", ", _step(k, window, grace, segments)), query)
    out = sql("arrayConcat({}) AS out", join(", ", [_out(k, segments) for k in range(n)]))
    return aggregate(req, sql("SELECT {} FROM ({})", out, query), p)
