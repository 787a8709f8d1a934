"""The funnel query when no event name belongs to two steps (see `query.py` for the rules).

Then an event can serve one step only, so "not yet used" never excludes anything and the
event found for step k depends only on the time of step k-1: it is the user's first
step-k event at or after t(k-1) - 2 s (the lower bound of that time in the user's sorted
step-k times), accepted when it is at most t(0) + window. Ties in time do not matter:
only times are reported.

Per user (one GROUP BY over the step events of the scanned range, by the user key; with
`on`, one over the step-0 events and one over the later steps' events, joined):

* `s1`…`s{n-1}`: the sorted times of each later step; `e0`: the step-0 times inside the
  range, sorted (with `on`, each step-0 event also with its name, insert_id and segment
  keys, from a scan of their own so that `on` is computed for those rows only);
* the entries: the first step-0 event of each bucket (with `on`: by time, name, insert_id
  and latest copy first).

Then one row per attempt (the entries, ARRAY JOINed with the user's `s1`…): step k is one
`arrayFirstIndex` in `s{k}` for an attempt that reached step k-1, and the attempts are
counted per bucket (and segment) with -If aggregates, one column per step, turned into one
row per step at the end. Measured on 100M events against the former per-user form (all
attempts of a user searched at once by sorting their times together with `s{k}`, and one
tuple per attempt and step ARRAY JOINed into the count), same hour: 3 steps 894 → 725 ms,
5 steps 1,473 → 1,154 ms, 5 steps with `on` 2,601 → 2,367 ms; the per-user form paid for
each step on every user, even those whose attempts had all stopped.
"""

from __future__ import annotations

from footfall.services.query.reports._common import bucket_date_of_ms, event_filter
from footfall.services.query.reports.funnels._common import (
    GRACE_MS,
    USER,
    Query,
    alias,
    events_scan,
    funnel_scan,
    ranked,
    step_condition,
)
from footfall.services.query.reports.funnels.request import FunnelsRequest
from footfall.shared.saved import MAX_STEPS
from footfall.shared.sql import Params, Sql, join, number, sql

__all__ = ["build_disjoint"]


# Per user, the steps' times are gathered in one array of the row's time and step packed in
# one Int64 (`ms * 32 + step`, order-preserving; steps are at most MAX_STEPS = 32, and a
# DateTime64(3)'s ms times 32 stays far inside Int64), sorted once and split per step: one
# aggregate state per user instead of one per step. Measured on 100M events (interleaved,
# 9 rounds): 5 steps 924 -> 890 ms, 5 steps with `on` 1,720 -> 1,625, 3 with `on` level.
_STEP_BITS = 5
if MAX_STEPS > 1 << _STEP_BITS:
    raise AssertionError("invariant: every step index fits in _STEP_BITS bits")


def _times_per_user(steps: list[tuple[int, Sql]], scan: Sql) -> Sql:
    """`scan`'s rows grouped per user: `u` and, for each of `steps` (step k, the row's
    condition for it; at most one true per row, the steps' names being disjoint), the
    user's sorted times of that step (`e0` for step 0, `s{k}` for a later k)."""
    # the row's step: multiIf(condition, k, …, -1)
    cases = join(", ", [sql("{}, {}", condition, number(k)) for k, condition in steps])
    split = [
        sql(
            "arrayMap(x -> bitShiftRight(x, {}), arrayFilter(x -> bitAnd(x, {}) = {}, packed)) AS {}",
            number(_STEP_BITS),
            number((1 << _STEP_BITS) - 1),
            number(k),
            alias("s", k) if k else sql("e0"),
        )
        for k, _ in steps
    ]
    return sql(
        "SELECT u, {} FROM (SELECT u, arraySort(groupArrayIf(bitShiftLeft(ms, {}) + code, code >= 0)) AS packed "
        "FROM (SELECT {} AS u, toUnixTimestamp64Milli(time) AS ms, toInt64(multiIf({}, -1)) AS code FROM {}) "
        "GROUP BY u)",
        join(", ", split),
        number(_STEP_BITS),
        USER,
        cases,
        scan,
    )


