"""Migration jobs (semantics-2.md §14.2, `footfall.services.migrate`): the job records and their
resume cursors, versioned like the cohorts (ReplacingMergeTree by `updated_at`, read with FINAL)."""

from footfall.shared.schema.catalog import MIGRATION_JOBS

STATEMENTS = [MIGRATION_JOBS.create_statement()]
