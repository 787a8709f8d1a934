"""Experiments (semantics-2.md §16, `footfall.services.app.experiments`).

`experiments` follows the cohorts: ReplacingMergeTree versioned by `updated_at` (microseconds,
strictly increasing per experiment), read with FINAL, rows marked `deleted` skipped.
"""

from footfall.shared.schema.catalog import EXPERIMENTS

STATEMENTS = [EXPERIMENTS.create_statement()]
