"""`where` errors point at the likely mistake (issue 15): a misspelt accessor, a text value
or property name without quotes, an upper-case keyword. Each keeps the position."""

from __future__ import annotations

import pytest

from footfall.shared.expr import parse_expr
from footfall.shared.expr.errors import ExprSyntaxError

HINTS = [
    ('propertes["plan"] == "pro"', 0, "did you mean properties[...]?"),
    ('proprties["plan"] == "pro"', 0, "did you mean properties[...]?"),
    ('evnt["x"] == 1', 0, "did you mean event[...]?"),
    ('nothing["x"] == 1', 0, "values are read with properties[...]"),
    ('properties["plan"] == pro', 22, 'text values are quoted: "pro"; functions are called with (...)'),
    ('properties["plan"] in [pro, "free"]', 23, 'text values are quoted: "pro"; functions are called with (...)'),
    ('properties[plan] == "pro"', 11, 'property names are quoted: properties["plan"]'),
    ('properties["a"] == 1 AND properties["b"] == 2', 21, "keywords are lowercase: and"),
    ('properties["a"] == TRUE', 19, "keywords are lowercase: true"),
]


@pytest.mark.parametrize(("text", "position", "hint"), HINTS, ids=[t for t, _, _ in HINTS])
def test_syntax_errors_hint_at_the_likely_mistake(text: str, position: int, hint: str) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_expr(text)
    err = info.value
    assert (err.position, err.hint) == (position, hint)
    assert err.message.startswith(f"syntax error at position {position}: expected ")
    assert err.message.endswith(f"({hint})")


def test_plain_syntax_errors_carry_no_hint() -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_expr("(1 + 2")
    assert info.value.hint is None and "(" not in info.value.message.split("found")[-1]
