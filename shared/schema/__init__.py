"""The warehouse schema: the table catalog and the numbered migrations that create it."""

from footfall.shared.schema.catalog import TABLES, Column, Table
from footfall.shared.schema.migrate import apply_migrations

__all__ = ["TABLES", "Column", "Table", "apply_migrations"]
