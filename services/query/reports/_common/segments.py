"""Segments: the values of an `on` expression.

* `segment_expr` (one row per distinct element of a list) and `segmented`, the breakdown
  reports' per-segment counts, ranked and cut to the top `limit` in SQL;
* for per-user reports (funnels, retention, frequency): `on_keys`, the keys of a row as an
  array, and `segment_weight` + `top_segments`, which keep `$overall` and the top `limit`
  segments of a grouped result by a window function, so the result stays small.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from footfall.services.query.reports._common.buckets import bucket_key
from footfall.services.query.reports._common.counts import cell_measures
from footfall.services.query.reports._common.scan import TIME, Binds, Scope, final_events
from footfall.services.query.reports._common.timeline import Timeline
from footfall.shared.expr import OnSql
from footfall.shared.sql import Sql, sql

__all__ = ["on_keys", "ranked_cells", "segment_expr", "segment_weight", "segmented", "top_segments"]


def segment_expr(on: OnSql) -> Sql:
    return sql("arrayJoin({})", on.sql) if on.is_array else on.sql


def on_keys(on: OnSql) -> Sql:
    """Array(String): the segment keys of a row, without repeats.

    A list's keys come from `compile_on` already distinct and without NULLs; a scalar's
    key is NULL when it has none. (Measured on 2M funnel entries at 100M events: the
    former generic `arrayDistinct(arrayFilter(isNotNull))` over every row cost ~45 ms of
    the ~270 ms step-0 scan.)"""
    if on.is_array:
        return on.sql
    return sql("CAST(arrayFilter(x -> isNotNull(x), [{}]), 'Array(String)')", on.sql)


def segment_weight(rows: Sql, weight: Sql) -> Sql:
    """`rows` (with a Nullable(String) `segment`) and `seg_weight`: `weight`, an aggregate
    over the rows of the segment, as a window function."""
    return sql("SELECT *, {} OVER (PARTITION BY segment) AS seg_weight FROM ({})", weight, rows)


def top_segments(rows: Sql, limit: int, binds: Binds) -> Sql:
    """The rows of `rows` (with `segment` and `seg_weight`) of `$overall` (segment NULL) and
    of the top `limit` segments by `seg_weight`, ties by segment ascending, with their
    `seg_rank`: 1 for `$overall`, then 2, 3, … in that order."""
    return sql(
        "SELECT * FROM ("
        "SELECT *, dense_rank() OVER (ORDER BY isNull(segment) DESC, seg_weight DESC, segment) AS seg_rank FROM ({})) "
        "WHERE seg_rank <= {}",
        rows,
        binds.add(limit + 1, "UInt32"),
    )


def ranked_cells(rows: Iterable[Sequence[Any]]) -> tuple[dict[tuple[str, str | None], dict[int, int]], list[str]]:
    """From rows (Date, segment, i, users, seg_rank) of a `top_segments` query: the users by
    (date key, segment) and i, and the segments (not `$overall`) in rank order."""
    cells: dict[tuple[str, str | None], dict[int, int]] = {}
    ranks: dict[str, int] = {}
    for day, segment, i, users, rank in rows:
        cells.setdefault((day.isoformat(), segment), {})[int(i)] = int(users)
        if segment is not None:
            ranks[segment] = int(rank)
    return cells, sorted(ranks, key=lambda seg: ranks[seg])


def segmented(
    scope: Scope,
    names: Sequence[str] | None,
    timeline: Timeline,
    on: OnSql,
    where: Sql | None,
    allowed: Sequence[str] | None,
    rank_by_users: bool,
    limit: int,
    binds: Binds,
    *,
    kind: str | None = None,
) -> Sql:
    """Per segment of `on`: (segment, total events, total users, [(bucket, n, u)]), for the
    top `limit` segments by events (or by users over the whole range, `rank_by_users`),
    ties by segment ascending. Events whose `on` is undefined or null have no segment;
    a list puts the event once into each of its distinct elements' segments.

    `kind` general or average skips what that type does not use (users, or the users'
    totals over the range; reported as 0)."""
    keep = sql("isNotNull(seg)")
    if allowed is not None:
        keep = sql("isNotNull(seg) AND has({}, assumeNotNull(seg))", binds.add(list(allowed), "Array(String)"))
    if kind in ("general", "average") and not rank_by_users:
        return sql(
            "SELECT assumeNotNull(seg) AS segment, sum(n) AS tn, toUInt64(0) AS tu, groupArray((bucket, n, u)) "
            "FROM (SELECT seg, bucket, {} FROM (SELECT {} AS seg, {} AS bucket{} FROM {}) "
            "WHERE {} GROUP BY seg, bucket) "
            "GROUP BY seg ORDER BY tn DESC, seg ASC LIMIT {}",
            cell_measures(kind),
            segment_expr(on),
            bucket_key(TIME, timeline, binds),
            sql(", distinct_id") if kind == "average" else sql(""),
            final_events(scope, names, where, binds),
            keep,
            binds.add(limit, "UInt32"),
        )
    order = sql("tu DESC, seg ASC") if rank_by_users else sql("tn DESC, seg ASC")
    return sql(
        "SELECT assumeNotNull(seg) AS segment, sum(n) AS tn, uniqExactMerge(us) AS tu, groupArray((bucket, n, u)) "
        "FROM (SELECT seg, bucket, count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u, "
        "uniqExactStateIf(distinct_id, distinct_id != '') AS us "
        "FROM (SELECT {} AS seg, {} AS bucket, distinct_id FROM {}) "
        "WHERE {} GROUP BY seg, bucket) "
        "GROUP BY seg ORDER BY {} LIMIT {}",
        segment_expr(on),
        bucket_key(TIME, timeline, binds),
        final_events(scope, names, where, binds),
        keep,
        order,
        binds.add(limit, "UInt32"),
    )
