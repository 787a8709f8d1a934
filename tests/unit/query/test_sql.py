"""The SQL fragment type: only builders make fragments, holes take fragments only."""

from __future__ import annotations

import pytest

import services.query.sql as sql_pkg
from services.query.sql import Params, Sql, column, join, local, number, render, sql, table


def test_public_api_is_pinned() -> None:
    assert sorted(sql_pkg.__all__) == sorted(
        ["Params", "Sql", "SqlSizeError", "column", "join", "local", "number", "render", "sql", "table"]
    )


def test_sql_cannot_be_made_from_a_string() -> None:
    with pytest.raises(TypeError):
        Sql("SELECT 1")


def test_holes_take_fragments_only() -> None:
    with pytest.raises(TypeError):
        sql("f({})", "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        join(", ", ["a"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "template",
    ["{x}", "{p0:String}", "a % b", "$x$", "1; DROP", "-- c", "/* c */", "}"],
    ids=["named-brace", "placeholder", "percent", "heredoc", "semicolon", "line-comment", "block-comment", "brace"],
)
def test_templates_refuse_dangerous_text(template: str) -> None:
    with pytest.raises(ValueError):
        sql(template)  # type: ignore[arg-type]


def test_hole_count_must_match() -> None:
    with pytest.raises(ValueError):
        sql("f({}, {})", number(1))


def test_builders_compose() -> None:
    params = Params()
    out = sql("f({}, {})", column("properties"), params.add("x", "String"))
    assert render(out) == "f(properties, {p0:String})"
    assert render(join(" AND ", [number(1), local(2)])) == "1 AND _x2"
    assert render(table("events")) == "events"
    assert params.values == {"p0": "x"}


def test_params_types_and_prefix() -> None:
    params = Params(prefix="w")
    assert render(params.add(1.5, "Float64")) == "{w0:Float64}"
    assert render(params.add(["a"], "Array(String)")) == "{w1:Array(String)}"
    assert len(params) == 2
    with pytest.raises(ValueError):
        params.add("x", "String) OR (1")
    with pytest.raises(ValueError):
        params.add(float("nan"), "Float64")
    with pytest.raises(ValueError):
        Params(prefix="p{")


def test_values_is_a_copy() -> None:
    params = Params()
    params.add("x", "String")
    params.values["p0"] = "changed"
    assert params.values == {"p0": "x"}


@pytest.mark.parametrize("name", ["nope", "properties; DROP", "Properties"], ids=["unknown", "injection", "case"])
def test_identifiers_only_from_the_catalog(name: str) -> None:
    with pytest.raises(KeyError):
        column(name)


def test_sql_fragments_are_frozen() -> None:
    frag = number(1)
    with pytest.raises(AttributeError):
        frag.text = "x"  # type: ignore[misc]
