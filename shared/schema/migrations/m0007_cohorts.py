"""Cohorts (semantics-2.md §13, `footfall.shared.cohorts`) and the deployment-wide id counters.

`cohorts` follows the saved funnels: ReplacingMergeTree versioned by `updated_at` (microseconds,
strictly increasing per cohort), read with FINAL, rows marked `deleted` skipped. `id_counters`
holds the highest id handed out per name; cohort ids come from it, unique across the deployment.
"""

from footfall.shared.schema.catalog import COHORTS, ID_COUNTERS

STATEMENTS = [COHORTS.create_statement(), ID_COUNTERS.create_statement()]
