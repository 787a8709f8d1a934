"""`check_expr`: attach meaning to a parsed tree.

Resolves accessors (which properties live in their own columns), function names and
arity, folds `datetime("...")` literals, and infers the set of runtime kinds of every
node (semantics.md §3.3; see `infer_kinds`). Raises `ExprError` for anything that has
no meaning: unknown functions, wrong arity, `user[...]`/`behaviors[...]` where no
profile is joined, `and`/`or` operands that can never be boolean.

Three contexts say what the accessors read:

* `events` (the default): `properties["x"]` / `event["x"]` read the event; `time`,
  `distinct_id` and `$insert_id` are its columns; `user[...]` and `behaviors[...]` are a 400.
* `profiles` (/engage `where`): `properties["x"]` and its alias `user["x"]` read the
  profile's `properties` JSON; no key is special (`properties["time"]` is the profile
  property "time", not an event time); `behaviors["name"]` is the profile's count for a
  behaviour the request defines (`behaviors=`), a number (`Count`); an undefined name and
  the event-only accessor `event[...]` are a 400. Every other rule is the event one.
* `join` (JQL join selectors): the event context, plus `user["x"]`, the event's user
  profile property (`UserProp`, compiled over the profile text the query joins).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

from footfall.shared.expr import ast
from footfall.shared.expr.errors import ExprTypeError
from footfall.shared.expr.typed import (
    SCALARS,
    Apply,
    B,
    Column,
    Const,
    Count,
    D,
    Kind,
    Kinds,
    L,
    ListOf,
    N,
    O,
    Op,
    Prop,
    S,
    TNode,
    U,
    UserProp,
    Z,
)

__all__ = [
    "DATETIME_MAX",
    "DATETIME_MIN",
    "FUNCTIONS",
    "ISO_DATETIME",
    "MILLIS_FROM",
    "check_expr",
    "epoch_seconds",
    "infer_kinds",
    "parse_iso",
]

Context = Literal["events", "profiles", "join"]

# name -> (op, arity)
FUNCTIONS: dict[str, tuple[Op, int]] = {
    "defined": (Op.DEFINED, 1),
    "number": (Op.NUMBER, 1),
    "string": (Op.STRING, 1),
    "boolean": (Op.BOOLEAN, 1),
    "datetime": (Op.DATETIME, 1),
    "floor": (Op.FLOOR, 1),
    "round": (Op.ROUND, 1),
    "ceil": (Op.CEIL, 1),
    "has_prefix": (Op.HAS_PREFIX, 2),
    "has_suffix": (Op.HAS_SUFFIX, 2),
    "lower": (Op.LOWER, 1),
    "upper": (Op.UPPER, 1),
}
_BINARY: dict[str, Op] = {op.value: op for op in Op if op.value in ast.BinaryOp.__args__}  # type: ignore[attr-defined]

# Properties that are columns of the events table, by accessor.
_COLUMNS: dict[str, dict[str, tuple[str, Kind]]] = {
    "properties": {
        "time": ("time", Kind.DATETIME),
        "distinct_id": ("distinct_id", Kind.STRING),
        "$insert_id": ("insert_id", Kind.STRING),
    },
    "event": {
        "time": ("time", Kind.DATETIME),
        "$time": ("time", Kind.DATETIME),
        "distinct_id": ("distinct_id", Kind.STRING),
        "$distinct_id": ("distinct_id", Kind.STRING),
        "$insert_id": ("insert_id", Kind.STRING),
    },
}

# ISO dates accepted by datetime("...") and where a string meets a datetime. Naive means UTC;
# offsets up to 23:59; the instant (after the offset) must lie in [DATETIME_MIN, DATETIME_MAX).
ISO_DATETIME = re.compile(
    r"((?:1[89]|2[0-3])\d\d)-(\d\d)-(\d\d)"  # date
    r"(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?)?"  # optional time, seconds, fraction
    r"(Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?",  # optional zone
    re.ASCII,
)
# The range that DateTime64(3) holds; outside it datetime() is undefined.
DATETIME_MIN = -2208988800.0  # 1900-01-01
DATETIME_MAX = 10413792000.0  # 2300-01-01
MILLIS_FROM = 1e10  # datetime(n): n >= 1e10 is milliseconds (decisions.md, `time` unit)


def check_expr(tree: ast.Node, *, context: Context = "events", behaviors: Collection[str] = ()) -> TNode:
    """Resolve and type `tree`. `context` is what it reads: an event (`events`), a profile
    (`profiles`, where `behaviors` names the behaviour counts `behaviors["..."]` may read),
    or an event beside its user's profile (`join`)."""
    if context not in ("events", "profiles", "join"):
        raise ValueError(f"unknown expression context {context!r}")
    if behaviors and context != "profiles":
        raise ValueError("behaviour counts exist in the profile context only")
    return _Checker(context, frozenset(behaviors)).node(tree)


