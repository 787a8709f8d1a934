"""`/api/2.0/export` with `where` (issue 15) against the export oracle (tests/oracle/export.py)
on generated data: duplicates, conflicting copies, numbers as strings, lists, nulls, unicode.
An invalid `where` is a 400 naming its position; nothing is streamed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from footfall.services.query.settings import ExportLimits, QuerySettings
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import ReportEnv, build_env, load_dataset, release
from tests.oracle.export import export as oracle_export

pytestmark = pytest.mark.warehouse

SEED = 20261126
ZONES = {1: "UTC", 2: "America/New_York"}

WHERES = {
    "none": None,
    "plan": 'properties["plan"] == "pro"',
    "number-cast": 'number(properties["price"]) > 10',
    "defined-or": 'defined(properties["utm_source"]) or properties["plan"] == "enterprise"',
    "list-in": '"vip" in properties["tags"]',
    "not-null": 'not (properties["plan"] == null)',
    "time-column": 'properties["time"] > datetime("2024-03-20T12:00:00")',
    "unicode": 'defined(properties["ключ"])',
    "nothing": "false",
}


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=500, zones=ZONES)
    settings = QuerySettings(rate_per_hour=0, concurrency=0, export=ExportLimits(0, 0, 0))  # no limits
    env = build_env(warehouse, ZONES, settings)
    load_dataset(env, dataset)
    try:
        yield env, dataset
    finally:
        release(env)


def _exported(env: ReportEnv, project_id: int, params: dict[str, str]) -> list[dict[str, Any]]:
    r = env.query(project_id, "/export", params, prefix="/api/2.0")
    assert r.status_code == 200, r.text[:2000]
    rows = [orjson.loads(line) for line in r.content.splitlines() if line.strip()]
    for row in rows:
        assert isinstance(row["properties"].pop("mp_processing_time_ms"), int)
    return sorted(
        rows,
        key=lambda o: (
            o["properties"]["time"],
            o["properties"]["$insert_id"],
            o["event"],
            o["properties"]["distinct_id"],
        ),
    )


@pytest.mark.parametrize("project_id", sorted(ZONES))
@pytest.mark.parametrize("name", list(WHERES))
def test_export_where_matches_oracle(loaded: tuple[ReportEnv, Dataset], project_id: int, name: str) -> None:
    env, dataset = loaded
    spec = dataset.projects[project_id]
    params = {"from_date": spec.from_date, "to_date": spec.to_date}
    if WHERES[name] is not None:
        params["where"] = str(WHERES[name])
    if name == "plan":
        params["event"] = '["View Item", "Purchase"]'
        params["time_in_ms"] = "true"
    ours = _exported(env, project_id, params)
    want = oracle_export(spec.events, spec.tz, params)
    assert ours == want
    if name not in ("none", "nothing"):
        everything = oracle_export(spec.events, spec.tz, {k: v for k, v in params.items() if k != "where"})
        assert 0 < len(want) < len(everything), "the filter must keep some events and drop others"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ('properties["plan"] == ', "Error in where: syntax error at position 22"),
        ('properties["plan"] == pro', 'text values are quoted: "pro"'),
        ('propertes["plan"] == "pro"', "did you mean properties[...]?"),
        ('nosuch(properties["x"])', "Error in where: invalid expression at position 0"),
    ],
    ids=["syntax", "unquoted", "misspelt", "unknown-function"],
)
def test_export_invalid_where_is_400(loaded: tuple[ReportEnv, Dataset], where: str, message: str) -> None:
    env, dataset = loaded
    spec = dataset.projects[1]
    r = env.query(
        1, "/export", {"from_date": spec.from_date, "to_date": spec.to_date, "where": where}, prefix="/api/2.0"
    )
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"request", "error"} and message in body["error"], body
