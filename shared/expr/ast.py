"""The source AST: what the text says, before any meaning is attached.

Frozen dataclasses; every node has a `span` (0-based [start, end) character offsets).
`check()` turns this tree into the typed tree of `shared.expr.typed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Accessor",
    "Binary",
    "BinaryOp",
    "BoolLit",
    "Call",
    "ListLit",
    "Node",
    "NullLit",
    "NumberLit",
    "Span",
    "StringLit",
    "Unary",
]

BinaryOp = Literal["or", "and", "==", "!=", ">", ">=", "<", "<=", "in", "+", "-", "*", "/", "%"]
AccessorSource = Literal["properties", "event", "user", "behaviors"]


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class StringLit:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class NumberLit:
    text: str  # as written; check() converts it
    span: Span


@dataclass(frozen=True, slots=True)
class BoolLit:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class NullLit:
    span: Span


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Node, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Accessor:
    source: AccessorSource
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Node, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class Unary:
    op: Literal["not", "-"]
    operand: Node
    span: Span


@dataclass(frozen=True, slots=True)
class Binary:
    op: BinaryOp
    left: Node
    right: Node
    span: Span


Node = StringLit | NumberLit | BoolLit | NullLit | ListLit | Accessor | Call | Unary | Binary
