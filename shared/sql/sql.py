"""`Sql`: an immutable fragment of SQL text that only this package can create.

Every piece of SQL text in the query service is an `Sql`. A fragment is made by

* `sql(template, *holes)`: a template written in the source code (a literal, never
  request text) whose `{}` holes are filled with other `Sql` fragments only;
* `Params.add(value, type)`: a bound-parameter placeholder such as `{p3:String}`;
* `ident.column(name)`: an identifier from the fixed catalog;
* `join(separator, fragments)`, `number(i)` (an integer chosen by the compiler,
  such as a tuple index or a kind code — never a request value) and `local(i)` (the
  numbered name `_x3` of a lambda parameter the compiler introduces).

The constructor is guarded by a private token, so `Sql("...")` from outside this
package fails, and `sql()` refuses `str` holes. Templates may not contain `%`, `$`,
`;`, comments or `{`/`}` other than the `{}` holes: clickhouse-connect would read
`%` as a client-side format marker and `$name$` as a heredoc, and braces are
reserved for bound parameters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import LiteralString

__all__ = ["Sql", "SqlSizeError", "join", "local", "number", "sql"]

_TOKEN = object()
_HOLE = "{}"
_FORBIDDEN = re.compile(r"[%$;]|--|/\*|\*/")
MAX_SQL_CHARS = 1_000_000


class SqlSizeError(ValueError):
    """A fragment grew past `MAX_SQL_CHARS` (the expression compiler maps it to a 400)."""


@dataclass(frozen=True, slots=True)
class Sql:
    """A finished piece of SQL text. Compare and hash by text; render with `render()`."""

    text: str
    _token: object = field(default=None, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self._token is not _TOKEN:
            raise TypeError("Sql fragments are made by footfall.shared.sql builders only")
        if len(self.text) > MAX_SQL_CHARS:
            raise SqlSizeError(f"SQL fragment longer than {MAX_SQL_CHARS} characters")

    def __str__(self) -> str:  # pragma: no cover - debugging aid
        return self.text


def _make(text: str) -> Sql:
    return Sql(text, _TOKEN)


def _check_template(template: str) -> list[str]:
    if not isinstance(template, str):
        raise TypeError("an SQL template must be a literal str")
    pieces = template.split(_HOLE)
    for piece in pieces:
        if "{" in piece or "}" in piece:
            raise ValueError(f"SQL template may only contain '{{}}' holes: {template!r}")
        if _FORBIDDEN.search(piece):
            raise ValueError(f"SQL template contains a forbidden character sequence: {template!r}")
    return pieces


def sql(template: LiteralString, *holes: Sql) -> Sql:
    """Fill the `{}` holes of a source-code template with fragments, in order."""
    pieces = _check_template(template)
    if len(pieces) - 1 != len(holes):
        raise ValueError(f"template has {len(pieces) - 1} holes, got {len(holes)} fragments")
    out = [pieces[0]]
    for hole, piece in zip(holes, pieces[1:], strict=True):
        if not isinstance(hole, Sql):
            raise TypeError(f"SQL holes take Sql fragments only, not {type(hole).__name__}")
        out.append(hole.text)
        out.append(piece)
    return _make("".join(out))


def join(separator: LiteralString, fragments: Iterable[Sql]) -> Sql:
    """`a, b, c` from fragments; the separator is a source-code literal."""
    _check_template(separator)
    if _HOLE in separator:
        raise ValueError("a separator cannot contain holes")
    parts = list(fragments)
    for part in parts:
        if not isinstance(part, Sql):
            raise TypeError(f"join takes Sql fragments only, not {type(part).__name__}")
    return _make(separator.join(p.text for p in parts))


def number(value: int) -> Sql:
    """An integer chosen by the compiler (kind codes, tuple indexes), never request data."""
    if type(value) is not int:
        raise TypeError("number() takes an int")
    return _make(str(value))


def local(index: int) -> Sql:
    """The name of a lambda parameter the compiler introduces (`_x3`); numbered, never named by a request."""
    if type(index) is not int or index < 0:
        raise TypeError("local() takes a non-negative int")
    return _make(f"_x{index}")


def _unchecked(text: str) -> Sql:
    """For params.py / ident.py only: text they generated themselves."""
    return _make(text)
