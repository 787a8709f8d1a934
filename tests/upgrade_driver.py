"""Upgrades in place, one store per process (chDB opens one data folder per process).

`python -m tests.upgrade_driver reference --data D --dump F --answers A`
    builds a store with today's migrations, loads a generated dataset through the real
    `/import` and `/engage` (plus saved funnels and a cohort), and writes every stored row
    of every table (`--dump`, a pickle) and the answers of a set of reports (`--answers`).

`python -m tests.upgrade_driver upgrade --data D --dump F --from-version K --answers A`
    builds a store of schema version K (only the migrations numbered ≤ K), writes the
    dumped rows into the tables that exist at K (only the columns that exist at K: what a
    release of that version could have stored), then opens it as today's release does
    (`apply_migrations`), writes the rows of the tables K did not have (features used after
    the upgrade), and writes the same reports' answers.

The test compares the two answer files. Tables fed by a materialised view are not
dumped: their rows come from the events written at version K and from the backfill of the
migration that creates them, as they would in a real store.
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from footfall.services.query.reports import _common
from footfall.shared.cohorts import WarehouseCohortStore, parse_cohort
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.saved.definitions import parse_funnel
from footfall.shared.schema import apply_migrations
from footfall.shared.schema.migrate import discover
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.warehouse.dsn import parse_dsn
from tests.factories import Dataset, make_dataset
from tests.integration.cohorts.data import load_profiles
from tests.integration.query.report_env import ReportEnv, app_for, build_env, load_dataset, rng

SEED = 20261126
ZONES = {1: "Europe/Berlin", 2: "America/New_York"}
LEDGER = "schema_migrations"


def versions() -> list[int]:
    return [version for version, _, _ in discover()]


def open_store(data: Path) -> ClickHouseWarehouse:
    data.mkdir(parents=True, exist_ok=True)
    return ClickHouseWarehouse(parse_dsn(f"chdb://{data.resolve()}"))


def dataset() -> Dataset:
    return make_dataset(SEED, n_events=400, zones=ZONES)


def view_targets(warehouse: ClickHouseWarehouse) -> set[str]:
    """Tables written by a materialised view (`CREATE MATERIALIZED VIEW … TO <table>`)."""
    rows = warehouse.query(
        "SELECT create_table_query FROM system.tables "
        "WHERE database = currentDatabase() AND engine = 'MaterializedView'"
    )
    targets = set()
    for (ddl,) in rows:
        after = ddl.split(" TO ", 1)[1].split()[0]
        targets.add(after.split(".")[-1].strip("`"))
    return targets


def stored_tables(warehouse: ClickHouseWarehouse) -> list[str]:
    rows = warehouse.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree%' ORDER BY name"
    )
    skip = view_targets(warehouse) | {LEDGER}
    return [name for (name,) in rows if name not in skip]


def columns_of(warehouse: ClickHouseWarehouse, table: str) -> list[str]:
    rows = warehouse.query(
        "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
        "AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY position",
        {"t": table},
    )
    return [name for (name,) in rows]


def dump(warehouse: ClickHouseWarehouse) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    out = {}
    for table in stored_tables(warehouse):
        columns = columns_of(warehouse, table)
        select = ", ".join(f"`{c}`" for c in columns)
        out[table] = (columns, [tuple(row) for row in warehouse.query(f"SELECT {select} FROM `{table}`")])
    return out


def restore(
    warehouse: ClickHouseWarehouse, rows: dict[str, tuple[list[str], list[tuple[Any, ...]]]], skip: set[str]
) -> list[str]:
    """Write the dumped rows of the tables this store has (but those in `skip`), in the columns
    it has: what a release of its schema version could have stored. Returns the tables written."""
    written = []
    present = set(stored_tables(warehouse))
    for table, (columns, data) in sorted(rows.items()):
        if table not in present or table in skip or not data:
            continue
        have = columns_of(warehouse, table)
        keep = [i for i, c in enumerate(columns) if c in have]
        warehouse.insert(table, [columns[i] for i in keep], [[row[i] for i in keep] for row in data])
        written.append(table)
    return written


def report_requests(
    data: Dataset, funnel_ids: dict[int, int], cohort_ids: dict[int, list[int]]
) -> list[tuple[int, str, dict[str, str]]]:
    requests: list[tuple[int, str, dict[str, str]]] = []
    for pid, spec in sorted(data.projects.items()):
        requests += [
            (pid, "/segmentation", rng(spec, event="View Item", unit="day")),
            (pid, "/segmentation", rng(spec, event="Purchase", type="unique", unit="week", on='properties["plan"]')),
            (pid, "/events", rng(spec, event='["App Open", "Sign Up"]', type="general", unit="day")),
            (pid, "/events/properties", rng(spec, event="View Item", name="$browser", type="general", unit="day")),
            (pid, "/funnels", rng(spec, funnel_id=str(funnel_ids[pid]))),
            (pid, "/retention", rng(spec, born_event="Sign Up", event="Purchase")),
            (pid, "/engage", {"where": 'defined(properties["plan"])', "output_properties": '["plan", "$name"]'}),
            *(
                (pid, "/engage", {"filter_by_cohort": orjson.dumps({"id": cohort}).decode()})
                for cohort in cohort_ids[pid]
            ),
            (pid, "/cohorts/list", {}),
        ]
    return requests


def answers(
    env: ReportEnv, data: Dataset, funnel_ids: dict[int, int], cohort_ids: dict[int, list[int]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_common, "utc_now", lambda: data.now)
        for pid, path, params in report_requests(data, funnel_ids, cohort_ids):
            r = env.query(pid, path, params)
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
            if isinstance(body, dict):
                body.pop("computed_at", None)
                body.pop("session_id", None)
            out[f"{pid} {path} {sorted(params.items())}"] = [r.status_code, body]
        for pid, spec in sorted(data.projects.items()):
            r = env.request(
                "GET",
                "/api/2.0/export",
                params={"from_date": spec.from_date, "to_date": spec.to_date},
                auth=(f"report-secret-{pid}", ""),
            )
            out[f"{pid} export"] = [r.status_code, sorted(r.text.splitlines())]
    return out


def reference(args: argparse.Namespace) -> dict[str, Any]:
    warehouse = open_store(Path(args.data))
    apply_migrations(warehouse)
    data = dataset()
    env = build_env(warehouse, ZONES)
    load_dataset(env, data)
    load_profiles(env, data, random.Random(SEED))
    funnels = WarehouseSavedStore(warehouse)
    name, parsed = parse_funnel(data.funnels[min(data.funnels)])
    funnel_ids = {pid: funnels.create_funnel(pid, name, parsed).funnel_id for pid in ZONES}
    cohorts = WarehouseCohortStore(warehouse)
    buyers = {"name": "b", "window": "90d", "event_selectors": [{"event": "Purchase"}]}
    # Buyers with or without a profile (the universe includes ids known from events only),
    # and the planners among them.
    definitions = [
        parse_cohort({"name": "buyers", "selector": 'behaviors["b"] >= 1', "behaviors": [buyers]}, existing={}),
        parse_cohort(
            {"name": "planners", "selector": 'defined(user["plan"]) and behaviors["b"] >= 1', "behaviors": [buyers]},
            existing={},
        ),
    ]
    cohort_ids = {pid: [cohorts.create(pid, d).id for d in definitions] for pid in ZONES}
    result = answers(env, data, funnel_ids, cohort_ids)
    Path(args.dump).write_bytes(pickle.dumps({"rows": dump(warehouse), "funnels": funnel_ids, "cohorts": cohort_ids}))
    Path(args.answers).write_bytes(orjson.dumps(result, option=orjson.OPT_SORT_KEYS))
    env.warehouse.command("SYSTEM START MERGES events")
    env.close()
    warehouse.close()
    return {"tables": len(result)}


def upgrade(args: argparse.Namespace) -> dict[str, Any]:
    saved = pickle.loads(Path(args.dump).read_bytes())  # noqa: S301 - written by `reference` above
    warehouse = open_store(Path(args.data))
    old = apply_migrations(warehouse, upto=args.from_version)
    before = restore(warehouse, saved["rows"], set())
    new = apply_migrations(warehouse)
    # The tables this version did not have yet are written by today's release, after the upgrade.
    after = restore(warehouse, saved["rows"], set(before))
    env = app_for(warehouse, ZONES)
    result = answers(env, dataset(), saved["funnels"], saved["cohorts"])
    Path(args.answers).write_bytes(orjson.dumps(result, option=orjson.OPT_SORT_KEYS))
    env.close()
    warehouse.close()
    return {"old": old, "new": new, "before": before, "after": after}


def main() -> int:
    parser = argparse.ArgumentParser(prog="tests.upgrade_driver")
    parser.add_argument("scenario", choices=["reference", "upgrade"])
    parser.add_argument("--data", required=True)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--answers", required=True)
    parser.add_argument("--from-version", type=int, default=0)
    args = parser.parse_args()
    result = reference(args) if args.scenario == "reference" else upgrade(args)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
