"""Independent evaluator of the segmentation expression language (semantics.md §3.2 grammar, §3.3 rules).

Public: `evaluate(text, event)`, `where_matches(text, event)`, `on_keys(text, event)`, `as_number(text, event)`,
`segment_keys(value)`, `to_string(value)`, `parse(text)`, `UNDEFINED`, `DateTime`, `ExprError`.
Profile expressions (/engage `where`): `parse_profile`, `evaluate_profile(text, properties, behaviors)`,
`profile_where_matches`, `behavior_names` (see the section at the end of this module).
Helpers for the cohort oracle (cohorts.py), at the very end: `cast(kind, value)`, `compare(op, a, b)`,
`error_position(text, profile=False)`.
`event` is a stored event (`_common.Event`: name, time_ms, distinct_id, insert_id, properties), because some
accessors read the event's own fields rather than its stored properties.

Value model: undefined = UNDEFINED; null = None; bool; number = int | float (never bool), treated as an IEEE
double (arithmetic, comparison and printing go through float); str; list; dict (object); DateTime (epoch
seconds, UTC).

Where §3 is silent, the oracle follows the decisions documented by the expression compiler
(shared/expr/__init__.py) and pinned by tests/conformance/expr_semantics.json (the self-check runs
every case); this module shares no code with it.
- Accessors: `properties["time"]`, `event["time"]`, `event["$time"]` are the event time (a datetime, ms
  precision); `properties["distinct_id"]`, `event["distinct_id"]`, `event["$distinct_id"]` the event's
  distinct_id (string); `properties["$insert_id"]`, `event["$insert_id"]` its insert id. Any other key reads
  the stored properties (missing -> undefined, JSON null -> null); `event[...]` is `properties[...]` otherwise.
  `user[...]` and `behaviors[...]` are an ExprError (a 400 in event expressions).
- `defined(x)` is true iff x is not undefined (a JSON null is "set").
- `==` is false across types, with one exception: a datetime equals an ISO string of the same instant.
  undefined == undefined and null == null are true; numbers compare as doubles (1 == 1.0); lists compare
  element-wise by these rules; objects by their stored JSON text (key order and 1 vs 1.0 matter).
- Ordering compares number/number, string/string (code points = UTF-8 byte order), datetime/datetime, and a
  datetime with an ISO string; anything else (incl. a non-ISO string against a datetime) is undefined.
- ISO strings (for datetime() and for datetime/string comparisons): `YYYY-MM-DD`, optionally `T` or a space
  and `HH:MM[:SS[.fraction]]`, optionally `Z` or `±HH[:]MM`; naive = UTC; the instant must lie in
  [1900-01-01, 2300-01-01) UTC; a fraction is truncated to milliseconds (the precision of event times).
  `datetime(n)`: epoch seconds, milliseconds when n >= 1e10, same range.
  Outside the range / unparsable -> undefined; a string or number literal argument that gives undefined
  (`datetime("yesterday")`) is an ExprError.
- `in`: string in string = case-sensitive substring; a scalar (null, boolean, number, string, datetime) in a
  list = membership by `==` (1 is not in ["1"]; a datetime is found among ISO strings of its instant);
  anything else (a list or object on the left, undefined, a non-list/non-string right side) is undefined.
  A list literal is a JSON list: an undefined element is stored as null (`null in [properties["x"]]` is
  true) and a datetime element as its string() text.
- Arithmetic: numbers only; a result that is not finite (overflow, x/0, x%0) is undefined; `%` takes the
  sign of the dividend. A number literal that does not fit a double is an ExprError.
- `number("s")` accepts only `[+-]digits[.digits][e[+-]digits]` (also ".5" / "5."), no whitespace, no
  inf/nan/hex, and must be finite ("1e400" is undefined); `number(datetime)` is epoch seconds; objects and
  lists are undefined. `string()` of a list/object is undefined, of a datetime `YYYY-MM-DDTHH:MM:SS` (UTC),
  of a number JavaScript's Number#toString (1, 1.5, 1e+21, 1e-7, 0 for -0).
- `boolean(x)`: false for false, 0, "", "false", null, undefined; true for everything else (incl. [] and {}).
- `and`/`or` return a boolean; an operand counts as true only when it is boolean true (undefined and, at run
  time, any non-boolean value such as the string "true" count as false). An operand that can never be
  boolean or undefined (e.g. `1`, `"x"`, `string(...)`, `properties["time"]`) is an ExprError.
- `not`: boolean -> negation; undefined -> true; anything else -> undefined.
- `round` rounds halves up (JavaScript's Math.round: -2.5 -> -2); floor/ceil/round of a non-number are undefined.
- Extra functions: has_prefix, has_suffix, lower, upper (strings only, else undefined).
- String literals use double or single quotes with JSON-style escapes (\\" \\' \\\\ \\/ \\n \\t \\r \\b \\f \\uXXXX).
  An expression longer than 4096 characters is an ExprError.
- Segment keys (`on_keys`): the value's string() form; a list yields one key per element (deduplicated, in
  order), elements that are null/lists/objects yield nothing; undefined, null and objects yield no key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._common import Event

__all__ = [
    "UNDEFINED",
    "DateTime",
    "ExprError",
    "as_number",
    "behavior_names",
    "cast",
    "compare",
    "error_position",
    "evaluate",
    "evaluate_profile",
    "on_keys",
    "parse",
    "parse_profile",
    "profile_where_matches",
    "segment_keys",
    "to_string",
    "where_matches",
]

MAX_LENGTH = 4096


class _Undefined:
    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


class ExprError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class DateTime:
    epoch: float  # seconds since the epoch, UTC


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_EPOCH = (datetime(1900, 1, 1, tzinfo=UTC) - EPOCH).total_seconds()  # inclusive
MAX_EPOCH = (datetime(2300, 1, 1, tzinfo=UTC) - EPOCH).total_seconds()  # exclusive


# ------------------------------------------------------------------------------------------------ lexer
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op>==|!=|>=|<=|[-+*/%<>()\[\],])
""",
    re.VERBOSE | re.DOTALL,
)


