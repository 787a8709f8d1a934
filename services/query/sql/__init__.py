"""The only place that makes SQL text: fragments, bound parameters, catalog identifiers."""

from services.query.sql.ident import column, table
from services.query.sql.params import Params
from services.query.sql.render import render
from services.query.sql.sql import Sql, SqlSizeError, join, local, number, sql

__all__ = ["Params", "Sql", "SqlSizeError", "column", "join", "local", "number", "render", "sql", "table"]
