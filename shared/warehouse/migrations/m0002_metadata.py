"""Metadata: projects, their credentials, service accounts and their project roles.

Small ReplacingMergeTree tables versioned by `updated_at`: a change is a new row, reads
use FINAL and skip rows marked `deleted`. Secrets and tokens are stored only as hashes
(`shared.credentials`).
"""

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS projects
    (
        project_id   UInt64,
        name         String,
        timezone     String,
        created_at   DateTime64(3, 'UTC'),
        updated_at   DateTime64(3, 'UTC'),
        deleted      UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY project_id
    """,
    """
    CREATE TABLE IF NOT EXISTS project_credentials
    (
        project_id   UInt64,
        kind         LowCardinality(String),
        lookup       String,
        secret_hash  String,
        created_at   DateTime64(3, 'UTC'),
        updated_at   DateTime64(3, 'UTC'),
        deleted      UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (project_id, kind, lookup)
    """,
    """
    CREATE TABLE IF NOT EXISTS service_accounts
    (
        sa_id            UInt64,
        organization_id  UInt64,
        username         String,
        secret_hash      String,
        created_at       DateTime64(3, 'UTC'),
        expires_at       Nullable(DateTime64(3, 'UTC')),
        updated_at       DateTime64(3, 'UTC'),
        deleted          UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY sa_id
    """,
    """
    CREATE TABLE IF NOT EXISTS service_account_projects
    (
        sa_id        UInt64,
        project_id   UInt64,
        role         LowCardinality(String),
        updated_at   DateTime64(3, 'UTC'),
        deleted      UInt8 DEFAULT 0
    )
    ENGINE = ReplacingMergeTree(updated_at)
    ORDER BY (sa_id, project_id)
    """,
]
