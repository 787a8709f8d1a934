"""Every read of a tenant table carries the project guard of the requesting project.

The query service is driven over HTTP (`report_env.serving`: the real `/import` and
query routes) for a spread of requests to every report endpoint of
`services/query/app.py` (`REPORTS`) and to `/api/2.0/export`, against two projects with
data, each with its own secret. The warehouse the app uses is wrapped so that every
SQL text and its bound parameters sent through `query` / `query_columns` (and
`command`) while a request runs is recorded with the request.

Each recorded query is then explained by ClickHouse itself, `EXPLAIN indexes = 1 <sql>`
with the same parameters on the same store, and every `ReadFromMergeTree
(default.<table>)` step of a tenant table (`Table.tenant` in the catalog) must show a
`PrimaryKey` condition whose top-level conjuncts (the whole condition, or the
arguments of its outermost `and(...)`, nested `and`s flattened, never through `or` or
`not`) include `(project_id in [N, N])` with N the requesting project; for a
time-ordered table (`Table.time_column`) a top-level conjunct must also constrain the
time column. A read without a primary-key condition fails, and so does a query whose
plan holds fewer reads of a tenant table than its SQL text names (a read the index
analysis never saw). So the guard is checked on what the engine actually prunes by, not
on the text we generate.

The data puts rows of both projects in every tenant table the query service reads
(events, the materialised `event_counts_15m`, saved funnels and saved reports, profiles,
the /engage paging snapshots in `engage_sessions`, cohorts and the ids with events in
`known_ids` that cohort membership reads), so index analysis runs on each.
An `INSERT … SELECT` (the /engage snapshot) is explained through its `SELECT`, which is
what reads. `profile_updates` (the profile update log) and `profile_heads` are written and
read only by the profile store of the ingestion path, never by a query endpoint, so no
request here reads them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from footfall.services.query.app import REPORT_NAMES
from footfall.shared.cohorts import WarehouseCohortStore, parse_cohort
from footfall.shared.saved import WarehouseSavedStore, parse_bookmark, parse_funnel
from footfall.shared.schema.catalog import EVENTS, SAVED_REPORTS, TABLES, Table
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.factories import FUNNELS, Dataset, ProjectSpec, make_dataset
from tests.integration.query.report_env import ReportEnv, serving

pytestmark = pytest.mark.warehouse

SEED = 20240417
# Two projects, ids chosen so that neither is 1 (a guard bound to a constant 1 would pass
# for project 1 by accident), in zones with whole-hour and half-hour offsets.
ZONES = {3: "America/New_York", 8: "Asia/Kolkata"}
TENANT: dict[str, Table] = {name: t for name, t in TABLES.items() if t.tenant}
# The profile update log and its newest-arrival heads: ingestion only (see the docstring). The
# management tables of experiments, data-deletion tasks and migration jobs are read by their own
# routes only (through `source`), never by a query endpoint.
NOT_QUERIED = {"profile_updates", "profile_heads", "experiments", "data_deletions", "migration_jobs"}
QUERIED: dict[str, Table] = {name: t for name, t in TENANT.items() if name not in NOT_QUERIED}
EXPORT = "export"
ENDPOINTS = (*REPORT_NAMES, EXPORT)


# -- recording ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One HTTP request: the endpoint (a REPORTS key or "export"), project and parameters."""

    endpoint: str
    project_id: int
    params: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        return f"{self.endpoint} {dict(self.params)} (project {self.project_id})"


@dataclass(frozen=True)
class Recorded:
    call: Call
    sql: str
    parameters: dict[str, Any]
    method: str


