"""Identifiers, only from the catalog (`footfall.shared.schema.catalog`).

Nothing from a request ever becomes an identifier: property names are bound as values
(`JSONExtractRaw(properties, {p0:String})`), and the compiler asks for columns by their
catalog name. Table names are not handed out here at all: a table is read through a
source of `footfall.shared.sql.scope`, which writes the tenant guard with it.
"""

from __future__ import annotations

from footfall.shared.schema.catalog import EVENTS, Table
from footfall.shared.sql.sql import Sql, _unchecked

__all__ = ["column"]


def column(name: str, table: Table = EVENTS) -> Sql:
    """The identifier of a column of `table` (the events table unless named); anything else
    is a programming error."""
    if name not in table.types:
        raise KeyError(f"unknown column {name!r} of {table.name}")
    return _unchecked(name)
