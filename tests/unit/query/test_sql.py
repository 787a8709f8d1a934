"""The SQL fragment type: only builders make fragments, holes take fragments only."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import footfall.shared.sql as sql_pkg
from footfall.shared.schema.catalog import EVENTS, PROJECTS, SAVED_FUNNELS
from footfall.shared.sql import Params, Scope, Sql, column, join, local, number, render, source, sql


def test_public_api_is_pinned() -> None:
    assert sorted(sql_pkg.__all__) == sorted(
        ["Params", "Scope", "Sql", "SqlSizeError", "column", "join", "local", "number", "render", "source", "sql"]
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


def test_a_tenant_table_is_read_with_its_project_guard_and_time_range() -> None:
    params = Params()
    scope = Scope(7, datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC))
    keys = sql("event = {}", params.add("a", "String"))
    final = source(EVENTS, scope, params, final=True, keys=keys, where=sql("1 = 1"))
    assert render(final) == (
        "events FINAL PREWHERE project_id = {p1:UInt64} AND time >= {p2:DateTime64(3, 'UTC')} "
        "AND time < {p3:DateTime64(3, 'UTC')} AND event = {p0:String} WHERE 1 = 1"
    )
    assert params.values == {"p0": "a", "p1": 7, "p2": scope.start, "p3": scope.end}
    raw = source(EVENTS, scope, Params(), keys=sql("1"), where=sql("2"))
    assert render(raw).startswith("events WHERE project_id = {p0:UInt64} AND time >= {p1:")
    assert render(raw).endswith("AND 1 AND (2)")


def test_scopes_refuse_what_would_leave_the_guard_out() -> None:
    with pytest.raises(ValueError, match="time range"):
        source(EVENTS, Scope(1), Params())  # a time-ordered table needs a range
    with pytest.raises(ValueError, match="not a tenant table"):
        source(PROJECTS, Scope(1), Params())
    with pytest.raises(ValueError):
        Scope(0)
    with pytest.raises(ValueError):
        Scope(1, datetime(2024, 1, 1, tzinfo=UTC), None)
    params = Params()
    assert render(source(SAVED_FUNNELS, Scope(3), params)) == "saved_funnels WHERE project_id = {p0:UInt64}"
    assert params.values == {"p0": 3}