def _unquote(tok: str) -> str:
    """JSON escapes plus \\' for both quote styles (the body is rewritten to a JSON string body first)."""
    body = re.sub(
        r'\\(.)|"',
        lambda m: '\\"' if m.group(1) is None else ("'" if m.group(1) == "'" else m.group(0)),
        tok[1:-1],
        flags=re.DOTALL,
    )
    try:
        return json.loads(f'"{body}"', strict=False)
    except ValueError as exc:
        raise ExprError(f"bad string literal {tok}: {exc}") from None


def _number_literal(tok: str) -> int | float:
    value = float(tok) if any(c in tok for c in ".eE") else int(tok)
    if not _finite(value):
        raise ExprError(f"number {tok} is out of range")
    return value


def _lex(text: str) -> list[tuple[str, object]]:
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r} at {pos}")
        kind, tok = m.lastgroup, m.group()
        pos = m.end()
        if kind == "num":
            toks.append(("lit", _number_literal(tok)))
        elif kind == "str":
            toks.append(("lit", _unquote(tok)))
        elif kind in ("name", "op"):
            toks.append((kind, tok))
    toks.append(("end", None))
    return toks


# ----------------------------------------------------------------------------------------------- parser
_ACCESSORS = {"properties", "user", "event", "behaviors"}
# Keys that read the event's own fields instead of its stored properties: accessor -> key -> field.
_COLUMNS = {
    "properties": {"time": "time", "distinct_id": "distinct_id", "$insert_id": "insert_id"},
    "event": {
        "time": "time",
        "$time": "time",
        "distinct_id": "distinct_id",
        "$distinct_id": "distinct_id",
        "$insert_id": "insert_id",
    },
}
_FUNCS = {
    "defined": 1,
    "number": 1,
    "string": 1,
    "boolean": 1,
    "datetime": 1,
    "floor": 1,
    "round": 1,
    "ceil": 1,
    "has_prefix": 2,
    "has_suffix": 2,
    "lower": 1,
    "upper": 1,
}
_CMP = {"==", "!=", ">", ">=", "<", "<="}


