"""Errors of the expression language; all are client errors (HTTP 400).

`ExprError` is the root. Every error carries the character offset (`position`, 0-based,
or None when the whole expression is at fault) and, for syntax errors, `expected`: a
short description of what the parser wanted there.
"""

from __future__ import annotations

from footfall.shared.errors import ParamError

__all__ = ["ExprError", "ExprLimitError", "ExprSyntaxError", "ExprTypeError"]


class ExprError(ParamError):
    """Root of the expression errors. `status` is 400."""

    def __init__(self, message: str, *, position: int | None = None, expected: str | None = None) -> None:
        super().__init__(message)
        self.position = position
        self.expected = expected


class ExprSyntaxError(ExprError):
    """The text is not an expression: "syntax error at position 12: expected ')'", with a
    `hint` at the likely mistake when the parser can tell (a misspelt accessor, an unquoted
    text value): `... found 'rock' (text values are quoted: "rock")`."""

    def __init__(self, position: int, expected: str, found: str | None = None, *, hint: str | None = None) -> None:
        message = f"syntax error at position {position}: expected {expected}"
        if found is not None:
            message += f", found {found}"
        if hint is not None:
            message += f" ({hint})"
        super().__init__(message, position=position, expected=expected)
        self.hint = hint


class ExprTypeError(ExprError):
    """A well-formed expression that means nothing: unknown function, wrong arity, bad operand."""

    def __init__(self, message: str, position: int | None) -> None:
        where = f" at position {position}" if position is not None else ""
        super().__init__(f"invalid expression{where}: {message}", position=position)


class ExprLimitError(ExprError):
    """The expression is too long, too deep or compiles to too much SQL."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(f"expression too large: {message}", position=position)
