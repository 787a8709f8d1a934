"""Recursive-descent parser for the grammar of semantics.md §3.2 (precedence low -> high).

    expr      := or_expr
    or_expr   := and_expr ( "or" and_expr )*
    and_expr  := not_expr ( "and" not_expr )*
    not_expr  := "not" not_expr | cmp_expr
    cmp_expr  := add_expr ( ("=="|"!="|">"|">="|"<"|"<="|"in") add_expr )?
    add_expr  := mul_expr ( ("+"|"-") mul_expr )*
    mul_expr  := unary ( ("*"|"/"|"%") unary )*
    unary     := "-" unary | primary
    primary   := accessor | call | literal | list | "(" expr ")"
    accessor  := ("properties"|"user"|"event"|"behaviors") "[" STRING "]"
    call      := NAME "(" [ expr ("," expr)* ] ")"
    literal   := STRING | NUMBER | "true" | "false" | "null"
    list      := "[" [ expr ("," expr)* ] "]"

Comparisons do not chain (`a == b == c` is a syntax error). Limits: `MAX_TEXT` characters
and `MAX_DEPTH` nested constructs, checked before any work that could grow with them
(a chain of `and`s or of `or`s counts as one level: check() makes it one n-ary node).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import cast

from footfall.shared.expr.ast import (
    Accessor,
    AccessorSource,
    Binary,
    BinaryOp,
    BoolLit,
    Call,
    ListLit,
    Node,
    NullLit,
    NumberLit,
    Span,
    StringLit,
    Unary,
)
from footfall.shared.expr.errors import ExprLimitError, ExprSyntaxError
from footfall.shared.expr.lexer import tokenize
from footfall.shared.expr.tokens import Token, TokenKind

__all__ = ["MAX_DEPTH", "MAX_TEXT", "parse_expr"]

MAX_TEXT = 4096
MAX_DEPTH = 64
ACCESSORS = frozenset({"properties", "event", "user", "behaviors"})
_CMP_OPS = frozenset({"==", "!=", ">", ">=", "<", "<="})


def parse_expr(text: str) -> Node:
    """Parse an expression; raises `ExprError` (syntax or limit) on bad input."""
    if not isinstance(text, str):
        raise TypeError("parse_expr takes a str")
    if len(text) > MAX_TEXT:
        raise ExprLimitError(f"longer than {MAX_TEXT} characters")
    if not text.strip():
        raise ExprSyntaxError(len(text), "an expression", "end of expression")
    return _Parser(tokenize(text)).parse()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._i = 0
        self._depth = 0
        self._heights: dict[int, int] = {}  # id(node) -> height, for left-deep operator chains

    # -- token helpers -------------------------------------------------------------------------
    @property
    def _tok(self) -> Token:
        return self._tokens[self._i]

    def _advance(self) -> Token:
        tok = self._tokens[self._i]
        if tok.kind is not TokenKind.END:
            self._i += 1
        return tok

    def _is(self, kind: TokenKind, text: str | None = None) -> bool:
        tok = self._tok
        return tok.kind is kind and (text is None or tok.text == text)

    def _expect(self, kind: TokenKind, expected: str) -> Token:
        if not self._is(kind):
            self._fail(expected)
        return self._advance()

    def _fail(self, expected: str, hint: str | None = None) -> None:
        tok = self._tok
        raise ExprSyntaxError(tok.start, expected, tok.describe(), hint=hint or _hint(tok))

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ExprLimitError(f"nested deeper than {MAX_DEPTH} levels", self._tok.start)

    def _leave(self) -> None:
        self._depth -= 1

    def _tall(self, node: Node, *children: Node) -> Node:
        """Record the node's height: a chain like `1+1+1+...` is a deep tree too."""
        height = 1 + max((self._heights.get(id(c), 1) for c in children), default=0)
        if height > MAX_DEPTH:
            raise ExprLimitError(f"nested deeper than {MAX_DEPTH} levels", node.span.start)
        self._heights[id(node)] = height
        return node

    def _binary(self, op: str, left: Node, right: Node) -> Node:
        node = Binary(cast(BinaryOp, op), left, right, Span(left.span.start, right.span.end))
        return self._tall(node, left, right)

    # -- grammar -------------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self._expr()
        if not self._is(TokenKind.END):
            self._fail("an operator or end of expression")
        return node

    def _expr(self) -> Node:
        self._enter()
        try:
            return self._or()
        finally:
            self._leave()

    def _or(self) -> Node:
        return self._chain("or", self._and)

    def _and(self) -> Node:
        return self._chain("and", self._not)

    def _chain(self, op: str, operand: Callable[[], Node]) -> Node:
        """`a or b or c`: a left-deep tree whose height counts once, since check() flattens
        it into one n-ary node (long UI-made `or` lists stay within the depth limit)."""
        operands = [operand()]
        while self._is(TokenKind.KEYWORD, op):
            self._advance()
            operands.append(operand())
        node = operands[0]
        height = 1 + max(self._heights.get(id(o), 1) for o in operands)
        for right in operands[1:]:
            node = Binary(cast(BinaryOp, op), node, right, Span(node.span.start, right.span.end))
            self._heights[id(node)] = height
        if height > MAX_DEPTH:
            raise ExprLimitError(f"nested deeper than {MAX_DEPTH} levels", node.span.start)
        return node

    def _not(self) -> Node:
        if self._is(TokenKind.KEYWORD, "not"):
            start = self._advance().start
            self._enter()
            try:
                operand = self._not()
            finally:
                self._leave()
            return self._tall(Unary("not", operand, Span(start, operand.span.end)), operand)
        return self._cmp()

    def _cmp(self) -> Node:
        left = self._add()
        tok = self._tok
        if (tok.kind is TokenKind.OP and tok.text in _CMP_OPS) or (tok.kind is TokenKind.KEYWORD and tok.text == "in"):
            self._advance()
            right = self._add()
            return self._binary(tok.text, left, right)
        return left

    def _add(self) -> Node:
        left = self._mul()
        while self._tok.kind is TokenKind.OP and self._tok.text in ("+", "-"):
            op = self._advance().text
            right = self._mul()
            left = self._binary(op, left, right)
        return left

    def _mul(self) -> Node:
        left = self._unary()
        while self._tok.kind is TokenKind.OP and self._tok.text in ("*", "/", "%"):
            op = self._advance().text
            right = self._unary()
            left = self._binary(op, left, right)
        return left

    def _unary(self) -> Node:
        if self._is(TokenKind.OP, "-"):
            start = self._advance().start
            self._enter()
            try:
                operand = self._unary()
            finally:
                self._leave()
            return self._tall(Unary("-", operand, Span(start, operand.span.end)), operand)
        return self._primary()

    def _primary(self) -> Node:
        tok = self._tok
        kind = tok.kind
        if kind is TokenKind.STRING:
            self._advance()
            return StringLit(tok.text, Span(tok.start, tok.end))
        if kind is TokenKind.NUMBER:
            self._advance()
            return NumberLit(tok.text, Span(tok.start, tok.end))
        if kind is TokenKind.KEYWORD and tok.text in ("true", "false"):
            self._advance()
            return BoolLit(tok.text == "true", Span(tok.start, tok.end))
        if kind is TokenKind.KEYWORD and tok.text == "null":
            self._advance()
            return NullLit(Span(tok.start, tok.end))
        if kind is TokenKind.LPAREN:
            self._advance()
            inner = self._expr()
            self._expect(TokenKind.RPAREN, "')'")
            return inner
        if kind is TokenKind.LBRACKET:
            self._advance()
            items = self._items(TokenKind.RBRACKET, "']'")
            end = self._advance().end
            return self._tall(ListLit(items, Span(tok.start, end)), *items)
        if kind is TokenKind.NAME:
            self._advance()
            if tok.text in ACCESSORS and self._is(TokenKind.LBRACKET):
                self._advance()
                if self._is(TokenKind.NAME) or self._is(TokenKind.KEYWORD):
                    bare = self._tok.text
                    self._fail("a quoted property name", f'property names are quoted: {tok.text}["{bare}"]')
                name = self._expect(TokenKind.STRING, "a quoted property name")
                end = self._expect(TokenKind.RBRACKET, "']'").end
                return Accessor(cast(AccessorSource, tok.text), name.text, Span(tok.start, end))
            if self._is(TokenKind.LPAREN):
                self._advance()
                args = self._items(TokenKind.RPAREN, "')'")
                end = self._advance().end
                return self._tall(Call(tok.text, args, Span(tok.start, end), Span(tok.start, tok.end)), *args)
            if tok.text in ACCESSORS:
                self._fail("'['")
            self._i -= 1  # the error points at the word itself
            if self._tokens[self._i + 1].kind is TokenKind.LBRACKET:
                close = difflib.get_close_matches(tok.text, sorted(ACCESSORS), n=1, cutoff=0.6)
                accessor = f"did you mean {close[0]}[...]?" if close else "values are read with properties[...]"
                self._fail("properties[...], event[...], user[...], behaviors[...] or a function call", accessor)
            # A bare word where a value belongs: most often a text value without its quotes.
            self._fail("an expression", _hint(tok) or _unquoted(tok.text))
        self._fail("an expression")
        raise AssertionError("unreachable")  # pragma: no cover

    def _items(self, closer: TokenKind, closer_text: str) -> tuple[Node, ...]:
        """Comma-separated expressions up to (not consuming) `closer`."""
        self._enter()
        try:
            items: list[Node] = []
            if self._is(closer):
                return ()
            while True:
                items.append(self._expr())
                if self._is(TokenKind.COMMA):
                    self._advance()
                    continue
                if not self._is(closer):
                    self._fail(f"',' or {closer_text}")
                return tuple(items)
        finally:
            self._leave()


def _unquoted(word: str) -> str:
    shown = word if len(word) <= 40 else word[:40] + "..."
    return f'text values are quoted: "{shown}"; functions are called with (...)'


def _hint(tok: Token) -> str | None:
    """The likely mistake behind an unexpected token, when it is a common one."""
    if tok.kind is TokenKind.NAME and tok.text.lower() in ("and", "or", "not", "in", "true", "false", "null"):
        return f"keywords are lowercase: {tok.text.lower()}"
    return None