class _Parser:
    def __init__(self, text: str):
        self.toks, self.i = _lex(text), 0

    def peek(self) -> tuple[str, object]:
        return self.toks[self.i]

    def take(self, kind: str, value: object = None) -> object:
        k, v = self.toks[self.i]
        if k != kind or (value is not None and v != value):
            raise ExprError(f"expected {value or kind}, got {v!r}")
        self.i += 1
        return v

    def at(self, kind: str, value: object) -> bool:
        return self.toks[self.i] == (kind, value)

    def parse(self) -> tuple:
        node = self.or_expr()
        self.take("end")
        return node

    def _left(self, ops: tuple[str, ...], sub) -> tuple:
        """A left-associative level: sub (op sub)*; `and`/`or` are name tokens, the rest op tokens."""
        node = sub()
        while self.peek()[0] in ("op", "name") and self.peek()[1] in ops:
            op = self.toks[self.i][1]
            self.i += 1
            node = ("bin", op, node, sub())
        return node

    def or_expr(self) -> tuple:
        return self._left(("or",), self.and_expr)

    def and_expr(self) -> tuple:
        return self._left(("and",), self.not_expr)

    def not_expr(self) -> tuple:
        if self.at("name", "not"):
            self.i += 1
            return ("not", self.not_expr())
        return self.cmp_expr()

    def cmp_expr(self) -> tuple:  # non-associative: at most one comparison
        node = self.add_expr()
        kind, v = self.peek()
        if (kind == "op" and v in _CMP) or (kind, v) == ("name", "in"):
            self.i += 1
            node = ("bin", v, node, self.add_expr())
        return node

    def add_expr(self) -> tuple:
        return self._left(("+", "-"), self.mul_expr)

    def mul_expr(self) -> tuple:
        return self._left(("*", "/", "%"), self.unary)

    def unary(self) -> tuple:
        if self.at("op", "-"):
            self.i += 1
            return ("neg", self.unary())
        return self.primary()

    def primary(self) -> tuple:
        kind, v = self.peek()
        if kind == "lit":
            self.i += 1
            return ("lit", v)
        if self.at("op", "("):
            self.i += 1
            node = self.or_expr()
            self.take("op", ")")
            return node
        if self.at("op", "["):
            self.i += 1
            items = self.args("]")
            return ("list", tuple(items))
        if kind == "name":
            self.i += 1
            if v in ("true", "false"):
                return ("lit", v == "true")
            if v == "null":
                return ("lit", None)
            if v in _ACCESSORS:
                self.take("op", "[")
                key = self.take("lit")
                if not isinstance(key, str):
                    raise ExprError(f"{v}[...] needs a string key")
                self.take("op", "]")
                if v in ("user", "behaviors"):
                    raise ExprError(f"{v}[...] is not available in an event expression")
                field = _COLUMNS[v].get(key)
                return ("field", field) if field else ("get", key)
            if v in _FUNCS and self.at("op", "("):
                self.i += 1
                args = self.args(")")
                if len(args) != _FUNCS[v]:
                    raise ExprError(f"{v}() takes {_FUNCS[v]} argument(s), got {len(args)}")
                return ("call", v, tuple(args))
        raise ExprError(f"unexpected token {v!r}")

    def args(self, close: str) -> list[tuple]:
        items = []
        if self.at("op", close):
            self.i += 1
            return items
        while True:
            items.append(self.or_expr())
            if self.at("op", ","):
                self.i += 1
                continue
            self.take("op", close)
            return items


@lru_cache(maxsize=1024)
def parse(text: str) -> tuple:
    """The syntax tree, after the static checks (length, datetime literals, and/or operand types)."""
    return _checked(_Parser, text)


