"""Count sources: rows (name, bucket, n, u) = event name, bucket key ('' without a
timeline), distinct events, distinct non-empty distinct_ids. All exact under unmerged
duplicates: `counts_final` (rows of `events FINAL`), `counts_mv` (the m0003 quarter-hour
distinct sets plus raw partial quarters), `counts_raw` (distinct dedup hashes), `counts`
choosing among them by measured cost; `counts_where` for reports that read properties."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from footfall.services.query.reports._common.buckets import bucket_key
from footfall.services.query.reports._common.scan import TIME, Binds, Scope, event_filter, final_events, raw_events
from footfall.services.query.reports._common.timeline import QUARTER, Timeline
from footfall.shared.schema.catalog import EVENT_COUNTS_15M, EVENTS
from footfall.shared.sql import Sql, source, sql

__all__ = ["cell_measures", "counts", "counts_final", "counts_mv", "counts_raw", "counts_where", "mv_covers"]


def _bucket_or_blank(ts: Sql, timeline: Timeline | None, binds: Binds) -> Sql:
    return bucket_key(ts, timeline, binds) if timeline is not None else sql("''")


def counts_raw(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Counts from the events table. Distinct dedup hashes, so an unmerged duplicate
    counts once; no property is read, so which copy wins does not matter."""
    return sql(
        "SELECT event AS name, {} AS bucket, uniqExact(dedup_hash) AS n, "
        "uniqExactIf(distinct_id, distinct_id != '') AS u "
        "FROM {} GROUP BY name, bucket",
        _bucket_or_blank(TIME, timeline, binds),
        raw_events(scope, names, binds),
    )


def _ceil_quarter(t: datetime) -> datetime:
    floor = _floor_quarter(t)
    return floor if floor == t else floor + QUARTER


def _floor_quarter(t: datetime) -> datetime:
    return t.replace(minute=t.minute - t.minute % 15, second=0, microsecond=0)


def mv_covers(scope: Scope, timeline: Timeline | None) -> bool:
    """Whether `event_counts_15m` can answer: buckets no finer than an hour, at least one
    whole quarter hour in the range, and every UTC offset of the zone in the range a
    multiple of 15 minutes (true of all zones since 1971; checked, not assumed)."""
    if timeline is not None and timeline.unit == "minute" and not timeline.interval_days:
        return False
    start, end = scope.span
    if _ceil_quarter(start) >= _floor_quarter(end):
        return False
    if timeline is None:
        return True
    zone = ZoneInfo(timeline.tz)
    t, step = start, max(timedelta(hours=6), (end - start) / 2000)
    while t <= end:
        offset = t.astimezone(zone).utcoffset() or timedelta(0)
        if offset % QUARTER:
            return False
        t += step
    return True


def counts_mv(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Counts from the materialised quarter-hour aggregates (m0003), plus the events of
    the partial quarter hours at either end of the range (a range ending at `now`),
    merged as the same distinct-set states. Call only when `mv_covers(...)`."""
    start, end = scope.span
    inner = scope.within(_ceil_quarter(start), _floor_quarter(end))
    inner_start, inner_end = inner.span
    quarter = sql("quarter")
    partial = sql(
        "{} AND (time < {} OR time >= {})",
        event_filter(names, binds),
        binds.add(inner_start, "DateTime64(3, 'UTC')"),
        binds.add(inner_end, "DateTime64(3, 'UTC')"),
    )
    return sql(
        "SELECT name, {} AS bucket, uniqExactMerge(e) AS n, uniqExactMerge(us) AS u FROM ("
        "SELECT event AS name, quarter, events AS e, users AS us FROM {} "
        "UNION ALL "
        "SELECT event AS name, toDateTime(toStartOfFifteenMinutes(time), 'UTC') AS quarter, "
        "uniqExactState(dedup_hash) AS e, uniqExactStateIf(distinct_id, distinct_id != '') AS us "
        "FROM {} GROUP BY name, quarter"
        ") GROUP BY name, bucket",
        _bucket_or_blank(quarter, timeline, binds),
        source(EVENT_COUNTS_15M, inner, binds, keys=event_filter(names, binds)),
        source(EVENTS, scope, binds, keys=partial),
    )


def counts_final(scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds) -> Sql:
    """Event counts only (`u` is 0): `count()` over `events FINAL`. Exact — FINAL collapses
    unmerged duplicates — and, on merged data, as fast as a plain `count()`: FINAL only
    merges where parts overlap in key ranges (recent days during ingestion)."""
    return sql(
        "SELECT event AS name, {} AS bucket, count() AS n, toUInt64(0) AS u FROM {} GROUP BY name, bucket",
        _bucket_or_blank(TIME, timeline, binds),
        final_events(scope, names, None, binds),
    )


def counts(
    scope: Scope, names: Sequence[str] | None, timeline: Timeline | None, binds: Binds, *, kind: str | None = None
) -> Sql:
    """Rows (name, bucket, n, u) by the fastest exact route (bench/results/query_segmentation.json):

    * `kind="general"`: `counts_final` (distinct-hash states cost more to merge than
      counting the deduplicated rows; `u` is not computed);
    * otherwise the materialised aggregates when they cover the request (merging the
      users' sets beats `uniqExact(distinct_id)` over the rows by 2-3x), else the
      events table."""
    if kind == "general":
        return counts_final(scope, names, timeline, binds)
    if mv_covers(scope, timeline):
        return counts_mv(scope, names, timeline, binds)
    return counts_raw(scope, names, timeline, binds)


# Per-cell measures by `type`: reading and hashing distinct_id only where the answer needs it.
_CELL_MEASURES = {
    "general": sql("count() AS n, toUInt64(0) AS u"),
    "average": sql("count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u"),
    None: sql("count() AS n, uniqExactIf(distinct_id, distinct_id != '') AS u"),
}


def cell_measures(kind: str | None) -> Sql:
    """`n, u` of one cell for `type` `kind` (`u` is 0 for general; None: both)."""
    return _CELL_MEASURES.get(kind, _CELL_MEASURES[None])


def counts_where(
    scope: Scope, names: Sequence[str] | None, timeline: Timeline, where: Sql, binds: Binds, *, kind: str | None = None
) -> Sql:
    """Counts of the events passing `where`. `FINAL` collapses duplicates first, so the
    latest copy's properties decide (semantics §2: the most recently ingested wins).
    With `kind="general"` the users (`u`) are not computed (0)."""
    return sql(
        "SELECT event AS name, {} AS bucket, {} FROM {} GROUP BY name, bucket",
        bucket_key(TIME, timeline, binds),
        cell_measures(kind),
        final_events(scope, names, where, binds),
    )
