"""The typed tree that `check()` produces and `compile` lowers.

Each node knows the set of runtime kinds its value can have (`kinds`). A property's
JSON type varies per event, so a property access can be any JSON kind; a literal has
exactly one. The compiler uses these sets to drop impossible branches; it never looks
at literal values to decide anything, so the SQL shape of an expression does not
depend on its literals.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from footfall.shared.expr.ast import Span

__all__ = [
    "ALL_JSON",
    "Apply",
    "Column",
    "Const",
    "Count",
    "Kind",
    "Kinds",
    "ListOf",
    "Op",
    "Prop",
    "TNode",
    "walk",
]


class Kind(enum.IntEnum):
    """Runtime kinds; the numbers are the codes the SQL uses (the `k` component)."""

    UNDEFINED = 0
    NULL = 1
    BOOLEAN = 2
    NUMBER = 3
    STRING = 4
    DATETIME = 5
    LIST = 6
    OBJECT = 7


Kinds = frozenset[Kind]

# One-letter names for kind sets, used by the checker and the lowering.
U, Z, B, N, S, D, L, O = (  # noqa: E741 - O is the object kind, as in the checker's tables
    Kind.UNDEFINED,
    Kind.NULL,
    Kind.BOOLEAN,
    Kind.NUMBER,
    Kind.STRING,
    Kind.DATETIME,
    Kind.LIST,
    Kind.OBJECT,
)
SCALARS: Kinds = frozenset({Z, B, N, S, D})
ALL_JSON: Kinds = frozenset({Kind.UNDEFINED, Kind.NULL, Kind.BOOLEAN, Kind.NUMBER, Kind.STRING, Kind.LIST, Kind.OBJECT})


class Op(enum.Enum):
    """Operators and functions after name resolution."""

    OR = "or"
    AND = "and"
    NOT = "not"
    EQ = "=="
    NE = "!="
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    IN = "in"
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MOD = "%"
    NEG = "neg"
    DEFINED = "defined"
    NUMBER = "number"
    STRING = "string"
    BOOLEAN = "boolean"
    DATETIME = "datetime"
    FLOOR = "floor"
    ROUND = "round"
    CEIL = "ceil"
    HAS_PREFIX = "has_prefix"
    HAS_SUFFIX = "has_suffix"
    LOWER = "lower"
    UPPER = "upper"


@dataclass(frozen=True, slots=True)
class Const:
    """A literal. `value` is str | float | bool | None; a datetime literal is epoch seconds."""

    kind: Kind
    value: str | float | bool | None
    span: Span

    @property
    def kinds(self) -> Kinds:
        return frozenset({self.kind})


@dataclass(frozen=True, slots=True)
class Prop:
    """A property stored in the `properties` JSON text: the event's, or in the profile
    context (`check_expr(..., context="profiles")`) the profile's."""

    name: str
    span: Span

    @property
    def kinds(self) -> Kinds:
        return ALL_JSON


@dataclass(frozen=True, slots=True)
class UserProp:
    """A property of the event's user profile, read beside the event: `user[...]` in a JQL
    join selector (`check_expr(..., context="join")`)."""

    name: str
    span: Span

    @property
    def kinds(self) -> Kinds:
        return ALL_JSON


@dataclass(frozen=True, slots=True)
class Column:
    """A property that lives in its own column (`time`, `distinct_id`, `$insert_id`)."""

    column: str  # a catalog name from shared.sql.ident
    kind: Kind
    span: Span

    @property
    def kinds(self) -> Kinds:
        return frozenset({self.kind})


@dataclass(frozen=True, slots=True)
class Count:
    """A profile's count for the /engage behaviour `name` (`behaviors["name"]`): a number
    that the query provides per profile (profile context only)."""

    name: str
    span: Span

    @property
    def kinds(self) -> Kinds:
        return frozenset({Kind.NUMBER})


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[TNode, ...]
    span: Span

    @property
    def kinds(self) -> Kinds:
        return frozenset({Kind.LIST})


@dataclass(frozen=True, slots=True)
class Apply:
    op: Op
    args: tuple[TNode, ...]
    kinds: Kinds
    span: Span


TNode = Const | Prop | UserProp | Column | Count | ListOf | Apply


def walk(tree: TNode) -> Iterator[TNode]:
    """Every node of `tree` (the root, then its operands and list items, depth first)."""
    stack: list[TNode] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Apply):
            stack.extend(node.args)
        elif isinstance(node, ListOf):
            stack.extend(node.items)