def _checked(parser: type[_Parser], text: str) -> tuple:
    """`text` parsed by `parser`, after the static checks every context shares."""
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression longer than {MAX_LENGTH} characters")
    node = parser(text).parse()
    _kinds(node)
    return node


# ------------------------------------------------------------------------------------------ static kinds
_JSON_KINDS = frozenset({"undefined", "null", "boolean", "number", "string", "list", "object"})
_SCALARS = frozenset({"null", "boolean", "number", "string", "datetime"})


def _kinds(node: tuple) -> frozenset[str]:
    """The types the node can evaluate to, over all events; raises ExprError on the static errors."""
    kind = node[0]
    if kind == "behavior":  # profile expressions only: a behaviour count
        return frozenset({"number"})
    if kind == "user":  # join selectors only: a property of the event's user profile
        return _JSON_KINDS
    if kind == "lit":
        return frozenset({_type(node[1])})
    if kind == "list":
        for item in node[1]:
            _kinds(item)
        return frozenset({"list"})
    if kind == "field":
        return frozenset({"datetime" if node[1] == "time" else "string"})
    if kind == "get":
        return _JSON_KINDS
    if kind == "neg":
        ks = _kinds(node[1])
        return frozenset(({"number"} if "number" in ks else set()) | ({"undefined"} if ks - {"number"} else set()))
    if kind == "not":
        ks = _kinds(node[1])
        logical = {"boolean", "undefined"}
        return frozenset(({"boolean"} if ks & logical else set()) | ({"undefined"} if ks - logical else set()))
    if kind == "call":
        return _call_kinds(node[1], node[2], [_kinds(a) for a in node[2]])
    op, ka, kb = node[1], _kinds(node[2]), _kinds(node[3])
    if op in ("and", "or"):
        for ks in (ka, kb):
            if not ks & {"boolean", "undefined"}:
                raise ExprError(f"the operands of '{op}' must be boolean, got {'/'.join(sorted(ks))}")
        return frozenset({"boolean"})
    if op in ("==", "!="):
        return frozenset({"boolean"})
    if op in _CMP or op == "in":
        return frozenset({"boolean", "undefined"})
    out: set[str] = set()
    for x in ka:
        for y in kb:
            if x == y == "number":
                out |= {"number", "undefined"}  # the result may overflow
            else:
                out.add("string" if op == "+" and x == y == "string" else "undefined")
    return frozenset(out)


# function -> (result type, argument types that can give it, argument types that may still give undefined)
_CALL_KINDS = {
    "number": ("number", {"number", "boolean", "string", "datetime"}, {"string"}),
    "string": ("string", {"number", "boolean", "string", "datetime"}, set()),
    "datetime": ("datetime", {"number", "string", "datetime"}, {"number", "string"}),
    "floor": ("number", {"number"}, set()),
    "ceil": ("number", {"number"}, set()),
    "round": ("number", {"number"}, set()),
    "lower": ("string", {"string"}, set()),
    "upper": ("string", {"string"}, set()),
    "has_prefix": ("boolean", {"string"}, set()),
    "has_suffix": ("boolean", {"string"}, set()),
}


def _call_kinds(name: str, args: tuple, ks: list[frozenset[str]]) -> frozenset[str]:
    if name in ("defined", "boolean"):
        return frozenset({"boolean"})
    if name == "datetime" and args[0][0] == "lit" and _type(args[0][1]) in ("number", "string"):
        if _datetime(args[0][1]) is UNDEFINED:
            raise ExprError(f"datetime() needs an ISO date or an epoch time in [1900, 2300), got {args[0][1]!r}")
        return frozenset({"datetime"})
    result, good, may_fail = _CALL_KINDS[name]
    out: set[str] = set()
    if all(k & good for k in ks):
        out.add(result)
    if any(k - good - ({"null"} if name == "string" else set()) or k & may_fail for k in ks):
        out.add("undefined")
    if name == "string" and "null" in ks[0]:
        out.add("null")
    return frozenset(out)


