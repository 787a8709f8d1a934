"""The segmentation expression language (semantics.md §3): parse, check, compile to SQL.

    tree = parse_expr('properties["$city"] == "Chicago"')   # syntax only
    typed = check_expr(tree)                                 # meaning: names, arity, kinds
    where = compile_where(typed, params)                     # decisions: Sql + bound values

Every error is an `ExprError` (HTTP 400) with `.position` and, for syntax errors,
`.expected`.
"""

from services.query.expr.check import check_expr
from services.query.expr.compile import OnSql, compile_number, compile_on, compile_where
from services.query.expr.errors import ExprError, ExprLimitError, ExprSyntaxError, ExprTypeError
from services.query.expr.parser import parse_expr

__all__ = [
    "ExprError",
    "ExprLimitError",
    "ExprSyntaxError",
    "ExprTypeError",
    "OnSql",
    "check_expr",
    "compile_number",
    "compile_on",
    "compile_where",
    "parse_expr",
]
