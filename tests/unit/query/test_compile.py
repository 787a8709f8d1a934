"""Checker and compiler: meaning errors, SQL + params tables, the injection suite, fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import footfall.shared.expr as expr_pkg
from footfall.shared.expr import (
    ExprError,
    OnSql,
    check_expr,
    compile_number,
    compile_on,
    compile_where,
    parse_expr,
)
from footfall.shared.expr.errors import ExprTypeError
from footfall.shared.expr.typed import Apply, Column, Const, Kind, Prop
from footfall.shared.sql import Params, Sql, render, sql
from tests.unit.query.strategies import expressions, hole_values, render_literal, shapes

PLACEHOLDER = re.compile(r"\{p\d+:[A-Za-z0-9(), ']+\}")


def where(text: str) -> tuple[str, dict[str, object]]:
    params = Params()
    return render(compile_where(parse_expr(text), params)), params.values


def on(text: str) -> tuple[OnSql, dict[str, object]]:
    params = Params()
    return compile_on(parse_expr(text), params), params.values


# -- public API ----------------------------------------------------------------------------------
def test_public_api_is_pinned() -> None:
    assert sorted(expr_pkg.__all__) == sorted(
        [
            "ExprError",
            "ExprLimitError",
            "ExprSyntaxError",
            "ExprTypeError",
            "OnSql",
            "check_expr",
            "compile_number",
            "compile_on",
            "compile_where",
            "parse_expr",
            "reads_properties_text",
        ]
    )


# -- check ---------------------------------------------------------------------------------------
CHECK_ERRORS = [
    ("foo(1)", 0, "unknown function 'foo'"),
    ("number()", 0, r"number\(\) takes 1 argument, got 0"),
    ("number(1, 2)", 0, r"number\(\) takes 1 argument, got 2"),
    ('has_prefix("a")', 0, r"has_prefix\(\) takes 2 arguments, got 1"),
    ('user["$email"] == "a"', 0, r"user\[\.\.\.\] is not available in an event expression"),
    ('behaviors["b"] > 0', 0, r"behaviors\[\.\.\.\] is not available"),
    ("1 and true", 0, "the operands of 'and' must be boolean"),
    ('true or "x"', 8, "the operands of 'or' must be boolean"),
    ('datetime("yesterday")', 9, r"datetime\(\) needs an ISO date"),
    ('datetime("2024-02-30")', 9, r"datetime\(\) needs an ISO date"),
    ('datetime("2024-01-01T00:00:00+05:60")', 9, r"datetime\(\) needs an ISO date"),
    ('datetime("2024-01-01T00:00:00+24:00")', 9, r"datetime\(\) needs an ISO date"),
    ('datetime("1900-01-01T00:00:00+01:00")', 9, r"datetime\(\) needs an ISO date"),
    ('datetime("2299-12-31T23:00:00-02:00")', 9, r"datetime\(\) needs an ISO date"),
    ("datetime(99999999999999999)", 9, r"datetime\(\) of a number needs an epoch time"),
    ("1e999", 0, "number '1e999' is out of range"),
]


@pytest.mark.parametrize(("text", "position", "message"), CHECK_ERRORS, ids=[t for t, _, _ in CHECK_ERRORS])
def test_check_rejects_meaningless_expressions(text: str, position: int, message: str) -> None:
    with pytest.raises(ExprTypeError, match=message) as info:
        check_expr(parse_expr(text))
    assert info.value.position == position
    assert info.value.status == 400


KINDS = [
    ('properties["x"]', {"undefined", "null", "boolean", "number", "string", "list", "object"}),
    ('properties["time"]', {"datetime"}),
    ('event["$time"]', {"datetime"}),
    ('properties["distinct_id"]', {"string"}),
    ('number(properties["x"])', {"number", "undefined"}),
    ('string(properties["x"])', {"string", "null", "undefined"}),
    ("string(1)", {"string"}),
    ('properties["x"] == 1', {"boolean"}),
    ('properties["x"] > 1', {"boolean", "undefined"}),
    ("1 > 2", {"boolean"}),
    ('"a" + "b"', {"string"}),
    ("1 + 2", {"number", "undefined"}),
    ('not properties["x"]', {"boolean", "undefined"}),
    ("not (1 > 2)", {"boolean"}),
    ('datetime("2024-01-01")', {"datetime"}),
    ("datetime(true)", {"undefined"}),
    ('"a" in properties["x"]', {"boolean", "undefined"}),
    ('"a" in ["a"]', {"boolean"}),
]


@pytest.mark.parametrize(("text", "kinds"), KINDS, ids=[t for t, _ in KINDS])
def test_check_infers_runtime_kinds(text: str, kinds: set[str]) -> None:
    assert {k.name.lower() for k in check_expr(parse_expr(text)).kinds} == kinds


ISO_LITERALS = [
    ("1899-12-31T23:00:00-02:00", -2208985200.0),  # a local 1899 inside the range
    ("2300-01-01T00:30:00+01:00", 10413790200.0),  # a local 2300 inside the range
    ("1900-01-01T01:00:00+0100", -2208988800.0),
    ("2024-01-01T00:00:00-23:59", 1704153540.0),
]


@pytest.mark.parametrize(("text", "seconds"), ISO_LITERALS, ids=[t for t, _ in ISO_LITERALS])
def test_check_folds_iso_literals_by_instant(text: str, seconds: float) -> None:
    folded = check_expr(parse_expr(f'datetime("{text}")'))
    assert isinstance(folded, Const)
    assert (folded.kind, folded.value) == (Kind.DATETIME, seconds)


def test_check_resolves_column_properties() -> None:
    assert check_expr(parse_expr('properties["$insert_id"]')) == Column(
        "insert_id", Kind.STRING, parse_expr('properties["$insert_id"]').span
    )  # type: ignore[union-attr]
    tree = check_expr(parse_expr('properties["$city"] == "x"'))
    assert isinstance(tree, Apply) and isinstance(tree.args[0], Prop) and isinstance(tree.args[1], Const)


# -- compile: SQL + params -----------------------------------------------------------------------
RAW = "JSONExtractRaw(properties, {p0:String})"
RAW1 = "JSONExtractRaw(properties, {p1:String})"
IS_NUMBER = f"(ascii({RAW}) NOT IN (0, 34, 116, 102, 110, 91, 123))"
NO_BACKSLASH = f"position({RAW}, '\\x5C') = 0"  # '\x5C' is a backslash
NO_BACKSLASH1 = f"position({RAW1}, '\\x5C') = 0"

WHERE_SQL = [
    (
        'properties["time"] >= datetime("2024-01-01")',
        "((toUnixTimestamp64Milli(time) / 1000) >= {p0:Float64})",
        {"p0": 1704067200.0},
    ),
    ('properties["distinct_id"] == "u"', "(toString(distinct_id) = {p0:String})", {"p0": "u"}),
    ('"x" in properties["distinct_id"]', "(position(toString(distinct_id), {p0:String}) > 0)", {"p0": "x"}),
    ("true", "{p0:UInt8}", {"p0": 1}),
    ("null", "toUInt8(0)", {}),
    ("1 + 2", "toUInt8(0)", {"p0": 1.0, "p1": 2.0}),
    (
        'properties["$city"] == "Chicago"',
        # no backslash: one comparison of the raw JSON text with the quoted literal
        f"if({NO_BACKSLASH}, ({RAW} = concat('\"', {{p1:String}}, '\"')), "
        f"((ascii({RAW}) = 34) AND (JSONExtractString({RAW}) = {{p1:String}})))",
        {"p0": "$city", "p1": "Chicago"},
    ),
    ('defined(properties["$city"])', "JSONHas(properties, {p0:String})", {"p0": "$city"}),
    (
        # the value is read anyway, so `defined` tests the same raw text instead of a JSONHas
        'defined(properties["$city"]) and properties["$city"] != "x"',
        f"((NOT ({RAW} = '')) AND (NOT if({NO_BACKSLASH1}, ({RAW1} = concat('\"', {{p2:String}}, '\"')), "
        f"((ascii({RAW1}) = 34) AND (JSONExtractString({RAW1}) = {{p2:String}})))))",
        {"p0": "$city", "p1": "$city", "p2": "x"},
    ),
    (
        'properties["distinct_id"] in ["a", "b"]',
        "has([concat('s', {p0:String}), concat('s', {p1:String})], concat('s', toString(distinct_id)))",
        {"p0": "a", "p1": "b"},
    ),
    (
        'properties["n"] > 5',
        f"if({IS_NUMBER}, (toFloat64OrZero({RAW}) > {{p1:Float64}}), toUInt8(0))",
        {"p0": "n", "p1": 5.0},
    ),
]


@pytest.mark.parametrize(("text", "sql_text", "values"), WHERE_SQL, ids=[t for t, _, _ in WHERE_SQL])
def test_compile_where_sql_and_params(text: str, sql_text: str, values: dict[str, object]) -> None:
    assert where(text) == (sql_text, values)


def test_compile_number_sql() -> None:
    params = Params()
    out = render(compile_number(parse_expr('properties["price"] * 2'), params))
    assert out.startswith("if((if(((") and out.endswith("NULL)")
    assert params.values == {"p0": "price", "p1": 2.0}
    params = Params()
    assert render(compile_number(parse_expr('properties["a"] == 1'), params)) == "CAST(NULL, 'Nullable(Float64)')"


ON_SHAPES = [
    ('properties["x"]', True),
    ('string(properties["x"])', False),
    ('number(properties["x"])', False),
    ("[1, 2]", True),
    ('properties["distinct_id"]', False),
    ('properties["x"] == 1', False),
]


@pytest.mark.parametrize(("text", "is_array"), ON_SHAPES, ids=[t for t, _ in ON_SHAPES])
def test_compile_on_says_when_keys_are_an_array(text: str, is_array: bool) -> None:
    out, _ = on(text)
    assert out.is_array is is_array


def test_on_reads_a_string_without_a_second_parse() -> None:
    out, values = on('properties["plan"]')
    string = f"if({NO_BACKSLASH}, substring({RAW}, 2, length({RAW}) - 2), JSONExtractString({RAW}))"
    # strings first, as a one-element array (no Nullable detour); a list's elements, then the other kinds
    text = render(out.sql)
    assert out.is_array and text.startswith(f"multiIf((ascii({RAW}) = 34), [{string}], (ascii({RAW}) = 91), ")
    assert text.endswith(", emptyArrayString())") and "Nullable" not in text
    assert values == {"p0": "plan"}


def test_compile_accepts_a_checked_tree() -> None:
    p1, p2 = Params(), Params()
    text = 'number(properties["a"]) > 3'
    assert compile_where(parse_expr(text), p1) == compile_where(check_expr(parse_expr(text)), p2)
    assert p1.values == p2.values


def test_fragments_of_one_query_share_params() -> None:
    params = Params()
    w = render(compile_where(parse_expr('properties["a"] == "x"'), params))
    o = render(compile_on(parse_expr('properties["b"]'), params).sql)
    assert "{p0:String}" in w and "{p2:String}" in o and "{p0:String}" not in o
    assert params.values == {"p0": "a", "p1": "x", "p2": "b"}


def test_deep_expressions_stay_linear_in_size() -> None:
    text = "+".join(['properties["a"]'] * 60)
    params = Params()
    out = render(compile_where(parse_expr(f"({text}) == 1"), params))
    assert len(out) < 60 * 3000
    assert "arrayMap((_x" in out  # shared sub-expressions are bound, not repeated


# -- the injection suite -------------------------------------------------------------------------
NASTY = [
    "'; DROP TABLE events; --",
    "\\'",
    "\\\\'; SELECT 1; --",
    "`events`",
    "{p777:String}",
    "{p1:UInt64}) OR 1=1 --",
    'x"]) OR 1=1 --',
    "’ OR ‘1’=‘1",  # unicode quotes
    "“quoted”",
    "%s %(p0)s %%",
    "$heredoc$ $$",
    "*/ /* comment",
    "\x00nul\nnewline\ttab",
    "SELECT * FROM system.users",
    "☃'☃",
]


def _strings(value: str) -> list[str]:
    """Ways the same text can be written as an expression string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return [f'"{escaped}"']