# -------------------------------------------------------------------------------------------- semantics
def _type(v: object) -> str:
    if v is UNDEFINED:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "list", dict: "object", DateTime: "datetime"}.get(type(v), "other")


def _num(v: object) -> bool:
    return _type(v) == "number"


def _float(x: int | float) -> float:
    """A number as the double it stands for (an int too large for a double is infinite)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _finite(x: int | float) -> bool:
    return math.isfinite(_float(x))


def _json_text(v: object) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _eq(a: object, b: object) -> bool:
    ta, tb = _type(a), _type(b)
    if {ta, tb} == {"datetime", "string"}:
        a2 = _parse_iso(a) if ta == "string" else a
        b2 = _parse_iso(b) if tb == "string" else b
        return a2 is not None and b2 is not None and a2.epoch == b2.epoch
    if ta != tb:
        return False
    if ta == "list":
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=False))
    if ta == "object":
        return _json_text(a) == _json_text(b)
    if ta == "number":
        return _float(a) == _float(b)
    return a is b if ta == "undefined" else a == b


# ASCII digits only (`\d` would take other scripts' digits, which number()/datetime() refuse).
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?(Z|[+-]\d{2}:?\d{2})?", re.ASCII
)


def _in_range(epoch: float) -> DateTime | None:
    return DateTime(epoch) if MIN_EPOCH <= epoch < MAX_EPOCH else None


def _parse_iso(s: str) -> DateTime | None:
    m = _ISO.fullmatch(s)
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    offset = 0
    if zone and zone != "Z":
        oh, om = int(zone[1:3]), int(zone[-2:])
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * 60 * (-1 if zone[0] == "-" else 1)
    try:
        dt = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), tzinfo=UTC)
    except ValueError:
        return None
    whole = (dt - EPOCH) // timedelta(seconds=1) - offset
    return _in_range(whole + int((fraction or "").ljust(3, "0")[:3]) / 1000)  # kept to the millisecond


def _ordered(a: object, b: object) -> tuple[object, object] | None:
    ta, tb = _type(a), _type(b)
    if ta == tb == "number":
        return _float(a), _float(b)
    if ta == tb and ta in ("string", "datetime"):
        return a, b
    if {ta, tb} == {"datetime", "string"}:
        a2 = _parse_iso(a) if ta == "string" else a
        b2 = _parse_iso(b) if tb == "string" else b
        if a2 is not None and b2 is not None:
            return a2, b2
    return None


_NUMBER_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def to_number(v: object) -> object:
    t = _type(v)
    if t == "number":
        return v
    if t == "boolean":
        return 1.0 if v else 0.0
    if t == "datetime":
        return float(v.epoch)
    if t == "string" and _NUMBER_TEXT.fullmatch(v):
        x = float(v)
        return x if math.isfinite(x) else UNDEFINED
    return UNDEFINED


def _number_text(x: int | float) -> str:
    """JavaScript's Number#toString for a finite double (ECMA-262 Number::toString, radix 10)."""
    x = _float(x)
    if x == 0:
        return "0"  # also -0
    if x < 0:
        return "-" + _number_text(-x)
    _, digit_tuple, exp = Decimal(repr(x)).normalize().as_tuple()  # repr = the shortest round-trip digits
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), exp + len(digits)  # x = 0.<digits> * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    return digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def to_string(v: object) -> object:
    t = _type(v)
    if t in ("string", "undefined", "null"):
        return v
    if t == "number":
        return _number_text(v)
    if t == "boolean":
        return "true" if v else "false"
    if t == "datetime":
        return (EPOCH + timedelta(seconds=math.floor(v.epoch))).strftime("%Y-%m-%dT%H:%M:%S")  # truncated
    return UNDEFINED


def to_boolean(v: object) -> bool:
    return not (v is UNDEFINED or v is None or v is False or v == "" or v == "false" or (_num(v) and _float(v) == 0))


def _datetime(v: object) -> object:
    t = _type(v)
    if t == "number":
        x = _float(v)
        return (_in_range(x / 1000 if x >= 1e10 else x) if math.isfinite(x) else None) or UNDEFINED
    if t == "string":
        return _parse_iso(v) or UNDEFINED
    return v if t == "datetime" else UNDEFINED