def parse_iso(text: str) -> float | None:
    """Epoch seconds (millisecond precision) of an ISO date/datetime string, or None."""
    m = ISO_DATETIME.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        tz = UTC
        if zone and zone != "Z":
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
        value = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), tzinfo=tz)
    except ValueError:
        return None
    millis = int((frac or "0").ljust(3, "0")[:3])
    seconds = value.timestamp() + millis / 1000
    if not DATETIME_MIN <= seconds < DATETIME_MAX:
        return None
    return seconds


def epoch_seconds(value: float) -> float:
    """datetime(<number>): epoch seconds, or milliseconds from 1e10 on (the import rule)."""
    return value / 1000 if value >= MILLIS_FROM else value


def _pairs(a: Kinds, b: Kinds) -> Iterable[tuple[Kind, Kind]]:
    return ((x, y) for x in a for y in b)


def infer_kinds(op: Op, args: tuple[Kinds, ...]) -> Kinds:
    """The kinds `op` can produce from arguments of the given kinds (semantics §3.3)."""
    out: set[Kind] = set()
    x = args[0]
    match op:
        case Op.AND | Op.OR | Op.EQ | Op.NE | Op.DEFINED | Op.BOOLEAN:
            out.add(B)
        case Op.NOT:
            out.add(B)
            if x - {B, U}:
                out.add(U)
        case Op.NUMBER:
            if x & {N, B, D, S}:
                out.add(N)
            if x & {U, Z, S, L, O}:
                out.add(U)
        case Op.STRING:
            if x & {S, N, B, D}:
                out.add(S)
            if x & {U, L, O}:
                out.add(U)
            out |= x & {Z}
        case Op.DATETIME:
            if x & {S, N, D}:
                out.add(D)
            if x - {D}:
                out.add(U)
        case Op.FLOOR | Op.ROUND | Op.CEIL | Op.NEG:
            if N in x:
                out.add(N)
            if x - {N}:
                out.add(U)
        case Op.LOWER | Op.UPPER:
            if S in x:
                out.add(S)
            if x - {S}:
                out.add(U)
        case Op.HAS_PREFIX | Op.HAS_SUFFIX:
            for p in _pairs(x, args[1]):
                out.add(B if p == (S, S) else U)
        case Op.SUB | Op.MUL | Op.DIV | Op.MOD:
            for p in _pairs(x, args[1]):
                out |= {N, U} if p == (N, N) else {U}
        case Op.ADD:
            for p in _pairs(x, args[1]):
                out |= {N, U} if p == (N, N) else {S} if p == (S, S) else {U}
        case Op.GT | Op.GE | Op.LT | Op.LE:
            for p in _pairs(x, args[1]):
                if p in ((N, N), (S, S), (D, D)):
                    out.add(B)
                elif p in ((D, S), (S, D)):
                    out |= {B, U}
                else:
                    out.add(U)
        case Op.IN:
            for p in _pairs(x, args[1]):
                out.add(B if p == (S, S) or (p[0] in SCALARS and p[1] == L) else U)
    return frozenset(out)


def _operands(node: ast.Binary) -> list[ast.Node]:
    """The operands of a left-deep chain of one `and`/`or`, gathered without recursion."""
    out: list[ast.Node] = []
    current: ast.Node = node
    while isinstance(current, ast.Binary) and current.op == node.op:
        out.append(current.right)
        current = current.left
    out.append(current)
    return out[::-1]