@pytest.mark.parametrize("nasty", NASTY, ids=[f"nasty-{i}" for i in range(len(NASTY))])
@pytest.mark.parametrize(
    "template",
    [
        "properties[{0}] == {0}",
        "{0} in properties[{0}]",
        "has_prefix(string(properties[{0}]), {0})",
        "properties[{0}] in [{0}, {0}]",
        "event[{0}] != {0} or defined(properties[{0}])",
        "datetime(properties[{0}]) > datetime(1)",
        "number(properties[{0}]) + string({0})",
    ],
    ids=["eq", "in", "prefix", "list", "event-or", "datetime", "cast"],
)
def test_request_text_never_reaches_sql(nasty: str, template: str) -> None:
    (literal,) = _strings(nasty)
    text = template.format(literal)
    params = Params()
    tree = parse_expr(text)
    outputs = [compile_where(tree, params), compile_on(tree, params).sql, compile_number(tree, params)]
    for out in outputs:
        sql_text = render(out)
        assert nasty not in sql_text
        without_placeholders = PLACEHOLDER.sub("", sql_text)
        assert "{" not in without_placeholders and "}" not in without_placeholders
        assert not re.search(r"[%$;]|--|/\*", without_placeholders)
        for name in re.findall(r"\{(p\d+):", sql_text):
            assert name in params.values
    assert nasty in params.values.values()


