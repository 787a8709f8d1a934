"""Reading the parameters the reports share (`type`, `unit`, `limit`, `format`, expressions),
with their defaults and ranges; every error names its parameter."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from footfall.services.query.params import Params
from footfall.shared.errors import ParamError
from footfall.shared.expr import ExprError, check_expr, parse_expr
from footfall.shared.expr.typed import TNode

__all__ = [
    "MAX_LIMIT",
    "TYPES",
    "UNITS",
    "check_text",
    "read_dates",
    "read_expr",
    "read_format",
    "read_limit",
    "read_type",
    "read_unit",
]

TYPES = ("general", "unique", "average")
UNITS = ("minute", "hour", "day", "week", "month")
MAX_LIMIT = 10_000


def read_type(p: Params, default: str = "general") -> str:
    return p.choice("type", TYPES, default)


def read_unit(p: Params, allowed: Sequence[str] = UNITS, default: str = "day") -> str:
    return p.choice("unit", allowed, default)


def read_limit(p: Params, default: int) -> int:
    return p.integer("limit", default, minimum=1, maximum=MAX_LIMIT)


def read_format(p: Params) -> str:
    return p.choice("format", ("json", "csv"), "json")


def read_dates(p: Params) -> tuple[date, date]:
    """`from_date` and `to_date`: required local days (yyyy-mm-dd)."""
    return p.date("from_date"), p.date("to_date")


def check_text(text: str | None, subject: str) -> TNode | None:
    """Parse and check an expression text (None: no expression); a bad one is a 400
    "Error in <subject>: …" with the position and what was expected (from the parser)."""
    if text is None:
        return None
    try:
        return check_expr(parse_expr(text))
    except ExprError as exc:
        raise ParamError(f"Error in {subject}: {exc.message}") from None


def read_expr(p: Params, name: str, *, required: bool = False) -> TNode | None:
    """Parse and check the expression in parameter `name`; a bad one is a 400 naming it."""
    return check_text(p.required(name) if required else p.get(name), name)