def _later_steps(req: FunnelsRequest, p: Params) -> list[tuple[int, Sql]]:
    """Each later step k with its condition on a row."""
    return [(k, step_condition(req, k, p)) for k in range(1, len(req.funnel.steps))]


def _per_user(req: FunnelsRequest, p: Params) -> Sql:
    """Per user: `e0` (the range's step-0 times, sorted) and `s1`… (each later step's sorted times)."""
    sc = funnel_scan(req, p)
    step0 = sql("({} AND ms >= {} AND ms < {})", step_condition(req, 0, p), sc.start_ms, sc.end_ms)
    scan = events_scan(sc.scanned, sc.final, sc.names, sc.where, p)
    return sql("SELECT * FROM ({}) WHERE notEmpty(e0)", _times_per_user([(0, step0), *_later_steps(req, p)], scan))


def _per_user_segmented(req: FunnelsRequest, p: Params) -> Sql:
    """With `on`: the per-user arrays.

    Two scans, each grouped per user, then joined: the step-0 events of the range, where the
    segment keys are computed (so `on` is evaluated on those rows only), and the later steps'
    events of the widened range. The names of the steps are disjoint, so the two never share
    a row. Per step-0 event: its time (`a_ms`), the rank of its name among the step's names
    sorted in code point order (`a_name`; the byte order of their UTF-8, which ClickHouse
    compares), its insert_id (`a_id`: strings compare bytewise, a prefix first), its ingestion
    time (`a_at`: of two copies of a duplicate the latest sorts first), and its segment keys
    (`a_g`).

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
        "groupArray(insert_id) AS a_id, groupArray(toUnixTimestamp64Milli(ingested_at)) AS a_at, "
        "groupArray({}) AS a_g, arraySort(a_ms) AS e0 FROM {} GROUP BY u",
        USER,
        ranked_names,
        sc.on_keys,
        step0_scan,
    )
    if not later_names:
        return entries
    rest = _times_per_user(
        _later_steps(req, p), events_scan(sc.scanned, sc.final, event_filter(later_names, p), sc.where, p)
    )
    # Every user with a step-0 event; one without later events gets empty `s1`… (the join's
    # default for an unmatched row).
    return sql("SELECT * FROM ({}) AS r RIGHT JOIN ({}) AS f USING u", rest, entries)


def _attempts(req: FunnelsRequest, per_user: Sql) -> Sql:
    """One row per attempt: its bucket `b`, entry time `t0`, the user's later-step times
    `s1`… (and with `on` the entry's segment keys `g`)."""
    later = [alias("s", k) for k in range(1, len(req.funnel.steps))]
    keys = [sql("g")] if req.on is not None else []
    return sql(
        "SELECT {} FROM ({}) ARRAY JOIN x0 AS t0, b0 AS b{}",
        join(", ", [sql("b"), sql("t0"), *later, *keys]),
        per_user,
        sql(", g0 AS g") if keys else sql(""),
    )


def _reached(k: int, window: Sql) -> list[Sql]:
    """Step k's time `t{k}` (0 when none was found) and `r{k}`: the attempt reaches step k."""
    t, i = alias("t", k), alias("i", k)
    return [
        sql("{}[{}] AS {}", alias("s", k), i, t),
        sql("{} > 0 AND {} <= t0 + {} AS {}", i, t, window, alias("r", k)),
    ]


def _steps(n: int, window: Sql, grace: Sql, rows: Sql) -> Sql:
    """`rows` (one per attempt) with `t{k}` and `r{k}` for every later step k: the first
    step-k time at or after t(k-1) - grace (the lower bound in the sorted `s{k}`, searched
    only by an attempt that reached step k-1), reached when it is at most t0 + window.

    One SELECT per step: the analyzer expands aliases, so chaining every step's aliases in
    one SELECT would grow the query tree exponentially with the number of steps; and one
    SELECT, not two, because planning grows faster than linearly with the nesting (with 32
    steps: 1.7 s at one level per step, 5 s at two)."""
    for k in range(1, n):
        search = sql("arrayFirstIndex(x -> x >= {} - {}, {})", alias("t", k - 1), grace, alias("s", k))
        if k == 1:
            cols = [sql("{} AS i1", search)]
        else:
            cols = [*_reached(k - 1, window), sql("if({}, {}, 0) AS {}", alias("r", k - 1), search, alias("i", k))]
        rows = sql("SELECT *, {} FROM ({})", join(", ", cols), rows)
    if n > 1:
        rows = sql("SELECT *, {} FROM ({})", join(", ", _reached(n - 1, window)), rows)
    return rows


def _counted(req: FunnelsRequest, attempts: Sql) -> Sql:
    """Rows of `COLUMNS` before the ranking: per bucket (and segment) the attempts reaching
    each step and their summed durations, as one row per step that some attempt reached."""
    n = len(req.funnel.steps)
    measures = [sql("count() AS n0")]
    names = [sql("n0")]  # the measures' aliases
    per_step = [sql("(toUInt32(0), n0, toInt64(0), toInt64(0))")]
    for k in range(1, n):
        t, r = alias("t", k), alias("r", k)
        n_k, d_k, e_k = alias("n", k), alias("d", k), alias("e", k)
        measures.append(
            sql(
                "countIf({}) AS {}, sumIf(greatest(0, {} - {}), {}) AS {}, sumIf(greatest(0, {} - t0), {}) AS {}",
                r,
                n_k,
                t,
                alias("t", k - 1),
                r,
                d_k,
                t,
                r,
                e_k,
            )
        )
        names += [n_k, d_k, e_k]
        per_step.append(sql("(toUInt32({}), {}, {}, {})", number(k), n_k, d_k, e_k))
    if req.on is None:
        grouped = sql(
            "SELECT b, CAST(NULL, 'Nullable(String)') AS segment, {} FROM ({}) GROUP BY b",
            join(", ", measures),
            attempts,
        )
    else:
        # Every attempt in $overall (NULL) and in each of its keys: counted per bucket and
        # key list first, then each list's counts added to its keys (few rows by then).
        # Measured on 100M events (5 steps): 5-18 % of the counting, against expanding
        # every attempt to its segments before the GROUP BY.
        grouped = sql(
            "SELECT b, segment, {} FROM (SELECT b, g, {} FROM ({}) GROUP BY b, g) "
            "ARRAY JOIN arrayPushFront(g, NULL) AS segment GROUP BY b, segment",
            join(", ", [sql("sum({}) AS {}", m, m) for m in names]),
            join(", ", measures),
            attempts,
        )
    return sql(
        "SELECT b AS bucket, segment, z.1 AS step, z.2 AS attempts, z.3 AS step_ms, z.4 AS start_ms "
        "FROM ({}) ARRAY JOIN [{}] AS z WHERE attempts > 0",
        grouped,
        join(", ", per_step),
    )


def _entries(req: FunnelsRequest, p: Params) -> Sql:
    """Per user, the entries (the first step-0 event of each bucket: `x0`, their times,
    ascending; `b0`, their buckets; with `on`, `g0`, their segment keys) and each later
    step's times."""
    entry_cols = [
        sql("arrayMap(t -> {}, e0) AS k0", bucket_date_of_ms(sql("t"), req.timeline, p)),
        sql("arrayPopBack(arrayPushFront(k0, toDate('1970-01-01'))) AS kp"),
        sql("arrayFilter((t, k, q) -> k != q, e0, k0, kp) AS x0"),
        sql("arrayFilter((k, q) -> k != q, k0, kp) AS b0"),
    ]
    if req.on is None:
        per_user = _per_user(req, p)
    else:
        per_user = _per_user_segmented(req, p)
        # Ties in time by name, insert_id, the latest copy first (then the keys: a total order).
        entry_cols += [
            sql("arraySort((g, m, n, i, a) -> (m, n, i, -a, g), a_g, a_ms, a_name, a_id, a_at) AS ga"),
            sql("arrayFilter((g, k, q) -> k != q, ga, k0, kp) AS g0"),
        ]
    return sql("SELECT *, {} FROM ({})", join(", ", entry_cols), per_user)


def build_disjoint(req: FunnelsRequest) -> Query:
    p = Params()
    rows = _attempts(req, _entries(req, p))
    window, grace = p.add(req.window_ms, "Int64"), p.add(GRACE_MS, "Int64")
    rows = _steps(len(req.funnel.steps), window, grace, rows)
    return ranked(req, _counted(req, rows), p)
