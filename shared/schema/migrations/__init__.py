"""Numbered schema migrations, applied in order at start-up (see `footfall.shared.schema.migrate`).

Each module defines `STATEMENTS`: DDL that is safe to run again (IF NOT EXISTS), so a
crash half-way through a migration is repaired by the next start.
"""
