"""Cohorts on the 10M-event dataset with 100,000 profiles: `/cohorts/list` with 20 cohorts, one
3-behaviour cohort's count, and `/engage` page 0 by that cohort.

Dataset: the 10M events of `bench/query_segmentation.py` (FOOTFALL_BENCH_DIR, generated when
missing), copied once into FOOTFALL_BENCH_COHORTS_DIR (default /tmp/footfall-bench-cohorts-100k;
chDB opens a folder from one process at a time), plus 100,000 user profiles `user-0` …
`user-99999` (the events' users; the generator of `bench/query_engage.py`: 2% deleted, 10%
with an older version). The migrations fill `known_ids` from the events (m0008). The events
span 2025-01-01 .. 2025-01-30, so the reports' clock is set to 2025-01-31T00:00Z (the day
after), as the windows of a live deployment would end today.

20 cohorts are created through the management API (`POST /api/app/projects/1/cohorts`), each
with 1 to 3 behaviours (absolute and distinct-day counts, event selectors as text and trees,
day/week/month windows and a date range) and 0 to 2 profile leaves; two of them reference
others. Cases, over HTTP (uvicorn in a thread of this process, the embedded app of `footfall
serve`, query limits off, the count cache off so that every call computes), `--rounds` times
after a warm-up:

* `/cohorts/list` (all 20 counts: one statement);
* one 3-behaviour cohort's count (`GET …/cohorts/{id}`);
* `/engage` page 0 by that cohort (its members ranked into a paging snapshot, page 0 read);
* `/cohorts/list` again with the count cache on (60 s), for reference.

Each case reports wall time and the CPU this process spent per request (server, chDB threads
and client all run here: a figure that a busy machine inflates far less than wall time), the
load average, and the event properties read from hot columns (`FOOTFALL_HOT_PROPERTIES`; the
defaults cover the measured cohort's `$browser` selector, not the `price` selectors of the list).

Targets (issue 10): list < 2 s, one count < 300 ms, engage page 0 < 1 s.
Run: `.venv/bin/python -m bench query_cohorts` (or `python -m bench.query_cohorts --rounds N`).
Result: bench/results/query_cohorts.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench._common import BOOTSTRAP_ENV, write_result
from bench.query_engage import USERS
from bench.query_segmentation import DEFAULT_DIR as EVENTS_DIR
from bench.query_segmentation import EVENTS, _ms, _serve, ensure_dataset, unlimited_serve_settings

DEFAULT_DIR = Path(os.environ.get("FOOTFALL_BENCH_COHORTS_DIR", "/tmp/footfall-bench-cohorts-100k"))
PROFILES_VERSION = "1"
PROFILES = 100_000
NOW = datetime(2025, 1, 31, tzinfo=UTC)
TARGETS_MS = {"cohorts_list": 2000.0, "one_count": 300.0, "engage_page_0": 1000.0}


def ensure_data(path: Path) -> None:
    """The events copied into `path` and the profiles added (unless a complete copy is there)."""
    marker = path / f"READY-cohorts-{PROFILES_VERSION}-{PROFILES}"
    if marker.exists():
        return
    ensure_dataset(EVENTS_DIR)
    if path.exists():
        shutil.rmtree(path)
    shutil.copytree(EVENTS_DIR, path, symlinks=True)  # chDB links its tables into `store` (relative links)
    from footfall.shared.config import Env, StoreSettings
    from footfall.shared.schema import apply_migrations
    from footfall.shared.warehouse import open_warehouse

    warehouse = open_warehouse(StoreSettings.from_env(Env({**os.environ, **BOOTSTRAP_ENV}), path).dsn)
    try:
        started = time.perf_counter()
        apply_migrations(warehouse)  # m0008 fills known_ids from the 10M events
        warehouse.command("TRUNCATE TABLE profiles")
        for version in (1, 2):
            warehouse.command(USERS.replace("{s:UInt8}", str(version)), {"n": PROFILES, "version": version})
        warehouse.command("OPTIMIZE TABLE profiles FINAL")
        print(f"prepared the cohort dataset in {time.perf_counter() - started:.0f} s")
    finally:
        warehouse.close()
    marker.write_text("ok\n")


def _behaviour(event: str, *, days: bool = False, selector: Any = None, **time_range: Any) -> dict[str, Any]:
    count = {"event_selector": {"event": event, "selector": selector}, "type": "days" if days else "absolute"}
    return {"count": count, **time_range}


def _at_least(key: str, n: int) -> dict[str, Any]:
    return {"property": "behaviors", "value": key, "operator": ">=", "operand": n}


def _user(name: str, operator: str, operand: Any, kind: str = "string") -> dict[str, Any]:
    return {"property": "user", "value": name, "operator": operator, "operand": operand, "type": kind}


CHROME = {"property": "event", "value": "$browser", "operator": "==", "operand": "Chrome", "type": "string"}
THREE = {  # the measured one: three behaviours and two profile leaves
    "name": "engaged pro buyers",
    "behaviors": {
        "buys": _behaviour("event_07", window={"unit": "week", "value": 2}),
        "visits": _behaviour("event_01", days=True, window={"unit": "day", "value": 14}),
        "chrome": _behaviour("event_12", selector=CHROME, window={"unit": "month", "value": 1}),
    },
    "selector": {
        "operator": "and",
        "children": [
            _at_least("buys", 2),
            _at_least("visits", 3),
            {
                "operator": "or",
                "children": [_at_least("chrome", 1), _user("plan", "==", "pro")],
            },
            _user("age", ">=", 25, "number"),
        ],
    },
}


def cohort_bodies() -> list[dict[str, Any]]:
    """20 cohorts: the measured one first, then 19 of 1–3 behaviours and 0–2 profile leaves."""
    bodies = [THREE]
    for i in range(19):
        events = [f"event_{(i * 7 + k * 11) % 50:02d}" for k in range(1 + i % 3)]
        windows = [
            {"window": {"unit": "day", "value": 7 + i}},
            {"window": {"unit": "week", "value": 1 + i % 4}},
            {"from_date": "2025-01-05", "to_date": "2025-01-25"},
        ]
        behaviors = {
            f"b{k}": _behaviour(
                event,
                days=(i + k) % 3 == 0,
                selector='number(properties["price"]) > 100' if (i + k) % 4 == 0 else None,
                **windows[(i + k) % 3],
            )
            for k, event in enumerate(events)
        }
        leaves: list[dict[str, Any]] = [_at_least(key, 1 + i % 3) for key in behaviors]
        leaves += [
            _user("country", "!=", "US") if i % 2 else _user("is_trial", "==", False, "boolean"),
            _user("score", "<", 50, "number"),
        ][: i % 3]
        bodies.append(
            {
                "name": f"cohort {i}",
                "selector": {"operator": "and" if i % 2 else "or", "children": leaves},
                "behaviors": behaviors,
            }
        )
    return bodies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--data", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)

    from footfall.services.query.reports import _common
    from footfall.services.standalone.main import build_embedded

    ensure_data(args.data)
    _common.utc_now = lambda: NOW  # type: ignore[assignment]  # the dataset's "today"
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_USERNAME"], BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_SECRET"])
    for ttl in (0.0, 60.0):
        settings = unlimited_serve_settings(args.data)
        settings = dataclasses.replace(settings, query=dataclasses.replace(settings.query, cohort_count_ttl=ttl))
        embedded = build_embedded(settings)
        base, stop = _serve(embedded.app)
        try:
            with httpx.Client(base_url=base, auth=auth, timeout=300) as client:
                ids = _cohorts(client)
                measured = ids[0]

                def timed(method: str, url: str, **kw: Any) -> tuple[float, float, Any]:
                    t0, c0 = time.perf_counter(), _cpu()
                    r = client.request(method, url, **kw)
                    elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
                    if r.status_code != 200:
                        raise SystemExit(f"{url}: {r.status_code} {r.text[:500]}")
                    return elapsed, cpu, r.json()

                cases: list[tuple[str, str, str, dict[str, Any], float | None]] = [
                    ("/cohorts/list, 20 cohorts", "POST", "/api/2.0/cohorts/list", {}, TARGETS_MS["cohorts_list"]),
                    (
                        "one 3-behaviour count",
                        "GET",
                        f"/api/app/projects/1/cohorts/{measured}",
                        {},
                        TARGETS_MS["one_count"],
                    ),
                    (
                        "/engage page 0 by that cohort",
                        "GET",
                        "/api/2.0/engage",
                        {"params": {"filter_by_cohort": str(measured)}},
                        TARGETS_MS["engage_page_0"],
                    ),
                ]
                if ttl:
                    cases = [("/cohorts/list, 20 cohorts, cached counts", "POST", "/api/2.0/cohorts/list", {}, None)]
                for name, method, url, kw, target in cases:
                    samples: list[float] = []
                    cpus: list[float] = []
                    body: Any = None
                    for i in range(args.rounds + 2):
                        elapsed, cpu, body = timed(method, url, params={"project_id": "1", **kw.get("params", {})})
                        if i >= 2:  # warm-up
                            samples.append(elapsed)
                            cpus.append(cpu)
                    stats = {**_ms(samples), "cpu_median_ms": round(statistics.median(cpus) * 1000, 1)}
                    extra = _summary(body)
                    results.append({"case": name, "ours": stats, "target_ms": target, **extra})
                    print(
                        f"{name:44s} median {stats['median_ms']:7.1f} ms  min {stats['min_ms']:7.1f} ms"
                        f"  CPU {stats['cpu_median_ms']:7.1f} ms  load {os.getloadavg()[0]:.1f}"
                        f"  (target {target})  {extra}"
                    )
                _delete(client, ids)
        finally:
            stop()
            embedded.warehouse.close()
    write_result(
        "query_cohorts",
        {
            "dataset": {"events": EVENTS, "profiles": PROFILES, "path": str(args.data), "now": NOW.isoformat()},
            "cohorts": 20,
            "rounds": args.rounds,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "hot_properties": _hot_properties(),
            "targets_ms": TARGETS_MS,
            "results": results,
        },
    )


def _cohorts(client: httpx.Client) -> list[int]:
    """Create the 20 cohorts (two of them then reference others); their ids, the measured one first."""
    ids: list[int] = []
    for body in cohort_bodies():
        r = client.post("/api/app/projects/1/cohorts", json=body)
        if r.status_code != 201:
            raise SystemExit(f"creating {body['name']}: {r.status_code} {r.text[:500]}")
        ids.append(int(r.json()["results"]["id"]))
    for referrer, referenced, operator in ((ids[5], ids[0], "in"), (ids[6], ids[1], "not in")):
        r = client.get(f"/api/app/projects/1/cohorts/{referrer}")
        selector = r.json()["results"]["selector"]
        patched = {
            "operator": "and",
            "children": [selector, {"property": "cohort", "value": referenced, "operator": operator}],
        }
        r = client.patch(f"/api/app/projects/1/cohorts/{referrer}", json={"selector": patched})
        if r.status_code != 200:
            raise SystemExit(f"referencing: {r.status_code} {r.text[:500]}")
    return ids


def _delete(client: httpx.Client, ids: list[int]) -> None:
    """Remove the cohorts again (the referrers first), so that the next run starts from none."""
    for cohort_id in (ids[5], ids[6], *ids[:5], *ids[7:]):
        client.delete(f"/api/app/projects/1/cohorts/{cohort_id}")


def _cpu() -> float:
    """CPU seconds of this process so far: the server, chDB's threads and the client all run
    here, so a request's share is its CPU cost whatever else the machine runs."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _hot_properties() -> list[str] | None:
    """The event properties read from hot columns in this run (None: no hot columns here)."""
    try:
        from footfall.shared.schema import hot
    except ImportError:
        return None
    return list(hot.in_use())


def _summary(body: Any) -> dict[str, Any]:
    if isinstance(body, list):
        return {"counts": [item["count"] for item in body]}
    if isinstance(body, dict) and "total" in body:
        return {"total": body["total"]}
    if isinstance(body, dict) and "results" in body:
        return {"count": body["results"].get("count")}
    return {}


if __name__ == "__main__":
    main()
