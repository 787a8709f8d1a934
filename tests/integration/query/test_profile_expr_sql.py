"""The expression language's profile context, compiled and run on chDB, against the oracle.

Every case of `tests/conformance/expr_semantics.json` is re-read as a profile expression:
its properties are one profile's (in a `profiles` table of a fresh database; `time`,
`distinct_id` and `$insert_id` are ordinary properties here), and the compiled `where`
and `number` forms must agree with the oracle's profile evaluator
(`tests/oracle/expr.py`, `evaluate_profile`). Cases the oracle refuses in the profile
context (`event[...]`) must be refused by `check_expr` too. Behaviour counts come from a
column given to the compiler. Every case runs with ClickHouse's lazy (short-circuit)
evaluation and with every branch evaluated, which is how /engage runs its `where`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from footfall.shared.expr import ExprError, check_expr, compile_number, compile_where, parse_expr
from footfall.shared.schema.catalog import PROFILES
from footfall.shared.sql import Params, render, sql
from tests.oracle import expr as oracle

pytestmark = pytest.mark.warehouse

CASES_FILE = Path(__file__).resolve().parents[2] / "conformance" / "expr_semantics.json"
CASES: list[dict[str, Any]] = json.loads(CASES_FILE.read_text())["cases"]
COUNT = 7  # the behaviour count every profile row carries in `bc`


class Store:
    def __init__(self, client: Any, database: str) -> None:
        self.client, self.db = client, database

    def row(self, case_no: int, columns: list[str], params: Params, *, lazy: bool = True) -> tuple[Any, ...]:
        """The columns for one case's profile; `lazy=False` evaluates every branch, as /engage does."""
        text = f"SELECT {', '.join(columns)} FROM {self.db}.profiles WHERE profile_id = {{case_id:String}}"
        if not lazy:
            text += " SETTINGS short_circuit_function_evaluation = 'disable'"
        rows = list(self.client.query(text, parameters={**params.values, "case_id": str(case_no)}).result_rows)
        assert len(rows) == 1
        return rows[0]


@pytest.fixture(scope="module")
def store(chdb_client: Any) -> Iterator[Store]:
    client = chdb_client
    db = f"profile_expr_{uuid.uuid4().hex[:12]}"
    client.command(f"CREATE DATABASE {db}")
    client.command(
        PROFILES.create_statement().replace("CREATE TABLE IF NOT EXISTS profiles", f"CREATE TABLE {db}.profiles")
    )
    client.command(f"ALTER TABLE {db}.profiles ADD COLUMN bc Array(UInt64) DEFAULT [{COUNT}]")
    rows = [[1, "", str(i), json.dumps(case["props"], ensure_ascii=False), 0, 1] for i, case in enumerate(CASES)]
    client.insert(
        f"{db}.profiles",
        rows,
        column_names=["project_id", "group_key", "profile_id", "properties", "deleted", "version"],
    )
    yield Store(client, db)
    client.command(f"DROP DATABASE {db}")


def _oracle(text: str, props: dict[str, Any], counts: dict[str, int]) -> Any:
    return oracle.evaluate_profile(text, props, counts)


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("case_no", range(len(CASES)), ids=[c["id"] for c in CASES])
def test_profile_where_and_number_match_the_oracle(store: Store, case_no: int, lazy: bool) -> None:
    case = CASES[case_no]
    text = str(case["expr"])
    try:
        oracle.parse_profile(text)
    except oracle.ExprError:
        with pytest.raises(ExprError):
            check_expr(parse_expr(text), context="profiles")
        return
    tree = check_expr(parse_expr(text), context="profiles")
    params = Params()
    where = render(compile_where(tree, params, properties_of=PROFILES))
    number = render(compile_number(tree, params, properties_of=PROFILES))
    got_where, got_number = store.row(case_no, [where, number], params, lazy=lazy)
    value = _oracle(text, case["props"], {})
    assert bool(got_where) == (value is True), f"{text!r} on {case['props']}: where {got_where}, oracle {value!r}"
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if is_number:
        assert got_number is not None and math.isclose(got_number, float(value), rel_tol=1e-12, abs_tol=1e-12), (
            f"{text!r}: number {got_number}, oracle {value!r}"
        )
    else:
        assert got_number is None, f"{text!r}: number {got_number}, oracle {value!r}"


BEHAVIOR_CASES = [
    ('behaviors["b"] == 7', True),
    ('behaviors["b"] > 6 and behaviors["b"] < 8', True),
    ('behaviors["b"] * 2 == 14 and not (behaviors["b"] == "7")', True),
    ('behaviors["b"] in [1, 7]', True),
    ('string(behaviors["b"]) == "7"', True),
    ('behaviors["b"] == 0', False),
    ('defined(behaviors["b"]) and properties["s"] == "abc"', True),
]


@pytest.mark.parametrize(("text", "expected"), BEHAVIOR_CASES, ids=[t for t, _ in BEHAVIOR_CASES])
def test_behavior_counts_are_numbers(store: Store, text: str, expected: bool) -> None:
    case_no = next(i for i, c in enumerate(CASES) if c["props"].get("s") == "abc")
    tree = check_expr(parse_expr(text), context="profiles", behaviors=["b"])
    params = Params()
    where = render(compile_where(tree, params, properties_of=PROFILES, counts={"b": sql("arrayElement(bc, 1)")}))
    (got,) = store.row(case_no, [where], params)
    assert bool(got) is expected
    assert (_oracle(text, CASES[case_no]["props"], {"b": COUNT}) is True) is expected
