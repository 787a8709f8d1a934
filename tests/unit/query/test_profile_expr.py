"""The expression language's profile context (/engage `where`): what the accessors read, the
400s, and the compiled SQL (the profile's `properties`, the given behaviour counts, values bound)."""

from __future__ import annotations

import re

import pytest

from footfall.shared.expr import ExprError, check_expr, compile_number, compile_on, compile_where, parse_expr
from footfall.shared.expr.typed import Apply, Column, Const, Count, Kind, Prop, TNode
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.sql import Params, render, sql

MARKER = "Zq7Marker"


def profile(text: str, behaviors: tuple[str, ...] = ()) -> TNode:
    return check_expr(parse_expr(text), context="profiles", behaviors=behaviors)


def test_properties_and_user_read_the_profile() -> None:
    assert profile('properties["plan"]') == Prop("plan", profile('properties["plan"]').span)
    assert isinstance(profile('user["plan"]'), Prop)
    # no key is special: these are profile properties, not the event's columns
    for key in ("time", "distinct_id", "$insert_id"):
        tree = profile(f'properties["{key}"]')
        assert isinstance(tree, Prop) and tree.name == key
    assert isinstance(check_expr(parse_expr('properties["time"]')), Column)  # the event context is unchanged


def test_behaviors_are_numbers_of_defined_behaviours_only() -> None:
    tree = profile('behaviors["buys"] >= 2', ("buys", "views"))
    assert isinstance(tree, Apply) and tree.args[0] == Count("buys", tree.args[0].span)
    assert tree.args[0].kinds == {Kind.NUMBER} and tree.kinds == {Kind.BOOLEAN}
    with pytest.raises(ExprError, match=r'behaviors\["views"\] is not defined in behaviors'):
        profile('behaviors["views"] > 0', ("buys",))
    with pytest.raises(ExprError, match="position 11"):
        profile('1 == 1 and behaviors["x"] > 0')


@pytest.mark.parametrize(
    "text",
    ['event["plan"] == "pro"', 'event["time"] > 0', 'defined(event["$distinct_id"])'],
    ids=["prop", "time", "id"],
)
def test_event_accessors_are_400(text: str) -> None:
    with pytest.raises(ExprError, match=r"event\[\.\.\.\] is not available in a profile expression") as exc:
        profile(text)
    assert exc.value.status == 400 and exc.value.position is not None


def test_event_context_still_refuses_profile_accessors() -> None:
    for text in ('user["x"] == 1', 'behaviors["x"] > 1'):
        with pytest.raises(ExprError, match="is not available in an event expression"):
            check_expr(parse_expr(text))
    with pytest.raises(ValueError):
        check_expr(parse_expr("true"), behaviors=("b",))  # counts exist in the profile context only
    with pytest.raises(ValueError):
        check_expr(parse_expr("true"), context="groups")  # type: ignore[arg-type]


def test_every_other_rule_is_the_event_one() -> None:
    assert profile('1 + "a"').kinds == check_expr(parse_expr('1 + "a"')).kinds
    with pytest.raises(ExprError, match="must be boolean"):
        profile('properties["a"] and 1')
    with pytest.raises(ExprError, match="unknown function"):
        profile("nosuch(1)")
    assert profile('datetime("2024-01-01")') == Const(
        Kind.DATETIME, 1704067200.0, profile('datetime("2024-01-01")').span
    )


def test_compiled_sql_reads_profile_properties_and_given_counts_with_values_bound() -> None:
    text = f'properties["{MARKER}"] == "{MARKER}" and behaviors["b"] > 2 and "{MARKER}" in user["tags"]'
    params = Params()
    out = render(compile_where(profile(text, ("b",)), params, properties_of=PROFILES, counts={"b": sql("bc[1]")}))
    assert MARKER not in out
    assert MARKER in params.values.values()
    assert "toFloat64(bc[1])" in out and "JSONExtractRaw(properties, {p" in out
    assert not re.search(r"\btime\b|distinct_id", out)


def test_counts_feed_numbers_and_keys() -> None:
    counts = {"b": sql("bc[2]")}
    tree = profile('behaviors["b"] * 2', ("b",))
    assert "toFloat64(bc[2])" in render(compile_number(tree, Params(), properties_of=PROFILES, counts=counts))
    assert "toFloat64(bc[2])" in render(compile_on(tree, Params(), properties_of=PROFILES, counts=counts).sql)


def test_a_count_without_its_column_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no count column"):
        compile_where(profile('behaviors["b"] > 0', ("b",)), Params(), properties_of=PROFILES)


def test_event_where_compiles_as_before() -> None:
    p1, p2 = Params(), Params()
    text = 'properties["plan"] == "pro" and defined(properties["x"])'
    assert compile_where(parse_expr(text), p1) == compile_where(check_expr(parse_expr(text)), p2)
    assert p1.values == p2.values
    # a profile tree without counts compiles to the same text as the event tree (same `properties` column)
    p3 = Params()
    assert compile_where(profile(text), p3, properties_of=PROFILES) == compile_where(parse_expr(text), Params())
