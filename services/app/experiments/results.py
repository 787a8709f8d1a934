"""Exposures and results of an experiment (semantics-2.md §16.6), computed from stored events.

One statement per computation: the exposures (events named `exposure_event` whose
`experiment_name_property` is the experiment's name and whose `variant_name_property` is one of
its variant keys, with a non-empty `distinct_id`, inside [start, end]) grouped per user into the
variant of the first exposure, the first and the last exposure; then, per metric, every exposed
user's matching events inside their window (first exposure .. the earlier of end/now and 90 days
after their last exposure); then per variant the number of users, of converted users, and the
sum and sum of squares of the per-user counts. The statistics (value, lift, z-test p-value) are
arithmetic on those sums (`metric_results`).

Decisions where §16.6 is silent: property values are compared as JSON strings (a number in
`Variant name` is not a variant key); an exposure to a variant the experiment does not define
is ignored; two first exposures at the same millisecond go to the smaller variant key; an
instant belongs to [start, end] when it does to the second (end dates are whole seconds, so an
event at end + 0.5 s is in). `value` is null for a variant nobody was exposed to; `lift` is
null when the control's value is 0 or null; `p_value` is null when a side has no users or both
variances are 0; the control itself has null `lift` and `p_value`. A `total` metric's sample
variance is 0 for a single user.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from footfall.shared.expr import check_expr, compile_where, parse_expr
from footfall.shared.expr.values import property_string
from footfall.shared.schema.catalog import EVENTS
from footfall.shared.sql import Params, Scope, Sql, join, number, render, source, sql
from footfall.shared.warehouse.client import Warehouse

__all__ = ["WINDOW", "Analysis", "VariantSums", "build", "compute", "metric_results"]

WINDOW = timedelta(days=90)  # a user's metric window ends 90 days after their last exposure
_UTC_MS = "DateTime64(3, 'UTC')"


@dataclass(frozen=True)
class Analysis:
    """What the statement needs: the effective settings, variants, metrics and the range."""

    project_id: int
    exposure_event: str
    name_property: str
    variant_property: str
    experiment_name: str
    variants: tuple[str, ...]
    metrics: tuple[Mapping[str, Any], ...]
    start: datetime  # UTC, whole seconds
    end: datetime  # the last second that belongs to the range (end date, or now)


@dataclass(frozen=True)
class VariantSums:
    """Per variant: exposed users, and per metric (converted users, sum, sum of squares)."""

    exposures: int
    metrics: tuple[tuple[int, int, int], ...]


def _prop(name: str, binds: Params) -> Sql:
    """A string property of the event (a hot column when it has one)."""
    return property_string(name, binds)


def build(a: Analysis) -> tuple[str, dict[str, Any]]:
    """The statement: rows (variant, exposures, then converted, sum, sumsq per metric)."""
    binds = Params()
    end_excl = a.end + timedelta(seconds=1)
    scope = Scope(a.project_id, a.start, end_excl)
    variant = _prop(a.variant_property, binds)
    exposure_keys = sql("event = {} AND distinct_id != ''", binds.add(a.exposure_event, "String"))
    exposure_where = sql(
        "{} = {} AND {} IN {}",
        _prop(a.name_property, binds),
        binds.add(a.experiment_name, "String"),
        variant,
        binds.add(list(a.variants), "Array(String)"),
    )
    exposures = source(EVENTS, scope, binds, final=True, keys=exposure_keys, where=exposure_where)
    exposed = sql(
        "SELECT distinct_id, argMin(v, (time, v)) AS variant, min(time) AS first_t, max(time) AS last_t"
        " FROM (SELECT distinct_id, time, {} AS v FROM {}) GROUP BY distinct_id",
        variant,
        exposures,
    )
    if not a.metrics:
        text = sql("WITH exposed AS ({}) SELECT variant, count() FROM exposed GROUP BY variant", exposed)
        return render(text), binds.values
    flags = []
    for i, metric in enumerate(a.metrics):
        condition = sql("event = {}", binds.add(metric["event"], "String"))
        if metric.get("selector"):
            condition = sql("{} AND {}", condition, compile_where(check_expr(parse_expr(metric["selector"])), binds))
        flags.append(sql("({}) AS {}", condition, _flag(i)))
    names = binds.add(sorted({m["event"] for m in a.metrics}), "Array(String)")
    metric_keys = sql("event IN {} AND distinct_id IN (SELECT distinct_id FROM exposed)", names)
    metric_events = source(EVENTS, scope, binds, final=True, keys=metric_keys)
    counts = sql(
        "SELECT e.distinct_id AS distinct_id, {} FROM (SELECT distinct_id, time, {} FROM {}) AS e"
        " INNER JOIN exposed AS x ON x.distinct_id = e.distinct_id"
        " WHERE e.time >= x.first_t AND e.time <= x.last_t + toIntervalSecond({}) GROUP BY e.distinct_id",
        join(", ", [sql("countIf(e.{}) AS {}", _flag(i), _count(i)) for i in range(len(a.metrics))]),
        join(", ", flags),
        metric_events,
        binds.add(int(WINDOW.total_seconds()), "UInt32"),
    )
    sums = []
    for i in range(len(a.metrics)):
        c = sql("coalesce(k.{}, 0)", _count(i))
        sums.append(sql("countIf({} > 0), sum({}), sum({} * {})", c, c, c, c))
    text = sql(
        "WITH exposed AS ({}), counts AS ({}) SELECT x.variant, count(), {}"
        " FROM exposed AS x LEFT JOIN counts AS k ON k.distinct_id = x.distinct_id GROUP BY x.variant",
        exposed,
        counts,
        join(", ", sums),
    )
    return render(text), binds.values


def _flag(i: int) -> Sql:
    return sql("metric_flag_{}", number(i))


def _count(i: int) -> Sql:
    return sql("metric_count_{}", number(i))


def compute(warehouse: Warehouse, a: Analysis) -> dict[str, VariantSums]:
    """Run the statement (blocking: call through the warehouse's runner) → sums per variant."""
    out = {key: VariantSums(0, tuple((0, 0, 0) for _ in a.metrics)) for key in a.variants}
    if not a.variants or a.end < a.start:
        return out
    for row in warehouse.query(*build(a)):
        per_metric = tuple(
            (int(row[2 + 3 * i]), int(row[3 + 3 * i]), int(row[4 + 3 * i])) for i in range(len(a.metrics))
        )
        out[str(row[0])] = VariantSums(int(row[1]), per_metric)
    return out


def _value(kind: str, n: int, converted: int, total: int, sumsq: int) -> tuple[float | None, float | None]:
    """(value, variance) of one variant for a `conversion` or `total` metric."""
    if n == 0:
        return None, None
    if kind == "conversion":
        p = converted / n
        return p, p * (1 - p)
    mean = total / n
    variance = max(0.0, (sumsq - total * total / n) / (n - 1)) if n > 1 else 0.0
    return mean, variance


def metric_results(
    metrics: Sequence[Mapping[str, Any]], control: str | None, sums: Mapping[str, VariantSums], confidence: float
) -> list[dict[str, Any]]:
    """`results_cache.metrics`: per metric, per variant `{exposures, value, lift, p_value, significant}`."""
    threshold = (1 - confidence) / 2
    out = []
    for i, metric in enumerate(metrics):
        values = {key: (s.exposures, *_value(metric["type"], s.exposures, *s.metrics[i])) for key, s in sums.items()}
        base = values.get(control) if control is not None else None
        variants: dict[str, Any] = {}
        for key, (n, value, variance) in values.items():
            lift = p_value = None
            if base is not None and key != control:
                n_c, value_c, var_c = base
                if value is not None and value_c:
                    lift = (value - value_c) / value_c
                if value is not None and value_c is not None and variance is not None and var_c is not None:
                    se = math.sqrt(variance / n + var_c / n_c)
                    if se > 0:
                        p_value = math.erfc(abs(value - value_c) / se / math.sqrt(2))
            variants[key] = {
                "exposures": n,
                "value": value,
                "lift": lift,
                "p_value": p_value,
                "significant": p_value is not None and p_value <= threshold,
            }
        out.append({"id": metric["id"], "variants": variants})
    return out
