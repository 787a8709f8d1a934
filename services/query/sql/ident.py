"""Identifiers, only from a fixed catalog of known tables and columns.

Nothing from a request ever becomes an identifier: property names are bound as values
(`JSONExtractRaw(properties, {p0:String})`), and the compiler asks for columns by
their catalog name.
"""

from __future__ import annotations

from types import MappingProxyType

from services.query.sql.sql import Sql, _unchecked

__all__ = ["COLUMNS", "TABLES", "column", "table"]

# The events table (shared/warehouse/migrations/m0001_events.py): name -> ClickHouse type.
COLUMNS = MappingProxyType(
    {
        "project_id": "UInt64",
        "time": "DateTime64(3, 'UTC')",
        "event": "LowCardinality(String)",
        "distinct_id": "String",
        "insert_id": "String",
        "properties": "String",
        "city": "LowCardinality(String)",
        "region": "LowCardinality(String)",
        "country_code": "LowCardinality(String)",
        "dedup_hash": "FixedString(16)",
        "ingested_at": "DateTime64(3, 'UTC')",
    }
)
TABLES = frozenset({"events"})


def column(name: str) -> Sql:
    """The identifier of a catalog column; anything else is a programming error."""
    if name not in COLUMNS:
        raise KeyError(f"unknown column {name!r}")
    return _unchecked(name)


def table(name: str) -> Sql:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}")
    return _unchecked(name)
