"""`/segmentation`, `/segmentation/numeric`, `/segmentation/sum`, `/segmentation/average`.

Semantics (semantics.md §1.6–1.9, §2, §2.4–2.6; decisions.md), and the gaps decided here:

* `/segmentation`: one event; `type` general (events), unique (distinct non-empty
  distinct_ids) or average (events per user, 0 without users). Without `on` the only
  segment is the event name, zero-filled even with no events. With `on`, events whose
  value is undefined or null are left out [gap: §11 recommends dropping them]; a list
  value counts the event once in each distinct element's segment; the top `limit`
  (default 60, at most 10,000) segments by their total over the whole range are kept
  (for unique: distinct users over the range), ties by segment ascending [gap].
  `interval` (N-day buckets from `from_date`) applies only when `type` is not general,
  as the interface says; `unit` is minute, hour, day, week (sent by clients) or month.
* `/segmentation/numeric` [gap, §2.5]: `on` values that are numbers (no implicit cast)
  are bucketed into `buckets` (default 10) equal "nice" widths (1, 2, 2.5 or 5 × 10^k);
  labels `"<lo> - <hi>"` with `,` thousands separators; empty cells and labels omitted.
  See `numeric_buckets`.
* `/segmentation/sum` and `/average`: per bucket, the sum / mean of `on` where a
  non-numeric or undefined value counts as 0.0 and, for the mean, stays in the
  denominator (decisions.md); every bucket present, 0.0 when empty.

Duplicates: counts without `where`/`on` take the exact routes of `_common.counts`
(rows of `events FINAL`, or the materialised distinct sets); anything that reads
properties runs on `events FINAL`, so the latest ingested copy of a duplicate decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports import _common
from footfall.services.query.reports._common import (
    Binds,
    Query,
    Timeline,
    bucket_key,
    cell_measures,
    counts,
    counts_where,
    final_events,
    measure,
    read_expr,
    read_format,
    read_limit,
    read_timeline,
    read_type,
    read_unit,
    scope_of,
    segmented,
    segmented_values,
    series_body,
    series_response,
    series_values,
    where_condition,
)
from footfall.shared.expr import compile_number, compile_on
from footfall.shared.expr.typed import TNode
from footfall.shared.sql import Sql, sql

__all__ = [
    "NumericRequest",
    "SegmentationRequest",
    "SumRequest",
    "average",
    "build",
    "numeric",
    "numeric_buckets",
    "segmentation",
    "shape",
    "sum_",
]

SEGMENT_UNITS = ("minute", "hour", "day", "week", "month")
MAX_NUMERIC_BUCKETS = 1000


# -- /segmentation ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SegmentationRequest:
    project_id: int
    event: str
    timeline: Timeline
    type: str
    on: TNode | None
    where: TNode | None
    limit: int
    format: str

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> SegmentationRequest:
        p = ctx.params
        kind = read_type(p)
        timeline = read_timeline(
            p, ctx.timezone, now, unit=read_unit(p, SEGMENT_UNITS), allow_interval_days=kind != "general"
        )
        return cls(
            ctx.project_id,
            p.required("event"),
            timeline,
            kind,
            read_expr(p, "on"),
            read_expr(p, "where"),
            read_limit(p, 60),
            read_format(p),
        )


def build(req: SegmentationRequest) -> Query:
    binds = Binds()
    scope = scope_of(req.project_id, req.timeline)
    where = where_condition(req.where, binds)
    if req.on is not None:
        on = compile_on(req.on, binds)
        text = segmented(
            scope, [req.event], req.timeline, on, where, None, req.type == "unique", req.limit, binds, kind=req.type
        )
    elif where is not None:
        text = counts_where(scope, [req.event], req.timeline, where, binds, kind=req.type)
    else:
        text = counts(scope, [req.event], req.timeline, binds, kind=req.type)
    return Query(text, binds)


def shape(rows: list[tuple[Any, ...]], req: SegmentationRequest) -> dict[str, Any]:
    series = req.timeline.series
    if req.on is not None:
        values = segmented_values(rows, req.type, series)
    else:
        values = series_values(rows, req.type, series, [req.event])
    return series_body(series, values)


async def segmentation(ctx: QueryContext) -> Any:
    req = SegmentationRequest.parse(ctx, _common.utc_now())
    ctx.check_cells(
        len(req.timeline.series), req.limit if req.on is not None else 1, "from_date/to_date, unit or limit"
    )
    body = await ctx.shape(shape, await build(req).run(ctx), req)
    return series_response(body, req.format)


# -- /segmentation/numeric -------------------------------------------------------------------------
@dataclass(frozen=True)
class NumericRequest:
    project_id: int
    event: str
    timeline: Timeline
    type: str
    on: TNode
    where: TNode | None
    buckets: int
    format: str

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> NumericRequest:
        p = ctx.params
        timeline = read_timeline(p, ctx.timezone, now, unit=read_unit(p, SEGMENT_UNITS))
        on = read_expr(p, "on", required=True)
        if on is None:
            raise AssertionError("invariant: on is not None")
        buckets = p.integer("buckets", 10, minimum=1, maximum=MAX_NUMERIC_BUCKETS)
        return cls(
            ctx.project_id,
            p.required("event"),
            timeline,
            read_type(p),
            on,
            read_expr(p, "where"),
            buckets,
            read_format(p),
        )


@dataclass(frozen=True)
class Buckets:
    """Labels of the numeric buckets and their inner edges (bucket j starts at edge j-1)."""

    labels: tuple[str, ...]
    edges: tuple[float, ...]


def _exact(x: float) -> Fraction:
    """The decimal the float prints as (its shortest repr), exactly."""
    return Fraction(Decimal(repr(float(x))))


def _nice_width(raw: Fraction) -> Fraction:
    """The smallest m × 10^k ≥ raw with m in 1, 2, 2.5, 5."""
    k = math.floor(math.log10(raw)) - 1
    while True:
        for m in (Fraction(1), Fraction(2), Fraction(5, 2), Fraction(5)):
            width = m * Fraction(10) ** k
            if width >= raw:
                return width
        k += 1


def _decimals(x: Fraction) -> int:
    d = 0
    while (x * 10**d).denominator != 1:
        d += 1
    return d


def _label(x: Fraction, decimals: int) -> str:
    return f"{Decimal(x.numerator) / Decimal(x.denominator):,.{decimals}f}"


def numeric_buckets(low: float, high: float, count: int) -> Buckets:
    """§2.5: width = (high-low)/count rounded up to a nice number; the first edge is the
    largest multiple of the width ≤ low; as many buckets as reach `high`, which falls in
    the last one. All values equal: one bucket "v - v". Exact decimal arithmetic; the
    inner edges go to SQL as floats, where `x >= float(edge)` agrees with the exact
    comparison for every edge with at most 15 significant digits."""
    lo_v, hi_v = _exact(low), _exact(high)
    if lo_v == hi_v:
        text = _label(lo_v, _decimals(lo_v))
        return Buckets((f"{text} - {text}",), ())
    width = _nice_width((hi_v - lo_v) / count)
    lo = math.floor(lo_v / width) * width
    n = max(1, math.ceil((hi_v - lo) / width))
    d = _decimals(width)
    labels = tuple(f"{_label(lo + j * width, d)} - {_label(lo + (j + 1) * width, d)}" for j in range(n))
    edges = tuple(
        float(Decimal((lo + j * width).numerator) / Decimal((lo + j * width).denominator)) for j in range(1, n)
    )
    return Buckets(labels, edges)


def _numeric_scan(req: NumericRequest, binds: Binds) -> tuple[Sql, Sql]:
    """The numeric `on` value and the deduplicated, filtered events it is read from."""
    where = where_condition(req.where, binds)
    number = compile_number(req.on, binds)
    return number, final_events(scope_of(req.project_id, req.timeline), [req.event], where, binds)


def build_range(req: NumericRequest) -> Query:
    """min and max of the numeric `on` values (the first of the two queries)."""
    binds = Binds()
    number, source = _numeric_scan(req, binds)
    return Query(
        sql("SELECT min(x), max(x), count() FROM (SELECT {} AS x FROM {}) WHERE isNotNull(x)", number, source), binds
    )


def build_numeric(req: NumericRequest, buckets: Buckets) -> Query:
    """(bucket index, time bucket, events, users) for the given numeric buckets."""
    binds = Binds()
    edges = binds.add(list(buckets.edges), "Array(Float64)")
    last = binds.add(len(buckets.labels) - 1, "UInt32")
    bucket = bucket_key(sql("time"), req.timeline, binds)
    number, source = _numeric_scan(req, binds)
    return Query(
        sql(
            "SELECT least(arrayCount(e -> assumeNotNull(x) >= e, {}), {}) AS idx, bucket, {} "
            "FROM (SELECT {} AS x, {} AS bucket, distinct_id FROM {}) "
            "WHERE isNotNull(x) GROUP BY idx, bucket",
            edges,
            last,
            cell_measures(req.type),
            number,
            bucket,
            source,
        ),
        binds,
    )


def shape_numeric(rows: list[tuple[Any, ...]], req: NumericRequest, buckets: Buckets | None) -> dict[str, Any]:
    series = list(req.timeline.series)
    values: dict[str, dict[str, int | float]] = {}
    if buckets is not None:
        cells: dict[int, dict[str, int | float]] = {}
        for idx, bucket, n, u in rows:
            value = measure(req.type, n, u)
            if value != 0:
                cells.setdefault(int(idx), {})[bucket] = value
        for idx, label in enumerate(buckets.labels):
            if idx in cells:
                values[label] = {key: cells[idx][key] for key in series if key in cells[idx]}
    return series_body(series, values)


async def numeric(ctx: QueryContext) -> Any:
    req = NumericRequest.parse(ctx, _common.utc_now())
    ((low, high, found),) = await build_range(req).run(ctx)
    buckets = numeric_buckets(low, high, req.buckets) if found else None
    rows = await build_numeric(req, buckets).run(ctx) if buckets is not None else []
    body = shape_numeric(rows, req, buckets)
    return series_response(body, req.format)


# -- /segmentation/sum, /segmentation/average ------------------------------------------------------
@dataclass(frozen=True)
class SumRequest:
    project_id: int
    event: str
    timeline: Timeline
    on: TNode
    where: TNode | None

    @classmethod
    def parse(cls, ctx: QueryContext, now: datetime) -> SumRequest:
        p = ctx.params
        timeline = read_timeline(p, ctx.timezone, now, unit=read_unit(p, SEGMENT_UNITS))
        on = read_expr(p, "on", required=True)
        if on is None:
            raise AssertionError("invariant: on is not None")
        return cls(ctx.project_id, p.required("event"), timeline, on, read_expr(p, "where"))


def build_sum(req: SumRequest) -> Query:
    """(bucket, Kahan-compensated sum with non-numbers as 0.0, number of events)."""
    binds = Binds()
    where = where_condition(req.where, binds)
    return Query(
        sql(
            "SELECT bucket, sumKahan(ifNull(x, 0.)), count() "
            "FROM (SELECT {} AS x, {} AS bucket FROM {}) GROUP BY bucket",
            compile_number(req.on, binds),
            bucket_key(sql("time"), req.timeline, binds),
            final_events(scope_of(req.project_id, req.timeline), [req.event], where, binds),
        ),
        binds,
    )


def shape_sum(rows: list[tuple[Any, ...]], req: SumRequest, now: datetime) -> dict[str, Any]:
    sums = {bucket: float(total) for bucket, total, _ in rows}
    return {
        "status": "ok",
        "computed_at": now.isoformat(),
        "results": {key: sums.get(key, 0.0) for key in req.timeline.series},
    }


def shape_average(rows: list[tuple[Any, ...]], req: SumRequest) -> dict[str, Any]:
    means = {bucket: float(total) / n for bucket, total, n in rows if n}
    return {"status": "ok", "results": {key: means.get(key, 0.0) for key in req.timeline.series}}


async def sum_(ctx: QueryContext) -> Any:
    now = _common.utc_now()
    req = SumRequest.parse(ctx, now)
    return shape_sum(await build_sum(req).run(ctx), req, now)


async def average(ctx: QueryContext) -> Any:
    req = SumRequest.parse(ctx, _common.utc_now())
    return shape_average(await build_sum(req).run(ctx), req)
