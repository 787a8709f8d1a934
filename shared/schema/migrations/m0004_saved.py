"""Saved funnels and saved reports (bookmarks), per project (`footfall.shared.saved`).

Same pattern as the other metadata tables: ReplacingMergeTree versioned by `updated_at`
(microsecond precision, strictly increasing per item), reads use FINAL and skip rows
marked `deleted`. `body` is the validated definition as JSON text.
"""

from footfall.shared.schema.catalog import SAVED_FUNNELS, SAVED_REPORTS

STATEMENTS = [SAVED_FUNNELS.create_statement(), SAVED_REPORTS.create_statement()]