class RecordingWarehouse:
    """The session warehouse, recording every statement sent while `current` names a request."""

    def __init__(self, inner: ClickHouseWarehouse) -> None:
        self.inner = inner
        self.current: Call | None = None
        self.recorded: list[Recorded] = []

    def _record(self, method: str, text: str, parameters: dict[str, Any] | None) -> None:
        if self.current is not None:
            self.recorded.append(Recorded(self.current, text, dict(parameters or {}), method))

    def query_columns(
        self, text: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        self._record("query_columns", text, parameters)
        return self.inner.query_columns(text, parameters)

    def query(self, text: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.query_columns(text, parameters)[1]

    def command(self, text: str, parameters: dict[str, Any] | None = None) -> Any:
        self._record("command", text, parameters)
        return self.inner.command(text, parameters)

    def __getattr__(self, name: str) -> Any:  # insert, run, close, dsn: the inner warehouse's
        return getattr(self.inner, name)


# -- the checker ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Func:
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Atom:
    text: str


Node = Func | Atom

_FUNC_HEAD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")


def _skip_quoted(text: str, i: int) -> int:
    """The index after the quoted string starting at `i` (backslash escapes allowed)."""
    quote, j = text[i], i + 1
    while j < len(text) and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise ValueError(f"unterminated quote in {text!r}")
    return j + 1


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets and quoted strings (balanced or ValueError).
    Brackets are counted, not matched: an interval like `['1', +Inf)` closes with `)`."""
    parts: list[str] = []
    depth = start = i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'`\"":
            i = _skip_quoted(text, i)
            continue
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {ch!r} in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
        i += 1
    if depth:
        raise ValueError(f"unbalanced brackets in {text!r}")
    parts.append(text[start:].strip())
    return parts


def _closing(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at `open_at` (counted, as in `_split_top`)."""
    depth, i = 0, open_at
    while i < len(text):
        ch = text[i]
        if ch in "'`\"":
            i = _skip_quoted(text, i)
            continue
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced brackets in {text!r}")


def parse_condition(text: str) -> Node:
    """The top-level structure of a key condition as EXPLAIN prints it: `and(a, b)`,
    `or(...)`, `not(...)` are functions; anything else (`(project_id in [3, 3])`,
    `true`, `unknown`) is an atom."""
    text = text.strip()
    head = _FUNC_HEAD.match(text)
    if head is not None and _closing(text, head.end() - 1) == len(text) - 1:
        inner = text[head.end() : -1]
        return Func(head.group(1), tuple(parse_condition(part) for part in _split_top(inner)))
    _split_top(text)  # balanced, or ValueError
    return Atom(text)


def conjuncts(node: Node) -> list[Node]:
    """The top-level conjuncts: the arguments of the outermost `and`, nested `and`s flattened."""
    if isinstance(node, Func) and node.name == "and":
        return [c for arg in node.args for c in conjuncts(arg)]
    return [node]


def guard_problems(condition: str, table: Table, project_id: int) -> list[str]:
    """What the primary-key `condition` of a read of `table` lacks (empty: guarded)."""
    try:
        tops = conjuncts(parse_condition(condition))
    except ValueError as exc:
        return [f"unparsable condition ({exc})"]
    atoms = [c.text for c in tops if isinstance(c, Atom)]
    problems = []
    wanted = f"(project_id in [{project_id}, {project_id}])"
    if wanted not in atoms:
        other = [a for a in atoms if a.startswith("(project_id ")]
        if other:
            problems.append(f"project guard {other} is not {wanted}")
        elif "project_id" in condition:
            problems.append(f"project_id appears only below the top level, not as {wanted}")
        else:
            problems.append(f"no project guard {wanted}")
    if table.time_column is not None:
        mention = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(table.time_column)}(?![A-Za-z0-9_])")
        if not any(mention.search(a) for a in atoms):
            problems.append(f"no top-level condition on the time column {table.time_column}")
    return problems


@dataclass
class Read:
    """One `ReadFromMergeTree` step of a plan: the table and its primary-key condition."""

    table: str
    condition: str | None = None


_READ_STEP = re.compile(r"ReadFromMergeTree \(([^()]*)\)")
_ALNUM = re.compile(r"[A-Za-z0-9_]")


def _indent(line: str) -> int:
    m = _ALNUM.search(line)
    return m.start() if m else len(line)


def _is_step(line: str) -> bool:
    """A plan step header (`└──Filter (...)`), as opposed to a property line of a step."""
    at = _indent(line)
    return line[:at].rstrip().endswith("──")


def plan_reads(lines: Sequence[str]) -> list[Read]:
    """The `ReadFromMergeTree` steps of an `EXPLAIN indexes = 1` output, with the
    `Condition:` of their `PrimaryKey` index section (None when there is none)."""
    reads: list[Read] = []
    current: Read | None = None
    pk_indent: int | None = None
    for line in lines:
        found = _READ_STEP.search(line)
        if found is not None:
            name = found.group(1)
            current = Read(name.split(".", 1)[1] if "." in name else name)
            reads.append(current)
            pk_indent = None
            continue
        if current is None:
            continue
        if _is_step(line):
            current, pk_indent = None, None
            continue
        content = line[_indent(line) :].rstrip()
        if content == "PrimaryKey":
            pk_indent = _indent(line)
        elif pk_indent is not None:
            if _indent(line) <= pk_indent:
                pk_indent = None
            elif content.startswith("Condition:") and current.condition is None:
                current.condition = content[len("Condition:") :].strip()
    return reads


_NAMED = re.compile(
    r"(?<![A-Za-z0-9_.])(?:FROM|JOIN)\s+(?:default\.)?`?(" + "|".join(map(re.escape, TENANT)) + r")`?(?![A-Za-z0-9_])",
    re.IGNORECASE,
)


def named_reads(text: str) -> dict[str, int]:
    """How many times the SQL text reads each tenant table (`FROM t` / `JOIN t`)."""
    out: dict[str, int] = {}
    for m in _NAMED.finditer(text):
        out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


# A bare `count()` over key conditions is answered from an implicit projection
# (`ReadFromPreparedSource (_exact_count_projection)`), a plan step that shows no index
# analysis. Such a query is explained once more with those projections off, which shows
# the primary-key condition the projection was computed with.
_NO_PROJECTIONS = " SETTINGS optimize_use_implicit_projections = 0, optimize_trivial_count_query = 0"


def _other_reads(lines: Sequence[str]) -> list[str]:
    """Leaf read steps other than `ReadFromMergeTree` (projections, NullSource)."""
    out = []
    for line in lines:
        content = line[_indent(line) :]
        if (content.startswith(("ReadFrom", "ReadNothing"))) and not content.startswith("ReadFromMergeTree"):
            out.append(content.strip())
    return out


_INSERT_HEAD = re.compile(r"\s*INSERT\s+INTO\s+[A-Za-z_][A-Za-z0-9_]*\s*\([^()]*\)\s*(?=SELECT\b)", re.IGNORECASE)


def readable(text: str) -> str:
    """What to explain: the statement, or the `SELECT` of an `INSERT INTO t (cols) SELECT …`
    (EXPLAIN takes only a SELECT; the SELECT is what reads)."""
    head = _INSERT_HEAD.match(text)
    return text[head.end() :] if head is not None else text


def explain(warehouse: ClickHouseWarehouse, text: str, parameters: dict[str, Any]) -> list[str]:
    text = readable(text)
    lines = [row[0] for row in warehouse.query("EXPLAIN indexes = 1 " + text, parameters)]
    projected = any("projection" in step for step in _other_reads(lines))
    if projected and "SETTINGS" not in text.upper():
        lines = [row[0] for row in warehouse.query("EXPLAIN indexes = 1 " + text + _NO_PROJECTIONS, parameters)]
    return lines


def check_query(
    warehouse: ClickHouseWarehouse, text: str, parameters: dict[str, Any], project_id: int
) -> tuple[list[tuple[str, str]], list[str]]:
    """Explain one query; return (the tenant tables whose reads were checked, with their
    conditions) and the problems found."""
    lines = explain(warehouse, text, parameters)
    reads = plan_reads(lines)
    checked, problems = [], []
    for read in reads:
        table = TENANT.get(read.table)
        if table is None:
            continue
        if read.condition is None:
            problems.append(f"{read.table}: read without a PrimaryKey condition (no index analysis)")
            continue
        checked.append((read.table, read.condition))
        problems += [
            f"{read.table}: {p}; condition: {read.condition}" for p in guard_problems(read.condition, table, project_id)
        ]
    in_plan: dict[str, int] = {}
    for read in reads:
        in_plan[read.table] = in_plan.get(read.table, 0) + 1
    for name, n in named_reads(text).items():
        if in_plan.get(name, 0) < n:
            problems.append(
                f"{name}: the SQL reads it {n} time(s), the plan shows {in_plan.get(name, 0)} "
                f"ReadFromMergeTree step(s) (other read steps: {_other_reads(lines)}): a read "
                f"without index analysis"
            )
    return checked, problems


# -- data -----------------------------------------------------------------------------------------
# Saved funnels beyond tests.factories.FUNNELS (1: three disjoint steps; 2: a custom event
# and a selector; 3: steps sharing an event name, the general variant).
MORE_FUNNELS: dict[int, dict[str, Any]] = {
    4: {"name": "Single step", "steps": [{"event": "App Open"}]},
    5: {
        "name": "Single custom step",
        "length": 2,
        "length_unit": "hour",
        "steps": [{"custom_event": {"id": 7, "name": "Views", "events": ["View Item", "Page View"]}}],
    },
    6: {
        "name": "Shared names with a selector",
        "length": 1,
        "length_unit": "day",
        "steps": [
            {"event": "View Item"},
            {"event": "View Item", "selector": 'properties["plan"] == "pro"'},
            {"event": "Add To Cart"},
        ],
    },
}

BOOKMARKS: dict[str, dict[str, Any]] = {
    "day-general": {"events": ["App Open", "View Item", "Never Happened"], "unit": "day"},
    "hour-unique": {"events": ["Purchase"], "unit": "hour", "type_of_count": "unique"},
    "week-average-where": {
        "events": ["View Item", "Search"],
        "unit": "week",
        "type_of_count": "average",
        "where": 'properties["plan"] == "pro"',
    },
    "month-on": {"events": ["App Open", "Purchase"], "unit": "month", "on": 'properties["$browser"]', "limit": 2},
    "last-days-unique-on": {
        "events": ["View Item"],
        "type_of_count": "unique",
        "on": 'properties["tags"]',
        "last_days": 10,
    },
    "where-on-general": {
        "events": ["Purchase", "Add To Cart"],
        "where": 'defined(properties["price"])',
        "on": 'properties["plan"]',
    },
}


@dataclass
class Loaded:
    env: ReportEnv
    recorder: RecordingWarehouse
    dataset: Dataset
    funnels: dict[int, dict[int, int]] = field(default_factory=dict)  # project -> funnel key -> funnel_id
    bookmarks: dict[int, dict[str, int]] = field(default_factory=dict)  # project -> case -> bookmark_id
    sessions: dict[int, str] = field(default_factory=dict)  # project -> an /engage paging session
    cohorts: dict[int, dict[str, int]] = field(default_factory=dict)  # project -> name -> cohort id


GROUP_KEY = "company"
ENGAGE_PAGED = {"where": 'properties["n"] >= 0', "page_size": "3"}


def _profiles(warehouse: ClickHouseWarehouse, dataset: Dataset) -> None:
    """User profiles for every user of each project's events and a few group profiles, each
    with an older version inserted first (so `profiles` has several parts)."""
    rows: list[list[Any]] = []
    for pid, spec in dataset.projects.items():
        users = sorted({str(e["properties"]["distinct_id"]) for e in spec.events} - {""})
        for n, uid in enumerate(users):
            rows.append([pid, "", uid, json.dumps({"n": n, "plan": ["free", "pro"][n % 2]}), 0, 2])
        for n, gid in enumerate(["acme", "globex", "initech"]):
            rows.append([pid, GROUP_KEY, gid, json.dumps({"n": n}), 0, 2])
    older = [[pid, gk, key, json.dumps({"old": True}), 0, 1] for pid, gk, key, *_ in rows[::2]]
    columns = ["project_id", "group_key", "profile_id", "properties", "deleted", "version"]
    warehouse.insert("profiles", columns, older)
    warehouse.insert("profiles", columns, rows)


def _cohorts(warehouse: ClickHouseWarehouse, pid: int) -> dict[str, int]:
    """A static cohort, a dynamic one with behaviours, a profile leaf and a reference to it,
    and one that references the dynamic one negated."""
    store = WarehouseCohortStore(warehouse)
    made: dict[str, int] = {}
    bodies: dict[str, dict[str, Any]] = {
        "static": {"name": "static", "distinct_ids": ["u0001", "u0002", "nobody"]},
        "buyers": {
            "name": "buyers",
            "behaviors": {
                "buys": {
                    "count": {"event_selector": {"event": "Purchase", "selector": WHERE}, "type": "days"},
                    "window": {"unit": "month", "value": 2},
                },
                "opens": {
                    "count": {"event_selector": {"event": "App Open", "selector": None}},
                    "from_date": "2024-01-01",
                    "to_date": "2030-12-31",
                },
            },
            "selector": {
                "operator": "or",
                "children": [
                    {"property": "behaviors", "value": "buys", "operator": ">=", "operand": 1},
                    {"property": "behaviors", "value": "opens", "operator": ">", "operand": 2},
                    {"property": "user", "value": "plan", "operator": "==", "operand": "pro", "type": "string"},
                ],
            },
        },
        "others": {"name": "others", "selector": {"property": "cohort", "value": 0, "operator": "not in"}},
    }
    for name, body in bodies.items():
        if name == "others":
            body["selector"]["value"] = made["buyers"]
        existing = {c.id: c.definition for c in store.list(pid)}
        made[name] = store.create(pid, parse_cohort(body, existing=existing)).id
    return made


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[Loaded]:
    dataset = make_dataset(SEED, n_events=250, zones=ZONES)
    recorder = RecordingWarehouse(warehouse)
    with serving(recorder, dataset) as env:  # type: ignore[arg-type]
        store = WarehouseSavedStore(warehouse)
        state = Loaded(env, recorder, dataset)
        for pid, spec in dataset.projects.items():
            state.funnels[pid] = {}
            for key, definition in sorted({**FUNNELS, **MORE_FUNNELS}.items()):
                name, parsed = parse_funnel(definition)
                state.funnels[pid][key] = store.create_funnel(pid, name, parsed).funnel_id
            state.bookmarks[pid] = {}
            for case, params in BOOKMARKS.items():
                body: dict[str, Any] = {"type": "insights", **params}
                if "last_days" not in body:
                    body.update(from_date=spec.from_date, to_date=spec.to_date)
                name, bookmark = parse_bookmark({"name": case, "params": body})
                state.bookmarks[pid][case] = store.create_bookmark(pid, name, bookmark).bookmark_id
        _profiles(warehouse, dataset)
        for pid in dataset.projects:
            state.cohorts[pid] = _cohorts(warehouse, pid)
        for pid in dataset.projects:  # a multi-page /engage answer: a snapshot in engage_sessions
            r = env.query(pid, "/engage", ENGAGE_PAGED)
            assert r.status_code == 200 and r.json()["total"] > 3, r.text[:300]
            state.sessions[pid] = r.json()["session_id"]
        yield state


# -- the requests ---------------------------------------------------------------------------------
TYPES = ("general", "unique", "average")
UNITS = ("minute", "hour", "day", "week", "month")
# Every type and every unit, not every pair of them: the guard is one scope whatever the
# aggregation and the bucket, and the full product tripled the test's requests.
KINDS_AND_UNITS = [(TYPES[i % len(TYPES)], unit) for i, unit in enumerate(UNITS)]
# `interval` back from now, per unit (the /events family without dates).
BACK = {"minute": "90", "hour": "30", "day": "7", "week": "3", "month": "2"}
WHERE = 'properties["plan"] == "pro"'
ON = 'properties["$browser"]'
ON_LIST = 'properties["tags"]'
PRICE = 'number(properties["price"])'

Request = tuple[str, dict[str, str]]


def _dates(spec: ProjectSpec, unit: str = "day") -> dict[str, str]:
    """The project's suggested range; one local day for minute buckets."""
    if unit == "minute":
        return {"from_date": spec.to_date, "to_date": spec.to_date}
    return {"from_date": spec.from_date, "to_date": spec.to_date}


def _segmentation(spec: ProjectSpec) -> Iterator[Request]:
    for kind, unit in KINDS_AND_UNITS:
        base = {"event": "View Item", "type": kind, "unit": unit, **_dates(spec, unit)}
        yield "segmentation", base
        yield "segmentation", {**base, "where": WHERE}
        yield "segmentation", {**base, "on": ON}
        yield "segmentation", {**base, "on": ON_LIST, "where": WHERE, "limit": "2"}
        yield "segmentation", {"event": "App Open", "type": kind, "unit": unit, "interval": BACK[unit]}
    for kind in TYPES:
        yield "segmentation", {"event": "App Open", "type": kind, "interval": "7", **_dates(spec)}
        yield "segmentation", {"event": "App Open", "type": kind, "interval": "7", "on": ON, **_dates(spec)}
    yield "segmentation", {"event": "Purchase", "format": "csv", "on": ON, **_dates(spec)}
    for kind, unit in KINDS_AND_UNITS:
        base = {"event": "Purchase", "type": kind, "unit": unit, "on": PRICE, **_dates(spec, unit)}
        yield "segmentation/numeric", base
        yield "segmentation/numeric", {**base, "where": WHERE, "buckets": "3"}
    for kind in TYPES:
        yield "segmentation/numeric", {"event": "Purchase", "type": kind, "on": PRICE, "unit": "day", "interval": "5"}
    for path in ("segmentation/sum", "segmentation/average"):
        for unit in UNITS:
            base = {"event": "Purchase", "unit": unit, "on": PRICE, **_dates(spec, unit)}
            yield path, base
            yield path, {**base, "where": WHERE}
        yield path, {"event": "Purchase", "on": PRICE, "unit": "hour", "interval": "30"}


def _events(spec: ProjectSpec) -> Iterator[Request]:
    names = '["App Open", "Purchase", "Never Happened"]'
    for kind, unit in KINDS_AND_UNITS:
        yield "events", {"event": names, "type": kind, "unit": unit, **_dates(spec, unit)}
        yield "events", {"event": names, "type": kind, "unit": unit, "interval": BACK[unit]}
    for kind in TYPES:
        yield "events/top", {"type": kind}
        yield "events/names", {"type": kind}
    yield "events", {"event": '["View Item"]', "format": "csv", **_dates(spec)}
    yield "events/top", {"type": "unique", "limit": "3"}
    yield "events/names", {"type": "average", "limit": "4"}
    for kind, unit in KINDS_AND_UNITS:
        yield (
            "events/properties",
            {"event": "View Item", "name": "plan", "type": kind, "unit": unit, **_dates(spec, unit)},
        )
    for kind in TYPES:
        yield "events/properties", {"event": "View Item", "name": "tags", "type": kind, "unit": "day", "interval": "7"}
    yield (
        "events/properties",
        {"event": "View Item", "name": "plan", "values": '["pro", "free", 3]', "limit": "1", **_dates(spec)},
    )
    yield "events/properties/top", {"event": "View Item"}
    yield "events/properties/top", {"event": "Purchase", "limit": "3"}
    yield "events/properties/values", {"event": "View Item", "name": "plan"}
    yield "events/properties/values", {"name": "tags", "limit": "5"}
    yield "events/properties/values", {"name": "$browser"}


def _funnels(spec: ProjectSpec, funnel_ids: dict[int, int]) -> Iterator[Request]:
    dates = _dates(spec)
    variants = [
        {},
        {"unit": "week"},
        {"unit": "month"},
        {"interval": "3"},
        {"length": "2", "length_unit": "hour"},
        {"where": WHERE},
        {"on": ON},
        {"on": ON_LIST, "where": 'defined(properties["price"]) or properties["plan"] == "pro"', "limit": "2"},
        {"on": ON, "unit": "week", "interval": "5"},
    ]
    # Every funnel with three of the variants and every variant with two of the funnels (the
    # funnels take the disjoint or the general query; the variants are one scope each way), not
    # every pair: the full product was a quarter of the test's requests.
    ids = [fid for _, fid in sorted(funnel_ids.items())]
    pairs = max(len(ids), len(variants)) * 2
    for i in range(pairs):
        yield "funnels", {"funnel_id": str(ids[i % len(ids)]), **dates, **variants[i % len(variants)]}
    yield "funnels/list", {}


def _retention(spec: ProjectSpec) -> Iterator[Request]:
    dates = _dates(spec)
    cases = [
        {"born_event": "Sign Up"},
        {"born_event": "Sign Up", "event": "Purchase", "interval_count": "7"},
        {"born_event": "App Open", "born_where": WHERE},
        {
            "born_event": "App Open",
            "born_where": WHERE,
            "where": 'properties["$browser"] != "Safari"',
            "interval_count": "4",
        },
        {"born_event": "Sign Up", "interval": "2", "interval_count": "5", "unbounded_retention": "true"},
        {"born_event": "App Open", "unit": "week", "interval_count": "3"},
        {"born_event": "App Open", "unit": "month", "interval_count": "2"},
        {"born_event": "App Open", "on": ON, "interval_count": "3"},
        {"born_event": "App Open", "born_where": WHERE, "on": ON_LIST, "limit": "2", "unit": "week"},
        {"retention_type": "compounded", "event": "App Open", "interval_count": "5"},
        {"retention_type": "compounded", "unit": "week", "interval_count": "2"},
        {"retention_type": "compounded", "unit": "month", "event": "View Item", "where": WHERE},
        {
            "retention_type": "compounded",
            "event": "View Item",
            "where": 'defined(properties["price"])',
            "unbounded_retention": "1",
            "interval_count": "6",
        },
        {"retention_type": "compounded", "event": "View Item", "on": ON_LIST, "limit": "2", "interval_count": "2"},
    ]
    for case in cases:
        yield "retention", {**dates, **case}
    for unit in ("day", "week", "month"):
        for slot in ("hour", "day"):
            yield "retention/addiction", {**dates, "unit": unit, "addiction_unit": slot}
    yield "retention/addiction", {**dates, "unit": "week", "addiction_unit": "day", "event": "App Open"}
    yield "retention/addiction", {**dates, "unit": "week", "addiction_unit": "hour", "where": WHERE}
    yield "retention/addiction", {**dates, "unit": "day", "addiction_unit": "hour", "on": ON, "limit": "2"}
    yield (
        "retention/addiction",
        {**dates, "unit": "month", "addiction_unit": "day", "event": "View Item", "where": WHERE, "on": ON_LIST},
    )


def _stream(spec: ProjectSpec) -> Iterator[Request]:
    ids: list[object] = []
    for raw in spec.events:
        did = raw["properties"]["distinct_id"]
        if did not in ids:
            ids.append(did)
        if len(ids) == 5:
            break
    yield "stream/query", {"distinct_ids": json.dumps([*ids, "", "nobody"]), **_dates(spec)}
    yield "stream/query", {"distinct_ids": json.dumps(ids[:1]), "from_date": spec.to_date, "to_date": spec.to_date}


def _export(spec: ProjectSpec) -> Iterator[Request]:
    dates = _dates(spec)
    yield EXPORT, dates
    yield EXPORT, {**dates, "event": '["Purchase"]'}
    yield EXPORT, {**dates, "event": '["App Open", "View Item"]', "limit": "5", "time_in_ms": "true"}
    yield EXPORT, {"from_date": spec.to_date, "to_date": spec.to_date}


def _jql(spec: ProjectSpec) -> Iterator[Request]:
    events = f'Events({{from_date: "{spec.from_date}", to_date: "{spec.to_date}"'
    yield "jql", {"script": f"function main() {{ return {events}}}).groupBy(['name'], mixpanel.reducer.count()); }}"}
    selected = ", event_selectors: [{event: 'Purchase', selector: 'properties[\"price\"] > 10'}]})"
    yield "jql", {"script": f"function main() {{ return join({events}{selected}, People(), {{type: 'full'}}); }}"}
    people = 'People({user_selectors: [{selector: \'properties["plan"] == "pro"\'}]})'
    yield "jql", {"script": f"function main() {{ return {people}.reduce(mixpanel.reducer.count()); }}"}
    filtered = ".filter(e => e.properties.plan !== 'x').groupBy(['name'], mixpanel.reducer.count())"
    yield "jql", {"script": f"function main() {{ return {events}}}){filtered}; }}"}  # windows, lazy properties
    by_plan = ".groupBy(['properties.plan'], mixpanel.reducer.avg('properties.n'))"  # in SQL
    yield "jql", {"script": f"function main() {{ return {people}{by_plan}; }}"}


def _engage(state: Loaded, pid: int) -> Iterator[Request]:
    group = int.from_bytes(hashlib.blake2b(GROUP_KEY.encode(), digest_size=8).digest(), "big", signed=True)
    purchases = json.dumps(
        [
            {"name": "buys", "window": "30d", "event_selectors": [{"event": "Purchase", "selector": WHERE}]},
            {"name": "opens", "window": "7d", "event_selectors": [{"event": "App Open"}]},
        ]
    )
    yield "engage", {}
    yield "engage", {"where": 'properties["plan"] == "pro"', "output_properties": '["plan"]'}
    yield "engage", ENGAGE_PAGED  # a snapshot: INSERT … SELECT, its size, page 0 from it
    yield "engage", {**ENGAGE_PAGED, "page": "2", "session_id": state.sessions[pid]}
    yield "engage", {"distinct_ids": '["u0001", "u0002", "nobody"]'}
    yield "engage", {"data_group_id": str(group), "where": 'properties["n"] > 0'}
    yield "engage", {"behaviors": purchases, "where": 'behaviors["buys"] > 0 or behaviors["opens"] >= 2'}
    yield "engage", {"behaviors": purchases, "where": 'behaviors["opens"] >= 0', "page_size": "2"}
    cohorts = state.cohorts[pid]
    yield "engage", {"filter_by_cohort": json.dumps({"id": cohorts["others"]}), "where": WHERE, "page_size": "2"}
    yield "engage", {"filter_by_cohort": str(cohorts["static"]), "include_all_users": "false"}
    raw = {"selector": {"property": "cohort", "value": cohorts["buyers"], "operator": "in"}, "behaviors": {}}
    yield "engage", {"filter_by_cohort": json.dumps({"raw_cohort": raw}), "distinct_ids": '["u0001", "u0003"]'}


def requests_for(state: Loaded, pid: int) -> Iterator[Request]:
    spec = state.dataset.projects[pid]
    yield from _segmentation(spec)
    yield from _events(spec)
    yield from _funnels(spec, state.funnels[pid])
    yield from _retention(spec)
    yield from _stream(spec)
    for bookmark_id in state.bookmarks[pid].values():
        yield "insights", {"bookmark_id": str(bookmark_id)}
    yield from _export(spec)
    yield from _engage(state, pid)
    yield from _jql(spec)
    yield "cohorts/list", {}


def _send(env: ReportEnv, pid: int, endpoint: str, params: dict[str, str]) -> Any:
    if endpoint == EXPORT:
        return env.query(pid, "/export", params, prefix="/api/2.0")
    return env.query(pid, "/" + endpoint, params)


# -- the tests ------------------------------------------------------------------------------------
# One test per requesting project (each one's requests, the same spread): two halves of about a
# minute each, which the parallel suite can run on two workers.
@pytest.mark.slow
@pytest.mark.parametrize("requesting", sorted(ZONES))
def test_every_tenant_read_is_guarded_by_the_requesting_project(loaded: Loaded, requesting: int) -> None:
    started = time.perf_counter()
    inner = loaded.recorder.inner
    for name in QUERIED:  # index analysis needs parts: every table read holds rows of both projects
        per_project = dict(inner.query(f"SELECT project_id, count() FROM {name} GROUP BY project_id"))
        assert all(per_project.get(pid, 0) > 0 for pid in ZONES), f"{name} lacks rows: {per_project}"

    failed: list[str] = []
    calls = 0
    recorder = loaded.recorder
    recorder.recorded.clear()
    for pid in (requesting,):
        for endpoint, params in requests_for(loaded, pid):
            calls += 1
            recorder.current = Call(endpoint, pid, tuple(params.items()))
            try:
                r = _send(loaded.env, pid, endpoint, params)
            finally:
                recorder.current = None
            if r.status_code != 200:
                failed.append(f"{endpoint} {params} (project {pid}): {r.status_code} {r.text[:300]}")

    requested = time.perf_counter() - started
    violations: list[str] = []
    covered: set[tuple[str, str]] = set()
    reads_checked = 0
    explained: dict[tuple[str, str, int], tuple[list[tuple[str, str]], list[str]]] = {}
    for rec in recorder.recorded:
        if rec.method == "command":
            if named_reads(rec.sql):
                violations.append(f"{rec.call.describe()}: a tenant table read through command(): {rec.sql[:300]}")
            continue
        key = (rec.sql, json.dumps(rec.parameters, sort_keys=True, default=str), rec.call.project_id)
        if key not in explained:
            explained[key] = check_query(inner, rec.sql, rec.parameters, rec.call.project_id)
        checked, problems = explained[key]
        covered |= {(rec.call.endpoint, table) for table, _ in checked}
        reads_checked += len(checked)
        violations += [f"{rec.call.describe()}: {p}\n    SQL: {rec.sql[:400]}" for p in problems]
    elapsed = time.perf_counter() - started
    print(
        f"\ntenant guard: {calls} requests, {len(recorder.recorded)} statements, {len(explained)} explained, "
        f"{reads_checked} tenant-table reads checked, {len(covered)} (endpoint, table) pairs, {elapsed:.1f} s "
        f"({requested:.1f} s of requests)"
    )
    assert not violations and not failed, (
        f"{len(violations)} unguarded tenant-table read(s):\n"
        + "\n".join(violations[:40])
        + f"\n{len(failed)} request(s) that did not succeed (their queries went unchecked):\n"
        + "\n".join(failed[:20])
    )

    # The check saw something for every endpoint, and every tenant table somewhere.
    endpoints_seen = {endpoint for endpoint, _ in covered}
    assert endpoints_seen == set(ENDPOINTS), (
        f"endpoints without a checked tenant read: {set(ENDPOINTS) - endpoints_seen}"
    )
    tables_seen = {table for _, table in covered}
    assert tables_seen == set(QUERIED), f"tenant tables never read by any request: {set(QUERIED) - tables_seen}"
    expected = {
        ("funnels", "saved_funnels"),
        ("funnels/list", "saved_funnels"),
        ("insights", "saved_reports"),
        ("events", "event_counts_15m"),
        ("events/top", "event_counts_15m"),
        ("events/names", "event_counts_15m"),
        ("segmentation", "event_counts_15m"),
        ("insights", "event_counts_15m"),
        ("engage", "profiles"),
        ("engage", "engage_sessions"),
        ("engage", "cohorts"),
        ("engage", "known_ids"),
        ("cohorts/list", "cohorts"),
        ("cohorts/list", "known_ids"),
        ("cohorts/list", "profiles"),
        ("jql", "profiles"),
        *((endpoint, "events") for endpoint in ENDPOINTS if endpoint != "funnels/list"),
    }
    assert expected <= covered, f"(endpoint, table) pairs never checked: {sorted(expected - covered)}"


# -- the checker catches what it must -------------------------------------------------------------
def test_condition_parser() -> None:
    tree = parse_condition(
        "and((event in ['a, b)', 'x']), and((time in (-Inf, '1711929600')), (project_id in [3, 3])))"
    )
    assert [c.text for c in conjuncts(tree) if isinstance(c, Atom)] == [
        "(event in ['a, b)', 'x'])",
        "(time in (-Inf, '1711929600'))",
        "(project_id in [3, 3])",
    ]
    assert guard_problems("(project_id in [3, 3])", TABLES["saved_funnels"], 3) == []
    assert guard_problems("and((time in ['1', +Inf)), (project_id in [3, 3]))", EVENTS, 3) == []
    assert guard_problems("and((time in ['1', +Inf)), (project_id in [3, 3]))", EVENTS, 8)
    assert guard_problems("or((time in ['1', +Inf)), (project_id in [3, 3]))", EVENTS, 3)
    assert guard_problems("and(or((event in ['x', 'x']), (project_id in [3, 3])), (time in ['1', +Inf)))", EVENTS, 3)
    assert guard_problems("and(not((project_id in [3, 3])), (time in ['1', +Inf)))", EVENTS, 3)
    assert guard_problems("(project_id in [3, 3])", EVENTS, 3) == ["no top-level condition on the time column time"]
    assert guard_problems("and((project_id in 1-element set), (time in ['1', +Inf)))", EVENTS, 3)
    assert guard_problems("true", TABLES["saved_reports"], 3)
    with pytest.raises(ValueError):
        parse_condition("and((project_id in [3, 3])")


def test_checker_reports_unguarded_reads(loaded: Loaded) -> None:
    wh = loaded.recorder.inner
    pid, other = sorted(ZONES)
    window = {"t0": datetime(2024, 3, 1, tzinfo=UTC), "t1": datetime(2024, 5, 1, tzinfo=UTC)}
    time_range = "time >= {t0:DateTime64(3, 'UTC')} AND time < {t1:DateTime64(3, 'UTC')}"

    def problems(text: str, parameters: dict[str, Any]) -> list[str]:
        return check_query(wh, text, parameters, pid)[1]

    # Positive control: what `source` writes passes, with FINAL and without.
    for final in (True, False):
        binds = Params()
        scan = source(
            EVENTS, Scope(pid, window["t0"], window["t1"]), binds, final=final, where=sql("JSONHas(properties, 'plan')")
        )
        assert problems(render(sql("SELECT count() FROM {}", scan)), binds.values) == []
    binds = Params()
    saved = render(sql("SELECT count() FROM {}", source(SAVED_REPORTS, Scope(pid), binds, final=True)))
    assert problems(saved, binds.values) == []
    # A bare count() is answered from a projection; its guard is still seen (explained without it).
    guarded_count = f"SELECT count() FROM events WHERE project_id = {{p:UInt64}} AND {time_range}"
    assert problems(guarded_count, {**window, "p": pid}) == []

    cases = {
        "no guard": (f"SELECT count() FROM events WHERE {time_range}", window),
        "guard inside OR": (
            f"SELECT count() FROM events WHERE (project_id = {{p:UInt64}} OR event = 'x') AND {time_range}",
            {**window, "p": pid},
        ),
        "guard of another project": (
            f"SELECT count() FROM events WHERE project_id = {{p:UInt64}} AND {time_range}",
            {**window, "p": other},
        ),
        "no time range": ("SELECT count() FROM events WHERE project_id = {p:UInt64}", {"p": pid}),
        "one guarded read, one not": (
            f"SELECT count() FROM (SELECT event FROM events WHERE project_id = {{p:UInt64}} AND {time_range} "
            f"UNION ALL SELECT event FROM event_counts_15m WHERE quarter >= {{t0:DateTime64(3, 'UTC')}})",
            {**window, "p": pid},
        ),
        "constant false, no index analysis": (
            f"SELECT count() FROM events WHERE project_id = {{p:UInt64}} AND {time_range} AND 0",
            {**window, "p": pid},
        ),
        "saved reports, no guard": ("SELECT count() FROM saved_reports FINAL WHERE deleted = 0", {}),
    }
    expected = {
        "no guard": "events: no project guard (project_id in [3, 3])",
        "guard inside OR": "events: project_id appears only below the top level",
        "guard of another project": "events: project guard ['(project_id in [8, 8])'] is not (project_id in [3, 3])",
        "no time range": "events: no top-level condition on the time column time",
        "one guarded read, one not": "event_counts_15m: no project guard",
        "constant false, no index analysis": "events: read without a PrimaryKey condition",
        "saved reports, no guard": "saved_reports: no project guard",
    }
    for name, (text, parameters) in cases.items():
        found = problems(text, parameters)
        assert len(found) == 1 and found[0].startswith(expected[name]), f"{name}: {found}"
