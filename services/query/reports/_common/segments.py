"""Breakdowns by the value of an `on` expression."""

from __future__ import annotations

from collections.abc import Sequence

from services.query.expr import OnSql
from services.query.reports._common.counts import cell_measures
from services.query.reports._common.scan import TIME, Binds, Scope, bucket_key, final_events
from services.query.reports._common.timeline import Timeline
from services.query.sql import Sql, sql

__all__ = ["segment_expr", "segmented"]


def segment_expr(on: OnSql) -> Sql:
    return sql("arrayJoin({})", on.sql) if on.is_array else on.sql


def segmented(scope: Scope, names: Sequence[str] | None, timeline: Timeline, on: OnSql, where: Sql | None,
              allowed: Sequence[str] | None, rank_by_users: bool, limit: int, binds: Binds, *,
              kind: str | None = None) -> Sql:
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

