"""The segmentation expression language (semantics.md §3): parse, check, compile to SQL.

    tree = parse_expr('properties["$city"] == "Chicago"')   # syntax only
    typed = check_expr(tree)                                 # meaning: names, arity, kinds
    where = compile_where(typed, params)                     # decisions: Sql + bound values

Every error is an `ExprError` (HTTP 400) with `.position` (0-based character offset)
and, for syntax errors, `.expected`. Limits: 4096 characters, nesting depth 64, and
compiled SQL over `compile.MAX_COMPILED_SQL` characters is refused.

Decisions where semantics.md §3 is silent (the cases in
tests/conformance/expr_semantics.json pin each of them):

* `properties["time"]` / `event["time"]` / `event["$time"]` are the event time, a
  datetime; `properties["distinct_id"]` and `properties["$insert_id"]` are those columns.
* `defined(x)` is false only for undefined: a JSON null is "set".
* `undefined == undefined` and `null == null` are true; lists compare element-wise,
  objects by their stored JSON text; a datetime equals (and orders against) an ISO
  string of the same instant (§3.4 "ISO strings are dates").
* Ordering also works string/string (byte order, case-sensitive) and datetime/datetime.
* `in`: only a scalar (null, boolean, number, string, datetime) can be in a list, by
  `==` rules (1 is not in ["1"]); a datetime is found among ISO strings of its instant,
  in any accepted form ("2024-01-01", "...Z", an offset); a datetime element of a list
  literal is stored as its `string()` text (whole seconds).
* Arithmetic results that are not finite (overflow, x/0, x%0) are undefined.
* `number("s")`: only `[+-]digits[.digits][e[+-]digits]` (also ".5", "5."), no
  whitespace/hex/inf; `number(true)` = 1; `number(datetime)` = epoch seconds.
* `string(number)` prints like JavaScript (1, 2.5, 1e+21, 1e-7, 0 for -0);
  `string(datetime)` is `YYYY-MM-DDTHH:MM:SS` UTC; `string(list|object)` is undefined.
* `boolean("false")`, `boolean("")`, `boolean(0)`, null, undefined → false; anything
  else (also "False", [] and {}) → true.
* `datetime(n)`: epoch seconds, or milliseconds when n >= 1e10; strings in ISO form
  (date, optional `T`/space time, optional fraction and `Z`/±HH[:]MM offset up to
  23:59; naive = UTC) whose instant lies in [1900-01-01, 2300-01-01) UTC, at run time
  as in a literal; anything else undefined. A literal that is not a valid date
  (`datetime("yesterday")`) is a 400.
* `round` rounds halves up (JavaScript `Math.round`: -2.5 → -2).
* `and`/`or` operands that can never be boolean or undefined are a 400; at run time a
  non-boolean value (a property holding "true") counts as false.
* `user[...]` and `behaviors[...]` are a 400 in event expressions.

The profile context (/engage `where`): `check_expr(tree, context="profiles",
behaviors=names)` reads a profile instead of an event: `properties["x"]` and its alias
`user["x"]` read the profile's `properties` JSON (no key is special: `properties["time"]`
is a profile property), `behaviors["name"]` is the count of a behaviour in `names` (a
number the query provides: `compile_where(typed, params, properties_of=PROFILES,
counts={name: sql})`), and `event[...]` or an undefined behaviour is a 400. Every rule
above applies unchanged.
"""

from footfall.shared.expr.check import check_expr
from footfall.shared.expr.compile import OnSql, compile_number, compile_on, compile_where, reads_properties_text
from footfall.shared.expr.errors import ExprError, ExprLimitError, ExprSyntaxError, ExprTypeError
from footfall.shared.expr.parser import parse_expr

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
    "reads_properties_text",
]
