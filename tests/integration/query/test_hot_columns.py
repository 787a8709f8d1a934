"""Hot property columns (`footfall.shared.schema.hot`): exact, and used by the compiler.

* A hot name added to an `events` table that already holds data: the old parts do not
  store the column, reading it from them gives the expression (checked against
  `JSONExtractRaw` at query time and against a plain-Python reading of the JSON), before
  and after the background `MATERIALIZE COLUMN` has rewritten them; `ensure` is idempotent.
* The reports answer identically with and without the hot columns on the same data (the
  generated dataset of `tests/factories.py`, loaded with the columns present so new parts
  store them), equal to the oracle, and the compiled SQL really reads the columns.

Run every report suite with hot columns too: `FOOTFALL_HOT_PROPERTIES=<names> pytest
tests/integration/query` (the session store then has them; `tests/integration/conftest.py`).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from footfall.services.query.params import Params as QueryParams
from footfall.services.query.reports import segmentation
from footfall.shared.expr import ExprError, check_expr, compile_number, compile_on, compile_where, parse_expr
from footfall.shared.saved import WarehouseSavedStore, parse_funnel
from footfall.shared.schema import hot
from footfall.shared.sql import Params, render
from footfall.shared.warehouse import ClickHouseWarehouse
from tests import oracle
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import ReportEnv, check_against_oracle, diff, rng, serving

pytestmark = pytest.mark.warehouse

COLUMNS = ["project_id", "time", "event", "distinct_id", "insert_id", "properties", "dedup_hash", "ingested_at"]


def _drop(warehouse: ClickHouseWarehouse, names: list[str]) -> None:
    """Remove the test's hot columns again (and any unfinished mutation on events)."""
    warehouse.command("KILL MUTATION WHERE database = currentDatabase() AND table = 'events' SYNC")
    for name in names:
        if name not in hot.in_use():
            column = hot.column_name(name)  # no wait for the mutation: merges may be stopped
            warehouse.command(f"ALTER TABLE events DROP COLUMN IF EXISTS {column} SETTINGS mutations_sync = 0")


