"""Semantic conformance of the compiled expression SQL, run on chDB.

The cases live in `tests/conformance/expr_semantics.json` (shared with the report oracle):
for each (expression, event properties) the Mixpanel value of the expression, as a
kind plus a value. From it follow the three compiled forms:

* `compile_where` keeps the event exactly when the value is boolean true;
* `compile_on` yields the segment keys (`on` in the case, else derived: the `string()`
  form of a scalar, the distinct string forms of a list's scalar elements);
* `compile_number` yields the value when it is a number, else NULL.

Each case is one row of a fresh `events` table (its `project_id` is the case number);
`time`, `distinct_id` and `$insert_id` in a case's properties go to their columns, as
ingestion does. The runtime kind and value are read from the lowered components
(`k`, `b`, `n`, `s`), so undefined and false are told apart, not just where-true.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from footfall.shared.expr import ExprError, check_expr, compile_number, compile_on, compile_where, parse_expr
from footfall.shared.expr.lower import Lowerer
from footfall.shared.expr.typed import Kind
from footfall.shared.schema.migrations import m0001_events
from footfall.shared.sql import Params, Sql, render
from tests.unit.query.strategies import expressions

pytestmark = pytest.mark.warehouse

CASES_FILE = Path(__file__).resolve().parents[2] / "conformance" / "expr_semantics.json"
CASES: list[dict[str, Any]] = json.loads(CASES_FILE.read_text())["cases"]
DEFAULT_TIME = 1704067200  # 2024-01-01T00:00:00Z
KIND_NAMES = {k: k.name.lower() for k in Kind}


class Store:
    """One chDB database holding one event per conformance case."""

    def __init__(self, client: Any, database: str) -> None:
        self.client = client
        self.db = database

    def query(self, text: str, parameters: dict[str, Any]) -> list[tuple[Any, ...]]:
        return list(self.client.query(text, parameters=parameters).result_rows)


@pytest.fixture(scope="module")
def store(chdb_client: Any) -> Iterator[Store]:
    client = chdb_client
    db = f"expr_{uuid.uuid4().hex[:12]}"
    client.command(f"CREATE DATABASE {db}")
    ddl = m0001_events.STATEMENTS[0].replace("CREATE TABLE IF NOT EXISTS events", f"CREATE TABLE {db}.events")
    client.command(ddl)
    rows = [_row(i, case["props"]) for i, case in enumerate(CASES)]
    rows.append(_row(len(CASES), {}))  # an event without properties, for the fuzz test
    client.insert(
        f"{db}.events",
        rows,
        column_names=[
            "project_id",
            "time",
            "event",
            "distinct_id",
            "insert_id",
            "properties",
            "dedup_hash",
            "ingested_at",
        ],
    )
    yield Store(client, db)
    client.command(f"DROP DATABASE {db}")


def _row(case_no: int, props: dict[str, Any]) -> list[Any]:
    props = dict(props)
    seconds = props.pop("time", DEFAULT_TIME)
    return [
        case_no,
        datetime.fromtimestamp(seconds, UTC),
        "Test event",
        props.pop("distinct_id", "u1"),
        props.pop("$insert_id", "i1"),
        json.dumps(props, ensure_ascii=False),
        b"\0" * 16,
        datetime.fromtimestamp(DEFAULT_TIME, UTC),
    ]


def _select(store: Store, case_no: int, exprs: list[Sql], params: Params) -> tuple[Any, ...]:
    columns = ", ".join(render(e) for e in exprs)
    text = f"SELECT {columns} FROM {store.db}.events WHERE project_id = {{case_no:UInt64}}"
    rows = store.query(text, {**params.values, "case_no": case_no})
    assert len(rows) == 1
    return rows[0]


def _value(store: Store, case_no: int, expr: str) -> tuple[str, Any]:
    """(kind name, value) of the expression for the case's event, from the lowered components."""
    params = Params()
    val = Lowerer(params).lower(check_expr(parse_expr(expr)))
    parts = [c if c is not None else None for c in (val.kind, val.b, val.n, val.s)]
    present = [p for p in parts if p is not None]
    row = iter(_select(store, case_no, present, params))
    k, b, n, s = (next(row) if p is not None else None for p in parts)
    kind = Kind(k)
    match kind:
        case Kind.BOOLEAN:
            return "boolean", bool(b)
        case Kind.NUMBER:
            return "number", n
        case Kind.STRING:
            return "string", s
        case Kind.DATETIME:
            return "datetime", n
        case Kind.LIST | Kind.OBJECT:
            return KIND_NAMES[kind], json.loads(s)
    return KIND_NAMES[kind], None


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


