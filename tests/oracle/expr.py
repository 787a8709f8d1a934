"""Independent evaluator of the segmentation expression language (semantics.md §3.2 grammar, §3.3 rules).

Public: `evaluate(text, properties)`, `where_matches`, `on_keys`, `as_number`, `segment_keys(value)`,
`to_string(value)`, `UNDEFINED`, `DateTime`, `ExprError`.

Value model: undefined = UNDEFINED; null = None; bool; number = int | float (never bool); str; list; dict
(object); DateTime (epoch seconds, UTC).

Interpretations where §3 is silent:
- `properties["k"]` / `event["k"]` read the event's stored properties (missing -> undefined, JSON null -> null);
  `user[...]` and `behaviors[...]` are undefined (no profiles in the oracle).
- `defined(x)` is true iff x is not undefined (a JSON null is "set").
- `number("s")` accepts only `[+-]digits[.digits][e[+-]digits]` (also ".5" / "5."), no whitespace, no
  inf/nan/hex; objects, lists and datetimes are undefined. `string()` of a list/object is undefined,
  of a datetime `YYYY-MM-DDTHH:MM:SS` (UTC). Numbers print JS-style: integral values without ".0"
  (42.0 -> "42"), others as Python's shortest repr (1.5 -> "1.5").
- `boolean(x)`: false for false, 0, "", "false", null, undefined; true for everything else (incl. [] and {}).
- `==` on undefined == undefined is true (same "type"); lists/objects compare element-wise; 1 == 1.0.
- Ordering compares number/number, string/string (code points), datetime/datetime, and datetime with an
  ISO-8601 string (`YYYY-MM-DD[THH:MM[:SS[.f]]][Z|±HH:MM]`, naive = UTC); anything else is undefined.
- `in`: string in string = case-sensitive substring; x in list = membership by `==`; else undefined.
- `and`/`or` take booleans or undefined (undefined = false) and return a boolean; any other operand type
  raises ExprError (no short-circuit, so the type rule is checked on both sides).
- `round` rounds halves up (floor(x + 0.5)), as JavaScript's Math.round; floor/ceil/round return ints.
- `datetime(n)` takes epoch seconds (>= 1e10 means ms, as for import times); `datetime("iso")` as above.
- Extra functions: has_prefix, has_suffix, lower, upper (strings only, else undefined).
- String literals use double or single quotes with JSON-style escapes (\\" \\' \\\\ \\/ \\n \\t \\r \\b \\f \\uXXXX).
- Segment keys (`on_keys`): the value's string() form; a list yields one key per element (deduplicated, in
  order), elements that are null/lists/objects yield nothing; undefined, null and objects yield no key.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

__all__ = ["UNDEFINED", "DateTime", "ExprError", "evaluate", "where_matches", "on_keys", "as_number",
           "segment_keys", "to_string", "parse"]


class _Undefined:
    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


class ExprError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class DateTime:
    epoch: float  # seconds since the epoch, UTC


# ------------------------------------------------------------------------------------------------ lexer
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op>==|!=|>=|<=|[-+*/%<>()\[\],])
""", re.VERBOSE | re.DOTALL)

def _unquote(tok: str) -> str:
    """JSON escapes plus \\' for both quote styles (the body is rewritten to a JSON string body first)."""
    body = re.sub(r'\\(.)|"', lambda m: '\\"' if m.group(1) is None else
                  ("'" if m.group(1) == "'" else m.group(0)), tok[1:-1], flags=re.DOTALL)
    try:
        return json.loads(f'"{body}"', strict=False)
    except ValueError as exc:
        raise ExprError(f"bad string literal {tok}: {exc}") from None


def _lex(text: str) -> list[tuple[str, object]]:
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r} at {pos}")
        kind, tok = m.lastgroup, m.group()
        pos = m.end()
        if kind == "num":
            toks.append(("lit", float(tok) if any(c in tok for c in ".eE") else int(tok)))
        elif kind == "str":
            toks.append(("lit", _unquote(tok)))
        elif kind in ("name", "op"):
            toks.append((kind, tok))
    toks.append(("end", None))
    return toks


# ----------------------------------------------------------------------------------------------- parser
_ACCESSORS = {"properties", "user", "event", "behaviors"}
_FUNCS = {"defined": 1, "number": 1, "string": 1, "boolean": 1, "datetime": 1, "floor": 1, "round": 1,
          "ceil": 1, "has_prefix": 2, "has_suffix": 2, "lower": 1, "upper": 1}
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

    def cmp_expr(self) -> tuple:   # non-associative: at most one comparison
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
                return ("get", v, key)
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
    return _Parser(text).parse()


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