def _wait_for_mutations(warehouse: ClickHouseWarehouse, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ((pending,),) = warehouse.query(
            "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND table = 'events' "
            "AND NOT is_done"
        )
        if pending == 0:
            return
        time.sleep(0.2)
    raise AssertionError("the MATERIALIZE COLUMN mutations did not finish")


def _parts_without(warehouse: ClickHouseWarehouse, name: str) -> int:
    ((parts,),) = warehouse.query(
        "SELECT count() FROM system.parts WHERE database = currentDatabase() AND table = 'events' AND active"
    )
    ((having,),) = warehouse.query(
        "SELECT count() FROM system.parts_columns WHERE database = currentDatabase() AND table = 'events' "
        "AND active AND column = {c:String}",
        {"c": hot.column_name(name)},
    )
    return int(parts) - int(having)


# -- a hot name added to a table with data ------------------------------------------------------
ADDED = ["hot-test ✓ browser", 'hot\'test\\plan "q"', "hot_test_price"]
VALUES: list[Any] = ["Chrome", "Firefox", 'quo"te \\ back', "日本", "", None, True, False, 0, -1.5, 1e21, [1, "a"], {}]


def _properties(r: random.Random) -> str:
    """A `properties` text: mostly objects with some of the test's names, some odd texts."""
    roll = r.random()
    if roll < 0.05:
        return "not json"
    if roll < 0.08:
        return "[1, 2]"
    props = {name: r.choice(VALUES) for name in ADDED if r.random() < 0.7}
    props["other"] = r.randrange(100)
    return json.dumps(props, ensure_ascii=r.random() < 0.5)


def _python_raw_defined(text: str, name: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and name in value


def _python_equals(text: str, name: str, literal: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get(name) == literal


def _compiled(names: list[str]) -> tuple[str, dict[str, Any]]:
    """One row per event: insert_id and, per name, the `on` keys, a `where`, `defined()` and a number."""
    params = Params()
    parts = []
    for name in names:
        prop = json.dumps(name, ensure_ascii=False)
        parts.append(render(compile_on(check_expr(parse_expr(f"properties[{prop}]")), params).sql))
        parts.append(render(compile_where(check_expr(parse_expr(f'properties[{prop}] == "Chrome"')), params)))
        parts.append(render(compile_where(check_expr(parse_expr(f"defined(properties[{prop}])")), params)))
        parts.append(render(compile_number(check_expr(parse_expr(f"properties[{prop}]")), params)))
    return f"SELECT insert_id, {', '.join(parts)} FROM events FINAL ORDER BY insert_id", params.values


def _answers(warehouse: ClickHouseWarehouse, names: list[str]) -> tuple[str, list[tuple[Any, ...]]]:
    text, values = _compiled(names)
    return text, warehouse.query(text, values)


def _check_exact(warehouse: ClickHouseWarehouse, rows: list[list[Any]]) -> None:
    for name in ADDED:
        column = hot.column_name(name)
        for source in ("events", "events FINAL"):
            ((wrong, total),) = warehouse.query(
                f"SELECT countIf({column} != JSONExtractRaw(properties, {{n:String}})), count() FROM {source}",
                {"n": name},
            )
            assert (wrong, total) == (0, len(rows)), (name, source)
        # In PREWHERE, and against Python's reading of the JSON.
        ((chrome,),) = warehouse.query(f"SELECT groupArray(insert_id) FROM events PREWHERE {column} = '\"Chrome\"'")
        assert sorted(chrome) == sorted(r[4] for r in rows if _python_equals(r[5], name, "Chrome"))
    # The compiler's SQL gives the same answers from the columns as from the JSON text, and
    # `where`/`defined()` agree with Python.
    with hot.using(ADDED):
        hot_sql, with_hot = _answers(warehouse, ADDED)
    with hot.using(()):
        json_sql, without = _answers(warehouse, ADDED)
    assert all(hot.column_name(n) in hot_sql for n in ADDED) and "JSONExtractRaw" in json_sql
    assert with_hot == without
    by_id = {r[4]: r[5] for r in rows}
    for row in with_hot:
        text = by_id[row[0]]
        for i, name in enumerate(ADDED):
            assert row[2 + 4 * i] == _python_equals(text, name, "Chrome"), (text, name)
            assert row[3 + 4 * i] == _python_raw_defined(text, name), (text, name)


def test_hot_name_added_to_a_table_with_data_is_exact_before_and_after_materialising(
    clean_warehouse: ClickHouseWarehouse,
) -> None:
    wh = clean_warehouse
    r = random.Random(17)
    t0 = datetime(2024, 3, 1, tzinfo=UTC)
    rows = [
        [1, t0 + timedelta(minutes=i), "e", f"u{i % 7}", f"i{i:04d}", _properties(r), bytes([i % 256]) * 16, t0]
        for i in range(600)
    ]
    wh.command("SYSTEM STOP MERGES events")
    try:
        for chunk in (rows[:200], rows[200:400], rows[400:]):  # three parts written before the columns exist
            wh.insert("events", COLUMNS, chunk)
        assert hot.ensure(wh, ADDED) == tuple(ADDED)
        assert all(_parts_without(wh, n) == 3 for n in ADDED)  # merges stopped: nothing rewritten yet
        _check_exact(wh, rows)
        # A part inserted now stores the columns; a second `ensure` starts no second mutation.
        extra = [[1, t0, "e", "u0", "i9999", json.dumps({ADDED[0]: "Chrome"}), b"\xff" * 16, t0]]
        wh.insert("events", COLUMNS, extra)
        rows += extra
        assert all(_parts_without(wh, n) == 3 for n in ADDED)
        assert hot.ensure(wh, ADDED) == tuple(ADDED)
        ((mutations, commands),) = wh.query(
            "SELECT uniqExact(mutation_id), count() FROM system.mutations WHERE database = currentDatabase() "
            "AND table = 'events' AND command LIKE '%MATERIALIZE COLUMN%'"
        )
        assert (mutations, commands) == (1, len(ADDED))  # one mutation (one pass) for the columns of one start
        wh.command("SYSTEM START MERGES events")
        _wait_for_mutations(wh)
        assert all(_parts_without(wh, n) == 0 for n in ADDED)
        _check_exact(wh, rows)
    finally:
        wh.command("SYSTEM START MERGES events")
        _drop(wh, ADDED)


def test_unusable_column_of_a_hot_name_is_not_used(clean_warehouse: ClickHouseWarehouse) -> None:
    """A column of the derived name that is not the materialised expression is left alone."""
    name = "hot-test-squatted"
    wh = clean_warehouse
    wh.command(f"ALTER TABLE events ADD COLUMN IF NOT EXISTS {hot.column_name(name)} String DEFAULT 'x'")
    try:
        assert hot.ensure(wh, [name, ADDED[2]]) == (ADDED[2],)
    finally:
        _drop(wh, [name, ADDED[2]])


# -- the expression conformance cases over hot columns -------------------------------------------
CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance" / "expr_semantics.json"


@pytest.mark.slow
def test_conformance_cases_give_the_same_values_from_hot_columns(clean_warehouse: ClickHouseWarehouse) -> None:
    """Every case of tests/conformance/expr_semantics.json (checked against its expected value
    by test_expr_sql.py over the JSON text) gives the same `where`, `on` and `number` when
    every property it names, and every other property of its event, is hot."""
    wh = clean_warehouse
    cases: list[dict[str, Any]] = json.loads(CONFORMANCE.read_text())["cases"]
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    names: set[str] = set()
    rows = []
    for i, case in enumerate(cases):
        props = {k: v for k, v in case["props"].items() if k not in ("time", "distinct_id", "$insert_id")}
        names |= set(props) | set(re.findall(r'properties\["((?:[^"\\]|\\.)*)"\]', case["expr"]))
        text = json.dumps(props, ensure_ascii=False)
        rows.append([i, t0, "Test event", "u1", f"i{i}", text, i.to_bytes(16, "big"), t0])
    wh.insert("events", COLUMNS, rows)
    hot_names = sorted(n for n in names if n and "\\" not in n)
    before = hot.in_use()
    trees = []
    for case in cases:
        try:
            trees.append(check_expr(parse_expr(case["expr"])))
        except ExprError:
            continue
    try:
        assert hot.ensure(wh, hot_names) == tuple(hot_names)
        read_from_columns = 0
        for start in range(0, len(trees), 25):  # every expression over every case's event
            chunk = trees[start : start + 25]
            answers = []
            for names_in_use in (hot_names, ()):
                with hot.using(names_in_use):
                    params = Params()
                    exprs = [e for t in chunk for e in (compile_where(t, params), compile_on(t, params).sql)]
                    exprs += [compile_number(t, params) for t in chunk]
                    text = f"SELECT {', '.join(render(e) for e in exprs)} FROM events ORDER BY project_id"
                    answers.append((text, wh.query(text, params.values)))
            (hot_sql, with_hot), (_, without) = answers
            assert len(with_hot) == len(rows) and with_hot == without, start
            read_from_columns += hot_sql.count("hp_") > 0
        assert read_from_columns == -(-len(trees) // 25)
    finally:
        hot.use(before)
        _drop(wh, hot_names)


# -- reports with and without hot columns ---------------------------------------------------------
HOT = ["$browser", "$os", "plan", "price", "tags", "utm_source", "amount", "meta"]
SEED = 20240521


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[tuple[ReportEnv, Dataset, dict[int, int]]]:
    before = hot.in_use()
    assert hot.ensure(warehouse, HOT) == tuple(HOT)  # before the data: new parts store the columns
    dataset = make_dataset(SEED, n_events=800, zones={1: "Europe/Berlin", 2: "America/New_York"})
    try:
        with serving(warehouse, dataset) as env:
            store = WarehouseSavedStore(warehouse)
            funnels = {}  # project -> a saved funnel with a selector (tests.factories.FUNNELS)
            for pid in dataset.projects:
                name, parsed = parse_funnel(dataset.funnels[2])
                funnels[pid] = store.create_funnel(pid, name, parsed).funnel_id
            yield env, dataset, funnels
    finally:
        hot.use(before)
        _drop(warehouse, HOT)


REQUESTS: list[tuple[str, str, dict[str, str]]] = [
    (
        "on-where",
        "/segmentation",
        {"event": "View Item", "on": 'properties["$browser"]', "where": 'properties["plan"] == "pro"'},
    ),
    ("on-list", "/segmentation", {"event": "View Item", "on": 'properties["tags"]', "type": "unique"}),
    ("on-object", "/segmentation", {"event": "App Open", "on": 'properties["meta"]'}),
    (
        "where-defined",
        "/segmentation",
        {"event": "Sign Up", "where": 'defined(properties["utm_source"]) and properties["$os"] != "iOS"'},
    ),
    ("numeric", "/segmentation/numeric", {"event": "Purchase", "on": 'properties["price"]'}),
    (
        "numeric-amount",
        "/segmentation/numeric",
        {"event": "View Item", "on": 'number(properties["amount"])', "buckets": "5"},
    ),
    ("sum", "/segmentation/sum", {"event": "Purchase", "on": 'number(properties["price"])'}),
    (
        "event-properties",
        "/events/properties",
        {"event": "App Open", "name": "$browser", "type": "general", "unit": "day"},
    ),
    ("funnel-where-on", "/funnels", {"where": 'properties["$browser"] != "Safari"', "on": 'properties["plan"]'}),
    (
        "retention-on",
        "/retention",
        {"born_event": "App Open", "on": 'properties["plan"]', "where": 'defined(properties["price"])'},
    ),
]
ORACLES = {
    "/segmentation": oracle.segmentation.segmentation,
    "/segmentation/numeric": oracle.segmentation.numeric,
    "/events/properties": oracle.properties.properties,
}


@pytest.mark.parametrize(("path", "params"), [(p, q) for _, p, q in REQUESTS], ids=[i for i, _, _ in REQUESTS])
def test_report_answers_the_same_with_and_without_hot_columns(
    loaded: tuple[ReportEnv, Dataset, dict[int, int]], path: str, params: dict[str, str]
) -> None:
    env, dataset, funnels = loaded
    for pid, spec in sorted(dataset.projects.items()):
        query = rng(spec, **params)
        if path == "/funnels":
            query["funnel_id"] = str(funnels[pid])
        with hot.using(HOT):
            with_hot = env.query(pid, path, query)
            if path in ORACLES:
                check_against_oracle(env, dataset, pid, path, query, ORACLES[path])
        with hot.using(()):
            without = env.query(pid, path, query)
        assert with_hot.status_code == without.status_code == 200, (with_hot.text[:500], without.text[:500])
        assert not diff(with_hot.json(), without.json()), (path, query)


def test_compiled_report_reads_the_hot_columns() -> None:
    """The substitution is real: the report's SQL names the columns and binds no hot name."""

    class Ctx:
        project_id, timezone = 1, "UTC"
        params = QueryParams(
            {
                "event": "e",
                "from_date": "2024-03-01",
                "to_date": "2024-03-02",
                "on": 'properties["$browser"]',
                "where": 'properties["plan"] == "pro" and properties["cold"] == 1',
            }
        )

    now = datetime(2024, 3, 5, tzinfo=UTC)
    with hot.using(HOT):
        query = segmentation.build(segmentation.SegmentationRequest.parse(Ctx(), now))
    assert hot.column_name("$browser") in query.text and hot.column_name("plan") in query.text
    bound = set(query.binds.values.values())
    assert "cold" in bound and "$browser" not in bound and "plan" not in bound
    with hot.using(()):
        cold = segmentation.build(segmentation.SegmentationRequest.parse(Ctx(), now))
    assert "hp_" not in cold.text and "$browser" in set(cold.binds.values.values())