def _string_form(kind: str, value: Any) -> str | None:
    if kind == "string":
        return str(value)
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "number":
        return _js_number(float(value))
    if kind == "datetime":
        return str(value)
    return None


def _js_number(x: float) -> str:
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    return repr(x)


def expected_keys(case: dict[str, Any]) -> list[str]:
    if "on" in case:
        on = case["on"]
        return [] if on is None else on if isinstance(on, list) else [on]
    kind, value = case["type"], case.get("value")
    if kind == "list":
        keys: list[str] = []
        for item in value:
            item_kind = _json_kind(item)
            key = _string_form(item_kind, item) if item_kind not in ("list", "object") else None
            if key is not None and key not in keys:
                keys.append(key)
        return keys
    key = _string_form(kind, value)
    return [] if key is None else [key]


def _json_kind(item: Any) -> str:
    if item is None:
        return "null"
    if isinstance(item, bool):
        return "boolean"
    if isinstance(item, int | float):
        return "number"
    if isinstance(item, str):
        return "string"
    return "list" if isinstance(item, list) else "object"


IDS = [case["id"] for case in CASES]


def test_case_ids_are_unique() -> None:
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case_no", range(len(CASES)), ids=IDS)
def test_value_matches_mixpanel_semantics(store: Store, case_no: int) -> None:
    case = CASES[case_no]
    kind, value = _value(store, case_no, case["expr"])
    assert kind == case["type"], (case["expr"], case["props"], value)
    expected = case.get("value")
    if kind == "number":
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12)
    elif kind == "datetime":
        assert value == pytest.approx(_epoch(expected), abs=1e-3)
    else:
        assert value == expected


@pytest.mark.parametrize("case_no", range(len(CASES)), ids=IDS)
def test_compiled_forms_agree(store: Store, case_no: int) -> None:
    case = CASES[case_no]
    tree = parse_expr(case["expr"])
    params = Params()
    on = compile_on(tree, params)
    where, number = compile_where(tree, params), compile_number(tree, params)
    got_where, got_on, got_number = _select(store, case_no, [where, on.sql, number], params)

    assert bool(got_where) is (case["type"] == "boolean" and case.get("value") is True)
    keys = list(got_on) if on.is_array else ([] if got_on is None else [got_on])
    assert sorted(keys) == sorted(expected_keys(case))
    if case["type"] == "number":
        assert got_number == pytest.approx(case["value"], rel=1e-12, abs=1e-12)
    else:
        assert got_number is None


@pytest.mark.parametrize(
    ("expr", "expected_sql_type"),
    [
        ('properties["a"]', "Array(String)"),
        ('string(properties["a"])', "Nullable(String)"),
        ('properties["distinct_id"]', "Nullable(String)"),
        ("[1, 2]", "Array(String)"),
    ],
    ids=["property", "string-cast", "column", "list-literal"],
)
def test_on_sql_types(store: Store, expr: str, expected_sql_type: str) -> None:
    params = Params()
    on = compile_on(parse_expr(expr), params)
    assert on.is_array is (expected_sql_type.startswith("Array"))
    (got,) = _select(store, 0, [on.sql], params)
    text = f"SELECT toTypeName({render(on.sql)}) FROM {store.db}.events WHERE project_id = 0"
    assert store.query(text, params.values) == [(expected_sql_type,)]
    del got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=expressions())
def test_random_expressions_run(store: Store, text: str) -> None:
    """Whatever compiles also runs: valid SQL, right types, on several kinds of events."""
    try:
        tree = parse_expr(text)
        params = Params()
        on = compile_on(tree, params)
        exprs = [compile_where(tree, params), on.sql, compile_number(tree, params)]
    except ExprError:
        return
    columns = ", ".join(render(e) for e in exprs)
    query = f"SELECT {columns} FROM {store.db}.events WHERE project_id < 12 OR project_id = {len(CASES)}"
    for got_where, _, got_number in store.query(query, params.values):
        assert got_where in (0, 1)
        assert got_number is None or math.isfinite(got_number)
