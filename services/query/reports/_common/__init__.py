"""Plumbing shared by the reports, one module per concern:

* `parameters`: reading the shared parameters (`type`, `unit`, `interval`, `limit`,
  `format`, `from_date`/`to_date`, `where`, `on`) with their defaults and ranges; every
  error names its parameter.
* `timeline`: `Timeline`, the local days `from_date`..`to_date` (inclusive) of the
  project's time zone, or the last `interval` units back from now, cut into keyed buckets
  (decisions.md); `series` lists every key that has an instant in the range, ascending.
* `scan`: `Scope` (project and UTC time range; every scan is built from one, so no query
  can leave out either: STYLE principle 6), `Query` (finished SQL and its bound values;
  `run()` sends it through the warehouse), `event_filter` and `final_events` (FINAL with
  the key conditions in PREWHERE).
* `buckets`: the `Timeline` keys computed by ClickHouse: `bucket_key` (a String, from a
  timestamp) and `bucket_date` (a Date, for per-user arrays).
* `counts`: count sources, all exact under unmerged duplicates: `counts_final` (rows of
  `events FINAL`), `counts_mv` (the m0003 quarter-hour distinct sets plus raw partial
  quarters), `counts_raw` (distinct dedup hashes), `counts` choosing among them by
  measured cost; `counts_where` for reports that read properties.
* `segments`: the values of `on`: `segmented` (the breakdown reports), `on_keys`,
  `segment_weight` and `top_segments` (the per-user reports).
* `values`: zero-filled values and CSV output.
* Here: the clock (`utc_now`, replaced by tests through this package's attribute, so the
  reports call it as `_common.utc_now()`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from footfall.services.query.reports._common.buckets import bucket_date, bucket_date_of_ms, bucket_key
from footfall.services.query.reports._common.counts import (
    cell_measures,
    counts,
    counts_final,
    counts_mv,
    counts_raw,
    counts_where,
    mv_covers,
)
from footfall.services.query.reports._common.parameters import (
    MAX_LIMIT,
    TYPES,
    UNITS,
    check_text,
    read_dates,
    read_expr,
    read_format,
    read_limit,
    read_type,
    read_unit,
)
from footfall.services.query.reports._common.scan import (
    HAS_USER,
    USER,
    Binds,
    Query,
    Scope,
    event_filter,
    final_events,
    one_event,
    raw_events,
    scope_of,
    where_condition,
)
from footfall.services.query.reports._common.segments import (
    on_keys,
    ranked_cells,
    segment_expr,
    segment_weight,
    segmented,
    top_segments,
)
from footfall.services.query.reports._common.timeline import (
    MAX_BUCKETS,
    Timeline,
    read_timeline,
    timeline_back_from_now,
    timeline_for_dates,
)
from footfall.services.query.reports._common.values import (
    csv_response,
    measure,
    segmented_values,
    series_body,
    series_csv,
    series_response,
    series_values,
    zero_filled,
)

__all__ = [
    "HAS_USER",
    "MAX_BUCKETS",
    "MAX_LIMIT",
    "TYPES",
    "UNITS",
    "USER",
    "Binds",
    "Query",
    "Scope",
    "Timeline",
    "bucket_date",
    "bucket_date_of_ms",
    "bucket_key",
    "cell_measures",
    "check_text",
    "counts",
    "counts_final",
    "counts_mv",
    "counts_raw",
    "counts_where",
    "csv_response",
    "event_filter",
    "final_events",
    "measure",
    "mv_covers",
    "on_keys",
    "one_event",
    "ranked_cells",
    "raw_events",
    "read_dates",
    "read_expr",
    "read_format",
    "read_limit",
    "read_timeline",
    "read_type",
    "read_unit",
    "scope_of",
    "segment_expr",
    "segment_weight",
    "segmented",
    "segmented_values",
    "series_body",
    "series_csv",
    "series_response",
    "series_values",
    "timeline_back_from_now",
    "timeline_for_dates",
    "top_segments",
    "utc_now",
    "where_condition",
    "zero_filled",
]


def utc_now() -> datetime:
    """The service's clock. Reports read it once per request; tests replace it."""
    return datetime.now(UTC)
