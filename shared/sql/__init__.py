"""The only place that makes SQL text: fragments, bound parameters, catalog identifiers and
scoped sources (a tenant table is read only with its project guard)."""

from footfall.shared.sql.ident import column
from footfall.shared.sql.params import Params
from footfall.shared.sql.render import render
from footfall.shared.sql.scope import Scope, source
from footfall.shared.sql.sql import Sql, SqlSizeError, join, local, number, sql

__all__ = ["Params", "Scope", "Sql", "SqlSizeError", "column", "join", "local", "number", "render", "source", "sql"]