def _eq(a: object, b: object) -> bool:
    ta = _type(a)
    if ta != _type(b):
        return False
    if ta == "list":
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    return a is b if ta == "undefined" else a == b


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:\d{2})?")


def _parse_iso(s: str) -> DateTime | None:
    if not _ISO.fullmatch(s):
        return None
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return DateTime(dt.timestamp())


def _ordered(a: object, b: object) -> tuple[object, object] | None:
    ta, tb = _type(a), _type(b)
    if ta == tb and ta in ("number", "string", "datetime"):
        return a, b
    if {ta, tb} == {"datetime", "string"}:
        a2 = _parse_iso(a) if ta == "string" else a
        b2 = _parse_iso(b) if tb == "string" else b
        if a2 is not None and b2 is not None:
            return a2, b2
    return None


_NUMBER_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def to_number(v: object) -> object:
    t = _type(v)
    if t == "number":
        return v
    if t == "boolean":
        return 1.0 if v else 0.0
    if t == "string" and _NUMBER_TEXT.fullmatch(v):
        return float(v)
    return UNDEFINED


def _number_text(x: int | float) -> str:
    if isinstance(x, int):
        return str(x)
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    return repr(x)


def to_string(v: object) -> object:
    t = _type(v)
    if t in ("string", "undefined", "null"):
        return v
    if t == "number":
        return _number_text(v)
    if t == "boolean":
        return "true" if v else "false"
    if t == "datetime":
        return datetime.fromtimestamp(v.epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return UNDEFINED


def to_boolean(v: object) -> bool:
    return not (v is UNDEFINED or v is None or v is False or v == "" or v == "false"
                or (_num(v) and v == 0))


def _datetime(v: object) -> object:
    if _num(v):
        return DateTime(v / 1000 if v >= 1e10 else float(v))
    if _type(v) == "string":
        return _parse_iso(v) or UNDEFINED
    return v if _type(v) == "datetime" else UNDEFINED


def _logic(v: object, op: str) -> bool:
    if v is UNDEFINED:
        return False
    if isinstance(v, bool):
        return v
    raise ExprError(f"operand of '{op}' must be boolean or undefined, got {_type(v)}")


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
        if _type(a) == "string" and _type(b) == "string":
            return a in b
        if _type(b) == "list" and a is not UNDEFINED:
            return any(_eq(a, item) for item in b)
        return UNDEFINED
    if op == "+" and _type(a) == "string" and _type(b) == "string":
        return a + b
    if not (_num(a) and _num(b)):
        return UNDEFINED
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return UNDEFINED
    return a / b if op == "/" else math.fmod(a, b)


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
        return math.floor(x) if name == "floor" else math.ceil(x) if name == "ceil" else math.floor(x + 0.5)
    if not all(_type(a) == "string" for a in args):
        return UNDEFINED
    if name == "has_prefix":
        return x.startswith(args[1])
    if name == "has_suffix":
        return x.endswith(args[1])
    return x.lower() if name == "lower" else x.upper()


def _eval(node: tuple, props: dict) -> object:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return [_eval(n, props) for n in node[1]]
    if kind == "get":
        if node[1] in ("user", "behaviors"):
            return UNDEFINED
        return props.get(node[2], UNDEFINED)
    if kind == "call":
        return _call(node[1], [_eval(n, props) for n in node[2]])
    if kind == "neg":
        v = _eval(node[1], props)
        return -v if _num(v) else UNDEFINED
    if kind == "not":
        v = _eval(node[1], props)
        return True if v is UNDEFINED else (not v) if isinstance(v, bool) else UNDEFINED
    op = node[1]
    if op in ("and", "or"):
        a, b = _logic(_eval(node[2], props), op), _logic(_eval(node[3], props), op)
        return (a and b) if op == "and" else (a or b)
    return _binary(op, _eval(node[2], props), _eval(node[3], props))


# ------------------------------------------------------------------------------------------- public API
def evaluate(text: str, properties: dict) -> object:
    return _eval(parse(text), properties)


def where_matches(text: str | None, properties: dict) -> bool:
    """A `where` keeps an event only when the expression is boolean true. Empty/None `where` keeps all."""
    return True if not text else evaluate(text, properties) is True


def segment_keys(value: object) -> list[str]:
    items = value if _type(value) == "list" else [value]
    keys: list[str] = []
    for item in items:
        key = to_string(item) if _type(item) not in ("list", "object") else UNDEFINED
        if isinstance(key, str) and key not in keys:
            keys.append(key)
    return keys


def on_keys(text: str, properties: dict) -> list[str]:
    return segment_keys(evaluate(text, properties))


def as_number(text: str, properties: dict) -> float | None:
    """The numeric value of the expression, or None when it is not a number (no implicit casts)."""
    v = evaluate(text, properties)
    return float(v) if _num(v) else None