def _round(x: float) -> float:
    """JavaScript's Math.round: halves go up (-2.5 -> -2); exact, no floor(x + 0.5) rounding error."""
    f = math.floor(x)
    return float(f + 1 if x - f >= 0.5 else f)


def _arith(op: str, a: object, b: object) -> object:
    if op == "+" and _type(a) == _type(b) == "string":
        return a + b
    if not (_num(a) and _num(b)):
        return UNDEFINED
    x, y = _float(a), _float(b)
    try:
        r = (
            x + y
            if op == "+"
            else x - y
            if op == "-"
            else x * y
            if op == "*"
            else x / y
            if op == "/"
            else math.fmod(x, y)
        )
    except (ZeroDivisionError, ValueError):  # x / 0, x % 0
        return UNDEFINED
    return r if math.isfinite(r) else UNDEFINED


def _binary(op: str, a: object, b: object) -> object:
    if op == "==":
        return _eq(a, b)
    if op == "!=":
        return not _eq(a, b)
    if op in (">", ">=", "<", "<="):
        pair = _ordered(a, b)
        if pair is None:
            return UNDEFINED
        x, y = pair
        return {">": x > y, ">=": x >= y, "<": x < y, "<=": x <= y}[op]
    if op == "in":
        ta, tb = _type(a), _type(b)
        if tb == "string":
            return a in b if ta == "string" else UNDEFINED
        if tb == "list" and ta in _SCALARS:
            return any(_eq(a, item) for item in b)
        return UNDEFINED
    return _arith(op, a, b)


def _call(name: str, args: list[object]) -> object:
    x = args[0]
    if name == "defined":
        return x is not UNDEFINED
    if name == "number":
        return to_number(x)
    if name == "string":
        return to_string(x)
    if name == "boolean":
        return to_boolean(x)
    if name == "datetime":
        return _datetime(x)
    if name in ("floor", "ceil", "round"):
        if not _num(x):
            return UNDEFINED
        y = _float(x)
        return float(math.floor(y)) if name == "floor" else float(math.ceil(y)) if name == "ceil" else _round(y)
    if not all(_type(a) == "string" for a in args):
        return UNDEFINED
    if name == "has_prefix":
        return x.startswith(args[1])
    if name == "has_suffix":
        return x.endswith(args[1])
    return x.lower() if name == "lower" else x.upper()


def _field(event: Event, name: str) -> object:
    if name == "time":
        return DateTime(event.time_ms / 1000)
    return event.distinct_id if name == "distinct_id" else event.insert_id


def _eval(node: tuple, event: Event) -> object:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":  # a list is JSON: undefined -> null, datetime -> its text
        return [
            None if v is UNDEFINED else to_string(v) if isinstance(v, DateTime) else v
            for v in (_eval(n, event) for n in node[1])
        ]
    if kind == "get":
        return event.properties.get(node[1], UNDEFINED)
    if kind == "field":
        return _field(event, node[1])
    if kind == "behavior":  # profile expressions only (_ProfileRow)
        return event.behaviors.get(node[1], 0)
    if kind == "user":  # join selectors only (_JoinRow)
        return event.user_properties.get(node[1], UNDEFINED)
    if kind == "call":
        return _call(node[1], [_eval(n, event) for n in node[2]])
    if kind == "neg":
        v = _eval(node[1], event)
        return -_float(v) if _num(v) else UNDEFINED
    if kind == "not":
        v = _eval(node[1], event)
        return True if v is UNDEFINED else (not v) if isinstance(v, bool) else UNDEFINED
    op = node[1]
    if op in ("and", "or"):  # only boolean true counts as true
        a, b = _eval(node[2], event) is True, _eval(node[3], event) is True
        return (a and b) if op == "and" else (a or b)
    return _binary(op, _eval(node[2], event), _eval(node[3], event))


