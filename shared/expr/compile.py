"""The three ways a report uses an expression: as a filter, as segment keys, as a number.

All three take a parsed tree (`parse_expr`) or a checked one (`check_expr`) and the
query's `Params`; every literal and property name becomes a bound parameter there.
A tree checked in the profile context (`check_expr(..., context="profiles")`) is
compiled with `properties_of=PROFILES` (whose `properties` a property reads) and
`counts` (the numeric SQL of each `behaviors["name"]` it reads).

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from footfall.shared.expr import ast
from footfall.shared.expr.check import check_expr
from footfall.shared.expr.errors import ExprLimitError
from footfall.shared.expr.lower import Lowerer
from footfall.shared.expr.typed import Apply, Column, Const, Count, Kind, ListOf, Prop, TNode, UserProp, walk
from footfall.shared.expr.values import (
    NULL_STRING,
    Cond,
    Val,
    if_,
    is_kind,
    iso_text,
    list_strings,
    multi_if,
    num_text,
    s_as,
)
from footfall.shared.schema.catalog import EVENTS, Table
from footfall.shared.sql import Params, Sql, SqlSizeError, sql
from footfall.shared.sql.ident import hot_column

__all__ = ["MAX_COMPILED_SQL", "OnSql", "compile_number", "compile_on", "compile_where", "reads_properties_text"]

# ClickHouse refuses queries over 256 KiB (max_query_size); a where and an on must fit.
MAX_COMPILED_SQL = 100_000
EMPTY_KEYS = sql("emptyArrayString()")


@dataclass(frozen=True, slots=True)
class OnSql:
    """Segment keys: `Array(String)` when `is_array`, else `Nullable(String)` (NULL = no key)."""

    sql: Sql
    is_array: bool


def _checked(tree: ast.Node | TNode) -> TNode:
    if isinstance(tree, Const | Prop | UserProp | Column | Count | ListOf | Apply):
        return tree
    return check_expr(tree)


def _compile(
    tree: ast.Node | TNode,
    params: Params,
    build: str,
    properties_of: Table,
    counts: Mapping[str, Sql] | None,
    user_properties: Sql | None = None,
) -> tuple[Sql, bool]:
    lowerer = Lowerer(params, properties_of=properties_of, counts=counts, user_properties=user_properties)
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


def _keyed(v: Val, wrap: Callable[[Sql], Sql]) -> list[tuple[Cond, Sql]]:
    """Per kind with a `string()` form (hence a segment key), the test and `wrap(key)`.

    Strings first: the tests are disjoint, so the order only decides how many tests the
    most common kind of property value waits for.
    """
    keys: list[tuple[Kind, Callable[[], Sql]]] = [
        (Kind.STRING, lambda: s_as(v, Kind.STRING)),
        (Kind.BOOLEAN, lambda: sql("if({}, 'true', 'false')", v.bv)),
        (Kind.NUMBER, lambda: num_text(v.nv)),
        (Kind.DATETIME, lambda: iso_text(v.nv)),
    ]
    branches = [(is_kind(v, kind), wrap(key())) for kind, key in keys if kind in v.kinds]
    if branches and v.kinds <= {kind for kind, _ in keys}:
        # Every possible kind has a key: the last one needs no test.
        branches[-1] = (True, branches[-1][1])
    return branches


def _scalar_key(v: Val) -> Sql:
    """`string()` of a non-list value as Nullable(String); NULL when it has none."""
    return multi_if(_keyed(v, lambda key: sql("toNullable({})", key)), NULL_STRING)


def _on(lowerer: Lowerer, v: Val) -> tuple[Sql, bool]:
    if Kind.LIST not in v.kinds:
        return _scalar_key(v), False
    elements = list_strings(s_as(v, Kind.LIST), lowerer.fresh(), lowerer.fresh())
    if v.kinds == {Kind.LIST}:
        return elements, True
    # A scalar's key as a one-element array (no Nullable detour); no key, no element.
    branches = _keyed(v, lambda key: sql("[{}]", key))
    return multi_if([*branches[:1], (is_kind(v, Kind.LIST), elements), *branches[1:]], EMPTY_KEYS), True


_BUILDERS = {"where": _where, "number": _number, "on": _on}


def compile_where(
    tree: ast.Node | TNode,
    params: Params,
    *,
    properties_of: Table = EVENTS,
    counts: Mapping[str, Sql] | None = None,
    user_properties: Sql | None = None,
) -> Sql:
    """UInt8 SQL that is 1 exactly when the expression evaluates to boolean true.
    `user_properties`: the profile's `properties` text that `user[...]` reads (the join
    context, `check_expr(..., context="join")`)."""
    return _compile(tree, params, "where", properties_of, counts, user_properties)[0]


def compile_on(
    tree: ast.Node | TNode,
    params: Params,
    *,
    properties_of: Table = EVENTS,
    counts: Mapping[str, Sql] | None = None,
) -> OnSql:
    """Segment key(s) of the expression; see the module docstring for the shape."""
    out, is_array = _compile(tree, params, "on", properties_of, counts)
    return OnSql(out, is_array)


def compile_number(
    tree: ast.Node | TNode,
    params: Params,
    *,
    properties_of: Table = EVENTS,
    counts: Mapping[str, Sql] | None = None,
) -> Sql:
    """Nullable(Float64): the numeric value, NULL when the value is not a number."""
    return _compile(tree, params, "number", properties_of, counts)[0]


def reads_properties_text(tree: TNode, properties_of: Table = EVENTS) -> bool:
    """Whether the compiled expression parses the `properties` JSON text per row: it reads a
    property of `properties_of` that has no hot column (`footfall.shared.schema.hot`). The
    cost that dominates a scan, so callers plan around it."""
    return any(isinstance(node, Prop) and hot_column(node.name, properties_of) is None for node in walk(tree))
