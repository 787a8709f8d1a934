"""The three ways a report uses an expression: as a filter, as segment keys, as a number.

All three take a parsed tree (`parse_expr`) or a checked one (`check_expr`) and the
query's `Params`; every literal and property name becomes a bound parameter there.

* `compile_where` -> UInt8 SQL, 1 exactly when the expression is boolean `true`.
* `compile_on` -> `OnSql`: the segment key per `string()` rules. A value without a
  string form (undefined, null, object) has no key. When the expression can be a list
  (any property access can), `is_array` is True and the SQL is `Array(String)`: the
  distinct keys of the list's scalar elements, `[key]` for a scalar, `[]` when there
  is no key — so `arrayJoin(...)` puts the event in one segment per key and drops it
  when there is none (semantics §2). Otherwise `is_array` is False and the SQL is
  `Nullable(String)`, NULL meaning "no key" (the caller drops those rows).
* `compile_number` -> `Nullable(Float64)`: the value when it is a number, else NULL
  (no implicit casts: `number(...)` is the user's cast).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.query.expr import ast
from services.query.expr.check import check_expr
from services.query.expr.errors import ExprLimitError
from services.query.expr.lower import Lowerer
from services.query.expr.typed import Apply, Column, Const, Kind, ListOf, Prop, TNode
from services.query.expr.values import NULL_STRING, Val, by_kind, if_, is_kind, iso_text, list_strings, num_text
from services.query.sql import Params, Sql, SqlSizeError, sql

__all__ = ["MAX_COMPILED_SQL", "OnSql", "compile_number", "compile_on", "compile_where"]

# ClickHouse refuses queries over 256 KiB (max_query_size); a where and an on must fit.
MAX_COMPILED_SQL = 100_000


@dataclass(frozen=True, slots=True)
class OnSql:
    """Segment keys: `Array(String)` when `is_array`, else `Nullable(String)` (NULL = no key)."""

    sql: Sql
    is_array: bool


def _checked(tree: ast.Node | TNode) -> TNode:
    if isinstance(tree, Const | Prop | Column | ListOf | Apply):
        return tree
    return check_expr(tree)


def _compile(tree: ast.Node | TNode, params: Params, build: str) -> tuple[Sql, bool]:
    lowerer = Lowerer(params)
    try:
        value = lowerer.lower(_checked(tree))
        binds: list[tuple[Sql, Sql]] = []
        v = lowerer.share(value, binds)
        out, is_array = _BUILDERS[build](lowerer, v)
        if binds:
            ((var, packed),) = binds
            out = sql("arrayElement(arrayMap(({}) -> {}, [{}]), 1)", var, out, packed)
    except SqlSizeError as exc:
        raise ExprLimitError("it compiles to too much SQL") from exc
    if len(out.text) > MAX_COMPILED_SQL:
        raise ExprLimitError(f"it compiles to more than {MAX_COMPILED_SQL} characters of SQL")
    return out, is_array


def _where(_: Lowerer, v: Val) -> tuple[Sql, bool]:
    # `b` is 0 whenever the kind is not boolean (values.py), so it is the filter itself.
    if v.b is None:
        return sql("toUInt8(0)"), False
    return v.b, False


def _number(_: Lowerer, v: Val) -> tuple[Sql, bool]:
    if Kind.NUMBER not in v.kinds:
        return sql("CAST(NULL, 'Nullable(Float64)')"), False
    return if_(is_kind(v, Kind.NUMBER), sql("toNullable({})", v.nv), sql("NULL")), False


def _scalar_key(v: Val) -> Sql:
    """`string()` of a non-list value as Nullable(String); NULL when it has none."""
    if not v.kinds & {Kind.BOOLEAN, Kind.NUMBER, Kind.STRING, Kind.DATETIME}:
        return NULL_STRING
    return by_kind(
        v,
        {
            Kind.BOOLEAN: lambda: sql("toNullable(if({}, 'true', 'false'))", v.bv),
            Kind.NUMBER: lambda: sql("toNullable({})", num_text(v.nv)),
            Kind.STRING: lambda: sql("toNullable({})", v.sv),
            Kind.DATETIME: lambda: sql("toNullable({})", iso_text(v.nv)),
        },
        NULL_STRING,
    )


def _on(lowerer: Lowerer, v: Val) -> tuple[Sql, bool]:
    if Kind.LIST not in v.kinds:
        return _scalar_key(v), False
    elements = list_strings(v.sv, lowerer.fresh(), lowerer.fresh())
    if v.kinds == {Kind.LIST}:
        return elements, True
    key = _scalar_key(v)
    scalar = sql("if(isNull({}), emptyArrayString(), [assumeNotNull({})])", key, key)
    return if_(is_kind(v, Kind.LIST), elements, scalar), True


_BUILDERS = {"where": _where, "number": _number, "on": _on}


def compile_where(tree: ast.Node | TNode, params: Params) -> Sql:
    """UInt8 SQL that is 1 exactly when the expression evaluates to boolean true."""
    return _compile(tree, params, "where")[0]


def compile_on(tree: ast.Node | TNode, params: Params) -> OnSql:
    """Segment key(s) of the expression; see the module docstring for the shape."""
    out, is_array = _compile(tree, params, "on")
    return OnSql(out, is_array)


def compile_number(tree: ast.Node | TNode, params: Params) -> Sql:
    """Nullable(Float64): the numeric value, NULL when the value is not a number."""
    return _compile(tree, params, "number")[0]