def test_bound_values_are_exactly_the_literals_and_names() -> None:
    _, values = where('properties["a\\"b"] == "c\'d" and 2 > 1 and true')
    assert values == {"p0": 'a"b', "p1": "c'd", "p2": 2.0, "p3": 1.0, "p4": 1}


# -- fuzzing -------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(text=expressions())
def test_random_expressions_raise_only_expr_errors(text: str) -> None:
    try:
        tree = parse_expr(text)
        params = Params()
        compile_where(tree, params)
        compile_on(tree, params)
        compile_number(tree, params)
    except ExprError:
        pass


@st.composite
def same_shape_twice(draw: st.DrawFn) -> tuple[str, str]:
    template, holes = draw(shapes())
    pieces = template.split("{}")
    first = [render_literal(k, draw(hole_values(k))) for k in holes]
    second = [render_literal(k, draw(hole_values(k))) for k in holes]

    def fill(values: list[str]) -> str:
        out = [pieces[0]]
        for value, piece in zip(values, pieces[1:], strict=True):
            out += [value, piece]
        return "".join(out)

    return fill(first), fill(second)


def _compiled(text: str) -> tuple[list[str], list[str]] | None:
    try:
        tree = parse_expr(text)
        params = Params()
        outs: list[Sql] = [compile_where(tree, params), compile_on(tree, params).sql, compile_number(tree, params)]
    except ExprError:
        return None
    return [render(o) for o in outs], sorted(params.values)


