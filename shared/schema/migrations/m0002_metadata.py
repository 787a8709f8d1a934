"""Metadata: projects, their credentials, service accounts and their project roles.

Small ReplacingMergeTree tables versioned by `updated_at`: a change is a new row, reads
use FINAL and skip rows marked `deleted`. Secrets and tokens are stored only as hashes
(`shared.credentials`).
"""

from footfall.shared.schema.catalog import PROJECT_CREDENTIALS, PROJECTS, SERVICE_ACCOUNT_PROJECTS, SERVICE_ACCOUNTS

STATEMENTS = [t.create_statement() for t in (PROJECTS, PROJECT_CREDENTIALS, SERVICE_ACCOUNTS, SERVICE_ACCOUNT_PROJECTS)]
