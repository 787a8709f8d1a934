"""Tokens of the expression language."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["KEYWORDS", "Token", "TokenKind"]


class TokenKind(enum.Enum):
    STRING = "string"
    NUMBER = "number"
    NAME = "name"  # identifiers: accessor and function names
    KEYWORD = "keyword"  # and or not in true false null
    OP = "operator"  # == != > >= < <= + - * / %
    LPAREN = "'('"
    RPAREN = "')'"
    LBRACKET = "'['"
    RBRACKET = "']'"
    COMMA = "','"
    END = "end of expression"


KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str  # the decoded value for STRING, the source text otherwise
    start: int
    end: int

    def describe(self) -> str:
        """How an error message names this token (quoted source text, clipped)."""
        if self.kind is TokenKind.END:
            return "end of expression"
        if self.kind is TokenKind.STRING:
            return "a string"
        shown = self.text if len(self.text) <= 20 else self.text[:20] + "..."
        return repr(shown)