@settings(max_examples=300, deadline=None)
@given(pair=same_shape_twice())
def test_sql_structure_does_not_depend_on_literal_values(pair: tuple[str, str]) -> None:
    first, second = (_compiled(t) for t in pair)
    assume(first is not None and second is not None)
    assert first == second


def test_placeholder_text_in_a_literal_is_only_a_value() -> None:
    sql_text, values = where('properties["x"] == "{p0:String}"')
    assert sql_text.count("{p0:String}") == 4  # the property name's placeholder, not the literal
    assert values == {"p0": "x", "p1": "{p0:String}"}


def test_long_or_chains_are_one_level() -> None:
    text = " or ".join(f'properties["k{i}"] == {i}' for i in range(120))
    tree = check_expr(parse_expr(text))
    assert isinstance(tree, Apply) and len(tree.args) == 120
    params = Params()
    compile_where(tree, params)
    assert len(params.values) == 240


def test_too_much_sql_is_a_limit_error() -> None:
    from footfall.shared.expr import ExprLimitError

    text = " or ".join(f'string(string(properties["k{i}"])) in [properties["a"], properties["b"]]' for i in range(50))
    with pytest.raises(ExprLimitError, match="compiles to more than"):
        compile_on(parse_expr(text), Params())


def test_user_reads_the_joined_profile_only_in_the_join_context() -> None:
    """`user[...]` is a 400 in an event expression; in a JQL join selector it reads the joined
    profile's text, and the event's properties are read from their text too (no hot column
    exists beside the join)."""
    tree = parse_expr('user["plan"] == "pro" and properties["$browser"] == "x"')
    with pytest.raises(ExprTypeError):
        check_expr(tree)
    typed = check_expr(tree, context="join")
    params = Params()
    text = render(compile_where(typed, params, user_properties=sql("user_properties")))
    assert "JSONExtractRaw(user_properties, " in text and "JSONExtractRaw(properties, " in text
    assert "hp_" not in text
    with pytest.raises(AssertionError):
        compile_where(typed, Params())


def test_reads_properties_text_names_the_json_parse() -> None:
    """A property without a hot column parses the `properties` text; the columns (`time`,
    `distinct_id`) and hot properties (here `$browser`) do not."""
    from footfall.shared.expr import reads_properties_text
    from footfall.shared.schema import hot

    def reads(text: str) -> bool:
        return reads_properties_text(check_expr(parse_expr(text)))

    with hot.using(["$browser"]):
        assert reads('properties["plan"] == "pro"')
        assert reads('defined(properties["plan"])')
        assert reads('properties["time"] > datetime("2024-01-01") and number(properties["price"]) > 1')
        assert not reads('properties["$browser"] == "Chrome" and properties["distinct_id"] == "u"')
        assert not reads('properties["time"] > datetime("2024-01-01")')
    assert reads('properties["$browser"] == "Chrome"')  # not hot outside
