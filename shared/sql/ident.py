"""Identifiers, only from the catalog (`footfall.shared.schema.catalog`).

Nothing from a request ever becomes an identifier: property names are bound as values
(`JSONExtractRaw(properties, {p0:String})`), and the compiler asks for columns by their
catalog name. Table names are not handed out for reading: a table is read through a
source of `footfall.shared.sql.scope`, which writes the tenant guard with it. The one
write the query service makes (`insert_into`) names its table and columns from here too.
"""

from __future__ import annotations

from collections.abc import Sequence

from footfall.shared.schema import hot
from footfall.shared.schema.catalog import EVENTS, Table
from footfall.shared.sql.sql import Sql, _unchecked

__all__ = ["column", "hot_column", "insert_into"]


def column(name: str, table: Table = EVENTS) -> Sql:
    """The identifier of a column of `table` (the events table unless named); anything else
    is a programming error."""
    if name not in table.types:
        raise KeyError(f"unknown column {name!r} of {table.name}")
    return _unchecked(name)


def hot_column(prop: str, table: Table = EVENTS) -> Sql | None:
    """The hot column holding property `prop` of `table` (`footfall.shared.schema.hot`), when
    one is in use; its name is derived from the property name, never the name itself."""
    name = hot.active_column(table.name, prop)
    return None if name is None else _unchecked(name)


def insert_into(table: Table, columns: Sequence[str]) -> Sql:
    """`INSERT INTO <table> (<columns>)`, the head of an `INSERT … SELECT` that the query
    service writes (an /engage paging snapshot); every name comes from the catalog."""
    if not columns:
        raise ValueError("an insert names its columns")
    names = [column(name, table).text for name in columns]
    return _unchecked(f"INSERT INTO {table.name} ({', '.join(names)})")
