"""Parser: expression text -> source AST (table-driven), syntax errors with positions, limits."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings

from footfall.shared.expr import ExprError, parse_expr
from footfall.shared.expr.ast import (
    Accessor,
    Binary,
    BoolLit,
    Call,
    ListLit,
    Node,
    NullLit,
    NumberLit,
    StringLit,
    Unary,
)
from footfall.shared.expr.errors import ExprLimitError, ExprSyntaxError
from footfall.shared.expr.parser import MAX_DEPTH, MAX_TEXT
from tests.unit.query.strategies import expressions


def sexpr(node: Node) -> str:
    """A compact, span-free rendering of the tree to compare against."""
    match node:
        case StringLit(value):
            return repr(value)
        case NumberLit(text):
            return text
        case BoolLit(value):
            return "true" if value else "false"
        case NullLit():
            return "null"
        case ListLit(items):
            return "[" + " ".join(sexpr(i) for i in items) + "]"
        case Accessor(source, name):
            return f"{source}[{name!r}]"
        case Call(name, args):
            return f"({name} " + " ".join(sexpr(a) for a in args) + ")" if args else f"({name})"
        case Unary(op, operand):
            return f"({op} {sexpr(operand)})"
        case Binary(op, left, right):
            return f"({op} {sexpr(left)} {sexpr(right)})"
    raise AssertionError(node)


PARSES = [
    ('properties["$city"] == "Chicago"', "(== properties['$city'] 'Chicago')"),
    ("properties['x'] != 'y'", "(!= properties['x'] 'y')"),
    ('not "Facebook" in properties["$referring_domain"]', "(not (in 'Facebook' properties['$referring_domain']))"),
    ('(not defined (properties["$device"]))', "(not (defined properties['$device']))"),
    ("1 + 2 * 3", "(+ 1 (* 2 3))"),
    ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
    ("10 - 4 - 3", "(- (- 10 4) 3)"),
    ("8 / 4 % 3", "(% (/ 8 4) 3)"),
    ("- - 1", "(- (- 1))"),
    ("-x(1)", "(- (x 1))"),
    ("a() or b() and c()", "(or (a) (and (b) (c)))"),
    ("not a() and b()", "(and (not (a)) (b))"),
    ("not not true", "(not (not true))"),
    ("not 1 == 2", "(not (== 1 2))"),
    ("1 + 1 > 1 and true", "(and (> (+ 1 1) 1) true)"),
    ('properties["n"] in [1, 2.5, "x", null, true]', "(in properties['n'] [1 2.5 'x' null true])"),
    ("[]", "[]"),
    ("[[1], []]", "[[1] []]"),
    ('user["$email"] == "a@b"', "(== user['$email'] 'a@b')"),
    ('event["$time"] >= datetime("2024-01-01T00:00:00")', "(>= event['$time'] (datetime '2024-01-01T00:00:00'))"),
    ('behaviors["purchases"] > 0', "(> behaviors['purchases'] 0)"),
    ('has_prefix(string(user["signup_date"]), "2016")', "(has_prefix (string user['signup_date']) '2016')"),
    ("1.5e3 + .5 + 2. + 1E-2", "(+ (+ (+ 1.5e3 .5) 2.) 1E-2)"),
    (r'"a\"b\\c\/\n\t\u00e9"', repr('a"b\\c/\n\té')),
    (r"'it\'s'", repr("it's")),
    ('"☃ unicode ü"', repr("☃ unicode ü")),
    ('properties[""]', "properties['']"),
    ("  true  ", "true"),
    ("\n1\t==\r1", "(== 1 1)"),
    ("floor(properties['x'] / 2)", "(floor (/ properties['x'] 2))"),
]


@pytest.mark.parametrize(("text", "tree"), PARSES, ids=[t for t, _ in PARSES])
def test_parse_gives_tree(text: str, tree: str) -> None:
    assert sexpr(parse_expr(text)) == tree


def test_spans_point_into_the_text() -> None:
    text = 'not  properties["a"] == "x"'
    node = parse_expr(text)
    assert isinstance(node, Unary) and (node.span.start, node.span.end) == (0, len(text))
    eq = node.operand
    assert isinstance(eq, Binary)
    assert text[eq.left.span.start : eq.left.span.end] == 'properties["a"]'
    assert text[eq.right.span.start : eq.right.span.end] == '"x"'


SYNTAX_ERRORS = [
    ("(1", 2, "')'"),
    ("1 +", 3, "an expression"),
    ("", 0, "an expression"),
    ("   ", 3, "an expression"),
    ("a == b == c", 0, "an expression"),
    ("1 == 2 == 3", 7, "an operator or end of expression"),
    ("properties[1]", 11, "a quoted property name"),
    ('properties["a"', 14, "']'"),
    ("properties", 10, "'['"),
    ('"abc', 4, 'closing " of the string that starts at position 0'),
    ("'abc", 4, "closing ' of the string that starts at position 0"),
    ("x = 1", 2, "'=='"),
    ("!x", 0, "'!='"),
    ("1 ! 2", 2, "'!='"),
    ("f(1,)", 4, "an expression"),
    ("f(1 2)", 4, "',' or ')'"),
    ("[1 2]", 3, "',' or ']'"),
    ("1 2", 2, "an operator or end of expression"),
    ("1abc", 1, "an operator or end of number"),
    ("1e", 2, "digits of the exponent"),
    ("@", 0, "an expression"),
    ("`x`", 0, "an expression"),
    (r'"\q"', 1, "a valid escape (\\\" \\' \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"),
    (r'"\u12"', 1, "four hex digits after '\\u'"),
    (r'"\ud800"', 1, "a unicode escape outside the surrogate range"),
    ("not", 3, "an expression"),
    ("1 and", 5, "an expression"),
    ("()", 1, "an expression"),
    ("True", 0, "an expression"),
]


@pytest.mark.parametrize(
    ("text", "position", "expected"), SYNTAX_ERRORS, ids=[t or "<empty>" for t, _, _ in SYNTAX_ERRORS]
)
def test_syntax_error_names_position_and_expectation(text: str, position: int, expected: str) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_expr(text)
    err = info.value
    assert (err.position, err.expected) == (position, expected)
    assert str(err).startswith(f"syntax error at position {position}: expected {expected}")
    assert err.status == 400
    assert isinstance(err, ExprError)


def test_syntax_error_message_example() -> None:
    with pytest.raises(ExprError, match=r"^syntax error at position 12: expected '\)', found end of expression$"):
        parse_expr("(1 + 2 * 3  ")


@pytest.mark.parametrize(
    "text",
    [
        "x" * (MAX_TEXT + 1),
        "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
        "-" * (MAX_DEPTH + 1) + "1",
        "not " * (MAX_DEPTH + 1) + "true",
        "+".join(["1"] * (MAX_DEPTH + 2)),
        "f(" * (MAX_DEPTH + 1) + ")" * (MAX_DEPTH + 1),
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    ],
    ids=["too-long", "parens", "minus", "not", "operator-chain", "calls", "lists"],
)
def test_limits_raise_clear_errors(text: str) -> None:
    with pytest.raises(ExprLimitError, match=r"^expression too large: "):
        parse_expr(text)


def test_depth_just_under_the_limit_parses() -> None:
    parse_expr("(" * 20 + "1" + ")" * 20)
    parse_expr("+".join(["1"] * (MAX_DEPTH - 1)))


@settings(max_examples=400, deadline=None)
@given(text=expressions())
def test_parser_raises_only_expr_errors(text: str) -> None:
    with contextlib.suppress(ExprError):
        parse_expr(text)