# ------------------------------------------------------------------------------------------- public API
def evaluate(text: str, event: Event) -> object:
    """The value of the expression for one stored event (`_common.Event`)."""
    return _eval(parse(text), event)


def where_matches(text: str | None, event: Event) -> bool:
    """A `where` keeps an event only when the expression is boolean true. Empty/None `where` keeps all."""
    return True if not text else evaluate(text, event) is True


def segment_keys(value: object) -> list[str]:
    items = value if _type(value) == "list" else [value]
    keys: list[str] = []
    for item in items:
        key = to_string(item) if _type(item) not in ("list", "object") else UNDEFINED
        if isinstance(key, str) and key not in keys:
            keys.append(key)
    return keys


def on_keys(text: str, event: Event) -> list[str]:
    return segment_keys(evaluate(text, event))


def as_number(text: str, event: Event) -> float | None:
    """The numeric value of the expression, or None when it is not a number (no implicit casts)."""
    v = evaluate(text, event)
    return _float(v) if _num(v) else None


# --------------------------------------------------------------------------------- profile expressions
# Added for the /engage oracle (tests/oracle/engage.py); the event functions above are unchanged (the two
# "behavior" branches in _kinds/_eval are reached only by trees that parse_profile builds).
#
# A profile expression (/engage `where`, alias `selector`) reads a profile, not an event:
# - `properties["x"]` and its alias `user["x"]` (semantics-2 §13.2) read the profile's property dict
#   (missing -> undefined, JSON null -> null). No key is special: `properties["time"]` or
#   `properties["distinct_id"]` are ordinary profile properties here.
# - `behaviors["name"]` is the profile's count for the /engage behaviour `name` (a number; 0 when the
#   caller gives no count for it). Which names are defined is the caller's check (`behavior_names`).
# - `event[...]` is an ExprError (a 400).
# Every other rule (types, casts, operators, and/or/not, functions, static checks) is the event one.
class _ProfileParser(_Parser):
    def primary(self) -> tuple:
        kind, v = self.peek()
        if kind != "name" or v not in _ACCESSORS:
            return super().primary()
        self.i += 1
        self.take("op", "[")
        key = self.take("lit")
        if not isinstance(key, str):
            raise ExprError(f"{v}[...] needs a string key")
        self.take("op", "]")
        if v == "event":
            raise ExprError("event[...] is not available in a profile expression")
        return ("behavior", key) if v == "behaviors" else ("get", key)


@dataclass(frozen=True)
class _ProfileRow:
    """What _eval reads for a profile: `.properties` (the `get` nodes) and `.behaviors` (name -> count)."""

    properties: dict
    behaviors: dict


@lru_cache(maxsize=1024)
def parse_profile(text: str) -> tuple:
    """The syntax tree of a profile expression, after the same static checks as `parse`."""
    return _checked(_ProfileParser, text)


def _behavior_refs(node: object, out: set[str]) -> set[str]:
    """Walks the tree (nodes, and the tuples of list items / call arguments inside them)."""
    if isinstance(node, tuple):
        if len(node) == 2 and node[0] == "behavior":
            out.add(node[1])
        else:
            for child in node:
                _behavior_refs(child, out)
    return out


def behavior_names(text: str) -> frozenset[str]:
    """The behaviour names a profile expression reads through `behaviors["..."]`."""
    return frozenset(_behavior_refs(parse_profile(text), set()))


def evaluate_profile(text: str, properties: dict, behaviors: dict | None = None) -> object:
    """The value of a profile expression for one profile: its property dict and its behaviour counts."""
    return _eval(parse_profile(text), _ProfileRow(properties, behaviors or {}))


def profile_where_matches(text: str | None, properties: dict, behaviors: dict | None = None) -> bool:
    """A profile `where` keeps a profile only when the expression is boolean true. Empty/None keeps all."""
    return True if not text else evaluate_profile(text, properties, behaviors) is True