class _Checker:
    def __init__(self, context: Context, behaviors: frozenset[str] = frozenset()) -> None:
        self.context = context
        self.behaviors = behaviors

    def node(self, node: ast.Node) -> TNode:
        match node:
            case ast.StringLit(value, span):
                return Const(S, value, span)
            case ast.NumberLit(text, span):
                number = float(text)
                if not math.isfinite(number):
                    raise ExprTypeError(f"number {text[:20]!r} is out of range", span.start)
                return Const(N, number, span)
            case ast.BoolLit(value, span):
                return Const(B, value, span)
            case ast.NullLit(span):
                return Const(Z, None, span)
            case ast.ListLit(items, span):
                return ListOf(tuple(self.node(i) for i in items), span)
            case ast.Accessor(source, name, span):
                return self.accessor(source, name, span)
            case ast.Call():
                return self.call(node)
            case ast.Unary(op, operand, span):
                arg = self.node(operand)
                top = Op.NOT if op == "not" else Op.NEG
                return Apply(top, (arg,), infer_kinds(top, (arg.kinds,)), span)
            case ast.Binary(op, left, right, span):
                bop = _BINARY[op]
                args = (
                    tuple(self.node(o) for o in _operands(node))
                    if op in ("and", "or")
                    else (
                        self.node(left),
                        self.node(right),
                    )
                )
                if bop in (Op.AND, Op.OR):
                    for arg in args:
                        if not arg.kinds & {B, U}:
                            raise ExprTypeError(f"the operands of '{op}' must be boolean", arg.span.start)
                return Apply(bop, args, infer_kinds(bop, tuple(a.kinds for a in args)), span)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def accessor(self, source: str, name: str, span: ast.Span) -> TNode:
        if self.context == "profiles":
            return self.profile_accessor(source, name, span)
        if source == "user" and self.context == "join":
            return UserProp(name, span)
        if source in ("user", "behaviors"):
            raise ExprTypeError(
                f"{source}[...] is not available in an event expression (use properties[...])", span.start
            )
        column = _COLUMNS.get(source, {}).get(name)
        if column is not None:
            return Column(column[0], column[1], span)
        return Prop(name, span)

    def profile_accessor(self, source: str, name: str, span: ast.Span) -> TNode:
        if source == "event":
            raise ExprTypeError(
                "event[...] is not available in a profile expression (use properties[...] or user[...])", span.start
            )
        if source == "behaviors":
            if name not in self.behaviors:
                shown = name if len(name) <= 40 else name[:40] + "..."
                raise ExprTypeError(f'behaviors["{shown}"] is not defined in behaviors', span.start)
            return Count(name, span)
        return Prop(name, span)  # properties[...] and user[...]: the profile's properties

    def call(self, node: ast.Call) -> TNode:
        known = FUNCTIONS.get(node.name)
        if known is None:
            names = ", ".join(sorted(FUNCTIONS))
            raise ExprTypeError(f"unknown function {node.name[:40]!r} (known: {names})", node.span.start)
        op, arity = known
        if len(node.args) != arity:
            plural = "s" if arity != 1 else ""
            raise ExprTypeError(f"{node.name}() takes {arity} argument{plural}, got {len(node.args)}", node.span.start)
        args = tuple(self.node(a) for a in node.args)
        if op is Op.DATETIME and isinstance(args[0], Const):
            return self.datetime_literal(args[0], node.span)
        return Apply(op, args, infer_kinds(op, tuple(a.kinds for a in args)), node.span)

    def datetime_literal(self, arg: Const, span: ast.Span) -> TNode:
        """`datetime("2024-01-01T00:00:00")` / `datetime(1704067200)` become constants."""
        seconds: float | None = None
        if arg.kind is S and isinstance(arg.value, str):
            seconds = parse_iso(arg.value)
            if seconds is None:
                raise ExprTypeError(
                    'datetime() needs an ISO date such as "2024-01-01" or "2024-01-01T00:00:00"',
                    arg.span.start,
                )
        elif arg.kind is N and isinstance(arg.value, float):
            seconds = epoch_seconds(arg.value)
            if not DATETIME_MIN <= seconds < DATETIME_MAX:
                raise ExprTypeError("datetime() of a number needs an epoch time between 1900 and 2300", arg.span.start)
        elif arg.kind is D:
            return arg
        if seconds is None:
            return Const(U, None, span)
        return Const(D, seconds, span)
