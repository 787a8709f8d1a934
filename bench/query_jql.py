"""`/jql` latency on the 10M-event dataset of `query_segmentation` (cached in FOOTFALL_BENCH_DIR,
default /tmp/footfall-bench-10m; project 1, Europe/Berlin, 30 days, 50 names, 100k users).

Cases (issue 13's targets): `Events` over the 30 days `.groupBy(["name"], count())`; the same
with a JavaScript `filter` function; `groupByUser` over one day with a custom reducer. Each is
called over HTTP (the embedded app of `footfall serve` in a thread of this process) `--rounds`
times after one warm-up, and its answer checked against a hand-written ClickHouse query.
Result: bench/results/query_jql.json (medians, and the peak RSS of this process).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench._common import BOOTSTRAP_ENV, write_result
from bench.query_segmentation import DEFAULT_DIR, FROM, TO, TZ, _serve, ensure_dataset, unlimited_serve_settings

DAY = "2025-01-15"
CASES: dict[str, tuple[str, str]] = {
    "groupBy-name-count-30d": (
        f"function main() {{ return Events({{from_date: '{FROM}', to_date: '{TO}'}})"
        ".groupBy(['name'], mixpanel.reducer.count()); }",
        "SELECT event, count() FROM events FINAL WHERE project_id = 1 AND toDate(time, '{tz}') BETWEEN '{a}' AND '{b}'"
        " GROUP BY event ORDER BY event",
    ),
    "filter-fn-groupBy-30d": (
        f"function main() {{ return Events({{from_date: '{FROM}', to_date: '{TO}'}})"
        ".filter(function (e) { return e.properties.plan === 'pro'; })"
        ".groupBy(['name'], mixpanel.reducer.count()); }",
        "SELECT event, count() FROM events FINAL WHERE project_id = 1 AND toDate(time, '{tz}') BETWEEN '{a}' AND '{b}'"
        " AND JSONExtractString(properties, 'plan') = 'pro' GROUP BY event ORDER BY event",
    ),
    # The same filter reaching the property by a computed name: no projection, every event's
    # properties text is read and parsed in the engine (what any script reaching further costs).
    "filter-fn-dynamic-groupBy-30d": (
        f"function main() {{ var k = 'plan'; return Events({{from_date: '{FROM}', to_date: '{TO}'}})"
        ".filter(function (e) { return e.properties[k] === 'pro'; })"
        ".groupBy(['name'], mixpanel.reducer.count()); }",
        "SELECT event, count() FROM events FINAL WHERE project_id = 1 AND toDate(time, '{tz}') BETWEEN '{a}' AND '{b}'"
        " AND JSONExtractString(properties, 'plan') = 'pro' GROUP BY event ORDER BY event",
    ),
    "filter-fn-groupBy-1d": (
        f"function main() {{ return Events({{from_date: '{DAY}', to_date: '{DAY}'}})"
        ".filter(function (e) { return e.properties.plan === 'pro'; })"
        ".groupBy(['name'], mixpanel.reducer.count()); }",
        "SELECT event, count() FROM events FINAL WHERE project_id = 1 AND toDate(time, '{tz}') = '{a}'"
        " AND JSONExtractString(properties, 'plan') = 'pro' GROUP BY event ORDER BY event",
    ),
    "groupByUser-custom-1d": (
        f"function main() {{ return Events({{from_date: '{DAY}', to_date: '{DAY}'}})"
        ".groupByUser(function (state, events) { return (state || 0) + events.length; })"
        ".reduce(mixpanel.reducer.sum('value')); }",
        "SELECT count() FROM events FINAL WHERE project_id = 1 AND toDate(time, '{tz}') = '{a}'",
    ),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)

    from footfall.services.query.jql import JqlLimits
    from footfall.services.standalone.main import build_embedded

    ensure_dataset(args.data)
    load_before = [round(x, 2) for x in os.getloadavg()]
    settings = unlimited_serve_settings(args.data)
    limits = JqlLimits(timeout_seconds=600, memory_mb=2048, max_output_bytes=100 * 1024 * 1024)
    settings = dataclasses.replace(settings, query=dataclasses.replace(settings.query, jql=limits))
    embedded = build_embedded(settings)
    warehouse = embedded.warehouse
    base, stop = _serve(embedded.app)
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_USERNAME"], BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_SECRET"])
    results: list[dict[str, Any]] = []
    try:
        with httpx.Client(base_url=base, auth=auth, timeout=900) as client:
            for name in args.cases.split(","):
                script, hand = CASES[name]
                a, b = (DAY, DAY) if name.endswith("1d") else (FROM, TO)
                expected = warehouse.query(hand.format(tz=TZ, a=a, b=b))
                samples, cpu = [], []
                for i in range(args.rounds + args.warmup):
                    t0, c0 = time.perf_counter(), _cpu()
                    r = client.post("/api/2.0/jql", params={"project_id": "1"}, data={"script": script})
                    dt, dc = time.perf_counter() - t0, _cpu() - c0
                    assert r.status_code == 200, r.text[:500]
                    if i >= args.warmup:
                        samples.append(dt)
                        cpu.append(dc)
                    print(f"{name}: {dt:.2f} s, {dc:.2f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)
                body = r.json()
                if name.startswith("groupByUser"):
                    assert body == [expected[0][0]], (body, expected)
                else:
                    assert [(g["key"][0], g["value"]) for g in body] == [tuple(row) for row in expected], name
                results.append(
                    {
                        "case": name,
                        "median_s": round(statistics.median(samples), 3),
                        "min_s": round(min(samples), 3),
                        # CPU of this process (HTTP, chDB, V8 threads): what a quiet machine would need.
                        "median_cpu_s": round(statistics.median(cpu), 3),
                        "rows_checked": len(expected),
                        "script": script,
                    }
                )
    finally:
        stop()
        warehouse.close()
    write_result(
        "query_jql",
        {
            "dataset": {"events": 10_000_000, "days": 30, "users": 100_000, "time_zone": TZ, "path": str(args.data)},
            "rounds": args.rounds,
            "warmup": args.warmup,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "targets_s": {"groupBy-name-count-30d": 1, "filter-fn-groupBy-30d": 30, "groupByUser-custom-1d": 10},
            "load_average_before": load_before,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