# ----------------------------------------------------------------------------------- cohort helpers
# Added for the cohort oracle (tests/oracle/cohorts.py): thin public wrappers around the rules above; nothing
# above calls them, so the expression semantics are unchanged.
_CASTS = {"number": to_number, "string": to_string, "boolean": to_boolean}


def cast(kind: str, value: object) -> object:
    """`number(value)`, `string(value)`, `boolean(value)` or `datetime(value)` as the expression functions."""
    if kind == "datetime":
        return _datetime(value)
    return _CASTS[kind](value)


def compare(op: str, a: object, b: object) -> object:
    """The value of `a <op> b` for op in == != > >= < <= in: a boolean, or UNDEFINED (ordering/`in` only)."""
    if op not in _CMP and op != "in":
        raise ValueError(f"not a comparison: {op!r}")
    return _binary(op, a, b)


def _token_starts(text: str) -> tuple[list[int], int | None]:
    """Character offsets of the tokens (plus the end of the text), and the offset of a lexing error if any."""
    starts, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            return starts, pos
        try:
            if m.lastgroup == "num":
                _number_literal(m.group())
            elif m.lastgroup == "str":
                _unquote(m.group())
        except ExprError:
            return starts, m.start()
        if m.lastgroup != "ws":
            starts.append(m.start())
        pos = m.end()
    starts.append(len(text))
    return starts, None


def error_position(text: str, *, profile: bool = False) -> int | None:
    """Where parsing `text` (an event expression, or a profile one with profile=True) fails, as a 0-based
    character offset: a bad character or literal; the token a required one was expected at (the end of the
    text when it ran out); else the start of the innermost primary being parsed (an unknown name, a
    function with the wrong number of arguments, an accessor not available in this context). None when the
    text parses, when the only errors are the static type checks made after parsing (they concern a whole
    sub-expression), or when the text is over the length limit."""
    if len(text) > MAX_LENGTH:
        return None
    starts, bad = _token_starts(text)
    if bad is not None:
        return bad

    class Tracking(_ProfileParser if profile else _Parser):
        def __init__(self, text: str):
            super().__init__(text)
            self.open: list[int] = []  # token index of every primary being parsed
            self.failed_take: int | None = None

        def primary(self) -> tuple:
            self.open.append(self.i)
            node = super().primary()
            self.open.pop()
            return node

        def take(self, kind: str, value: object = None) -> object:
            at = self.i
            try:
                return super().take(kind, value)
            except ExprError:
                if self.failed_take is None:
                    self.failed_take = at
                raise

    parser = Tracking(text)
    try:
        parser.parse()
    except ExprError:
        index = parser.failed_take if parser.failed_take is not None else parser.open[-1] if parser.open else 0
        return starts[min(index, len(starts) - 1)]
    return None


# ------------------------------------------------------------------------------------ join selectors
# Added for the JQL oracle (tests/oracle/jql.py): a `join(...)` selector reads the event as an event
# expression does, plus `user["x"]`, the property of the event's user profile (undefined when the user
# has no live profile). The "user" branches in _kinds/_eval are reached only by trees parse_join builds.
class _JoinParser(_Parser):
    def primary(self) -> tuple:
        kind, v = self.peek()
        if kind != "name" or v != "user":
            return super().primary()
        self.i += 1
        self.take("op", "[")
        key = self.take("lit")
        if not isinstance(key, str):
            raise ExprError("user[...] needs a string key")
        self.take("op", "]")
        return ("user", key)


@dataclass(frozen=True)
class _JoinRow:
    """An event (what _eval reads of it) beside its user's profile properties."""

    event: Event
    user_properties: dict

    def __getattr__(self, name: str) -> object:
        return getattr(self.event, name)


@lru_cache(maxsize=1024)
def parse_join(text: str) -> tuple:
    return _checked(_JoinParser, text)


def join_where_matches(text: str | None, event: Event, user_properties: dict | None) -> bool:
    """A join selector keeps an event only when the expression is boolean true (empty keeps all)."""
    return True if not text else _eval(parse_join(text), _JoinRow(event, user_properties or {})) is True
