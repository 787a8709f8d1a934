"""Funnels, retention and frequency on 10 million events: our endpoints beside hand-written queries.

The dataset is the segmentation benchmark's (`bench/query_segmentation.py`: 10,000,000
events over 2025-01-01 .. 2025-01-30, 50 event names, 100,000 users, project 1 in
Europe/Berlin, merged), generated once into FOOTFALL_BENCH_DIR. Two saved funnels are
added to it (idempotently): `event_00 → event_01 → event_02` and
`event_00 → event_10 → event_20 → event_30 → event_40`, one-day window.

Cases, each over the 30 days: the 3-step and 5-step funnels with and without
`on=properties["plan"]`; birth retention (born `event_00`, returns `event_01`, 14 daily
buckets); compounded retention (`event_00`, 14 daily buckets); the frequency report
(`event_00`, weekly periods of daily slots).

Each endpoint is called over HTTP (uvicorn in a thread of this process, the embedded app
of `footfall serve`, query limits off) and the hand-written query runs on the same chDB
store, interleaved, `--rounds` times after a warm-up; both must give the same numbers.

The hand-written queries compute exactly the same numbers (the 2-second grace, the window
counted from the first step-0 event of each day, entries per day, rolling retention
buckets, the anchor excluded from returns). No shorter formulation with ClickHouse's own
functions gives these numbers (`windowFunnel` restarts from any step-0 event and has no
grace; `retention()` is calendar-based), so they are the best formulations found by hand:
per-user sorted time arrays searched per attempt (the first time at or after the previous
step's) for funnels, per-user bucket sets for retention, users grouped by the stored
`user_key` as ours are. `windowFunnel` is timed too, for reference only (different numbers).
Result: bench/results/query_funnels.json (`--events`: suffixed by size).

`--hot +plan,price` makes `plan` a hot property column (FOOTFALL_HOT_PROPERTIES), so `on`
reads the column; the hand-written query is then timed over the column too, and the ratio
is to the faster of the two (results `query_funnels_hot*.json`). Pending mutations of the
events table (a dataset generated before its hot columns) are waited for before measuring.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench._common import BOOTSTRAP_ENV, peak_rss_mb, reset_peak_rss, write_result
from bench.query_segmentation import (
    END,
    EVENTS,
    FROM,
    START,
    TO,
    TZ,
    _hot_text,
    _ms,
    _serve,
    _wait_for_hot_columns,
    dataset_dir,
    ensure_dataset,
    size_label,
    unlimited_serve_settings,
    users_for,
)

R = f"project_id = 1 AND time >= toDateTime64('{START}', 3, 'UTC') AND time < toDateTime64('{END}', 3, 'UTC')"
S_MS, E_MS = (
    f"toUnixTimestamp64Milli(toDateTime64('{START}', 3, 'UTC'))",
    f"toUnixTimestamp64Milli(toDateTime64('{END}', 3, 'UTC'))",
)
DAY_MS = 86_400_000
FUNNELS = {
    "bench 3-step": ["event_00", "event_01", "event_02"],
    "bench 5-step": ["event_00", "event_10", "event_20", "event_30", "event_40"],
}


def _funnel_sql(steps: list[str], on: bool) -> str:
    """Hand-written: per user the entries (first step-0 time per local day) and each later
    step's times, sorted; then per attempt (entry) each next step = the first step-k time >=
    previous - 2 s, kept when <= entry + 1 day, counted per day with -If aggregates. With `on`, the step-0 events and
    the later steps' are grouped per user apart and joined (ties in time by insert_id). Users are
    grouped by the stored 128-bit `user_key`, as ours are."""
    n = len(steps)
    # each step's times packed with the step (ms * 32 + k) in one array per user, split after
    codes = ", ".join(f"event = '{s}', {k}" for k, s in enumerate(steps) if k)
    split = "arrayMap(x -> bitShiftRight(x, 5), arrayFilter(x -> bitAnd(x, 31) = {}, p))"
    later = ", ".join(f"{split.format(k)} AS s{k}" for k in range(1, n))
    scan = f"""project_id = 1 AND time >= toDateTime64('{START}', 3, 'UTC') - toIntervalMillisecond({2000 * (n - 1)})
               AND time <= toDateTime64('{END}', 3, 'UTC') + toIntervalDay(1)"""
    step0 = f"""project_id = 1 AND event = '{steps[0]}' AND time >= toDateTime64('{START}', 3, 'UTC')
                AND time < toDateTime64('{END}', 3, 'UTC')"""
    if on:
        names_later = ", ".join(f"'{s}'" for s in steps[1:])
        step0_rows = f"""SELECT user_key, groupArray(toUnixTimestamp64Milli(time)) AS am,
                                groupArray(insert_id) AS ai, groupArray(JSONExtractString(properties, 'plan')) AS ag,
                                arraySort(am) AS e0
                         FROM events WHERE {step0} GROUP BY user_key"""
        later_rows = f"""SELECT user_key, {later} FROM (SELECT user_key, arraySort(groupArray(ms * 32 + k)) AS p
                         FROM (SELECT user_key, toUnixTimestamp64Milli(time) AS ms, multiIf({codes}, 0) AS k
                               FROM events WHERE {scan} AND event IN ({names_later})) GROUP BY user_key)"""
        per_user = f"SELECT * FROM ({later_rows}) AS r RIGHT JOIN ({step0_rows}) AS f USING user_key"
        g0 = ", arrayFilter((g, k, q) -> k != q, arraySort((g, m, i) -> (m, i), ag, am, ai), k0, kp) AS g0"
    else:
        names = ", ".join(f"'{s}'" for s in steps)
        e0 = split.format(0)
        k = f"multiIf(event = '{steps[0]}' AND ms >= {S_MS} AND ms < {E_MS}, 0, {codes}, -1)"
        rows = f"SELECT user_key, toUnixTimestamp64Milli(time) AS ms, {k} AS k FROM events "
        rows += f"WHERE {scan} AND event IN ({names})"
        packed = f"SELECT user_key, arraySort(groupArrayIf(ms * 32 + k, k >= 0)) AS p FROM ({rows}) GROUP BY user_key"
        per_user = f"SELECT user_key, {e0} AS e0, {later} FROM ({packed}) WHERE notEmpty(e0)"
        g0 = ""
    query = f"""SELECT b, t0, {", ".join([f"s{k}" for k in range(1, n)] + (["g"] if on else []))} FROM (
            SELECT *, arrayMap(t -> toDate(fromUnixTimestamp64Milli(t, '{TZ}')), e0) AS k0,
            arrayPopBack(arrayPushFront(k0, toDate('1970-01-01'))) AS kp,
            arrayFilter((t, k, q) -> k != q, e0, k0, kp) AS x0, arrayFilter((k, q) -> k != q, k0, kp) AS b0{g0}
        FROM ({per_user})) ARRAY JOIN x0 AS t0, b0 AS b{", g0 AS g" if on else ""}"""

    def reached(k: int) -> list[str]:  # step k's time and whether the attempt got there
        return [f"s{k}[i{k}] AS t{k}", f"i{k} > 0 AND t{k} <= t0 + {DAY_MS} AS r{k}"]

    for k in range(1, n):  # one attempt per row: step k = the first s{k} >= t(k-1) - 2 s, if step k-1 was reached
        search = f"arrayFirstIndex(x -> x >= t{k - 1} - 2000, s{k})"
        cols = [f"{search} AS i1"] if k == 1 else [*reached(k - 1), f"if(r{k - 1}, {search}, 0) AS i{k}"]
        query = f"SELECT *, {', '.join(cols)} FROM ({query})"
    if n > 1:
        query = f"SELECT *, {', '.join(reached(n - 1))} FROM ({query})"
    sums = "".join(
        f", countIf(r{k}) AS n{k}, sumIf(greatest(0, t{k} - t{k - 1}), r{k}) AS d{k}, "
        f"sumIf(greatest(0, t{k} - t0), r{k}) AS e{k}"
        for k in range(1, n)
    )
    per_step = ", ".join(["(0, n0, toInt64(0), toInt64(0))"] + [f"({k}, n{k}, d{k}, e{k})" for k in range(1, n)])
    grouped = f"SELECT b AS day, NULL AS segment, count() AS n0{sums} FROM ({query}) GROUP BY day"
    if on:  # counted per day and key, then each key's counts added to $overall (NULL) and to the key
        totals = ", ".join(f"sum({m}) AS {m}" for m in ["n0", *[f"{m}{k}" for k in range(1, n) for m in "nde"]])
        grouped = f"""SELECT day, segment, {totals} FROM (SELECT b AS day, g, count() AS n0{sums} FROM ({query})
            GROUP BY day, g) ARRAY JOIN [NULL, toNullable(g)] AS segment GROUP BY day, segment"""
    return f"""SELECT day, segment, z.1 AS step, z.2, z.3, z.4 FROM ({grouped})
        ARRAY JOIN [{per_step}] AS z WHERE z.2 > 0"""


def _window_funnel_sql(steps: list[str]) -> str:
    conds = ", ".join(f"event = '{s}'" for s in steps)
    names = ", ".join(f"'{s}'" for s in steps)
    return f"""SELECT level, count() FROM (SELECT distinct_id, windowFunnel(86400)(toDateTime(time), {conds}) AS level
        FROM events WHERE {R} AND event IN ({names}) GROUP BY distinct_id) GROUP BY level"""


BIRTH_SQL = f"""
SELECT cohort, i, count() FROM (
    SELECT toDate(fromUnixTimestamp64Milli(b.1, '{TZ}')) AS cohort,
           arrayJoin(arrayPushFront(arrayDistinct(arrayFilter(i -> i >= 0 AND i <= 14,
               arrayMap((t, id) -> if(t < b.1 OR (t = b.1 AND id = b.2), -1, intDiv(t - b.1, {DAY_MS})),
                        r.1, r.2))), -1)) AS i
    FROM (SELECT user_key, (min(toUnixTimestamp64Milli(time)), argMin(reinterpretAsUInt128(dedup_hash),
                 concat(reverse(reinterpretAsFixedString(toUInt64(toUnixTimestamp64Milli(time)))), insert_id))) AS b
          FROM events
          WHERE project_id = 1 AND event = 'event_00' AND time < toDateTime64('{END}', 3, 'UTC') GROUP BY user_key
          HAVING b.1 >= {S_MS}) AS births
    LEFT JOIN (SELECT user_key,
                      (groupArray(toUnixTimestamp64Milli(time)), groupArray(reinterpretAsUInt128(dedup_hash))) AS r
          FROM events
          WHERE project_id = 1 AND event = 'event_01' AND time >= toDateTime64('{START}', 3, 'UTC')
            AND time < toDateTime64('{END}', 3, 'UTC') + toIntervalDay(15) GROUP BY user_key) AS ret
    USING user_key
) GROUP BY cohort, i"""

COMPOUNDED_SQL = f"""
SELECT cohort, i, count() FROM (
    SELECT user_key, toDate(fromUnixTimestamp64Milli(a.1, '{TZ}')) AS cohort,
           arrayJoin(arrayPushFront(arrayDistinct(arrayFilter(i -> i >= 0 AND i <= 14,
               arrayMap((t, id) -> if(t < a.1 OR (t = a.1 AND id = a.2), -1, intDiv(t - a.1, {DAY_MS})), ts, ids))),
               -1)) AS i
    FROM (SELECT user_key,
                 arraySort(groupArray((toUnixTimestamp64Milli(time), reinterpretAsUInt128(dedup_hash)))) AS ev,
                 arrayMap(e -> e.1, ev) AS ts, arrayMap(e -> e.2, ev) AS ids,
                 arrayFilter((e, k, q) -> k != q AND e.1 < {E_MS},
                     ev, arrayMap(e -> toDate(fromUnixTimestamp64Milli(e.1, '{TZ}')), ev),
                     arrayPopBack(arrayPushFront(arrayMap(e -> toDate(fromUnixTimestamp64Milli(e.1, '{TZ}')), ev),
                                                 toDate('1970-01-01')))) AS anchors
          FROM events WHERE project_id = 1 AND event = 'event_00' AND time >= toDateTime64('{START}', 3, 'UTC')
            AND time < toDateTime64('{END}', 3, 'UTC') + toIntervalDay(15) GROUP BY user_key)
    ARRAY JOIN anchors AS a
) GROUP BY cohort, i"""

FREQUENCY_SQL = f"""
SELECT period, k, count() FROM (
    SELECT toMonday(toDate(time, '{TZ}')) AS period, user_key, uniqExact(toDate(time, '{TZ}')) AS k FROM events
    WHERE project_id = 1 AND event = 'event_00'
      AND time >= toDateTime64('2024-12-29 23:00:00', 3, 'UTC') AND time < toDateTime64('2025-02-02 23:00:00', 3, 'UTC')
    GROUP BY period, user_key
) GROUP BY period, k"""


@dataclass
class Case:
    name: str
    path: str
    params: dict[str, str]
    hand_written: str
    same: Callable[[Any, list[tuple[Any, ...]]], bool]
    reference: str | None = None  # timed for context only (other numbers)


def _funnel_cells(body: Any) -> dict[tuple[str, str | None, int], tuple[int, int, int]]:
    out = {}
    for day, value in body["data"].items():
        groups = (
            {None: value["steps"]}
            if "steps" in value
            else {(None if k == "$overall" else k): v for k, v in value.items()}
        )
        for seg, steps in groups.items():
            for i, s in enumerate(steps):
                if s["count"]:
                    out[(day, seg, i)] = (s["count"], s["avg_time"] or 0, s["avg_time_from_start"])
    return out


def _same_funnel(body: Any, rows: list[tuple[Any, ...]]) -> bool:
    expected = {}
    for day, seg, step, n, step_ms, start_ms in rows:
        avg = (2 * step_ms + 1000 * n) // (2000 * n)
        expected[(day.isoformat(), seg, int(step))] = (n, avg if step else 0, (2 * start_ms + 1000 * n) // (2000 * n))
    return _funnel_cells(body) == expected


def _same_retention(body: Any, rows: list[tuple[Any, ...]]) -> bool:
    expected: dict[str, dict[str, Any]] = {}
    for cohort, i, n in rows:
        cell = expected.setdefault(cohort.isoformat(), {"counts": [0] * 15, "first": 0})
        if i < 0:
            cell["first"] = n
        else:
            cell["counts"][i] = n
    return {k: v for k, v in body.items() if v["first"]} == expected


def _same_frequency(body: Any, rows: list[tuple[Any, ...]]) -> bool:
    exactly: dict[str, dict[int, int]] = {}
    for period, k, n in rows:
        exactly.setdefault(period.isoformat(), {})[int(k)] = n
    for period, row in body["data"].items():
        at_least = [sum(n for k, n in exactly.get(period, {}).items() if k >= j + 1) for j in range(len(row))]
        if row != at_least:
            return False
    return set(exactly) <= set(body["data"])


def cases(funnel_ids: dict[str, int]) -> list[Case]:
    rng = {"from_date": FROM, "to_date": TO}
    out = []
    for name, steps in FUNNELS.items():
        for on in (False, True):
            params = {**rng, "funnel_id": str(funnel_ids[name])}
            if on:
                params["on"] = 'properties["plan"]'
            out.append(
                Case(
                    f"/funnels {len(steps)} steps{' on' if on else ''}",
                    "/api/2.0/funnels",
                    params,
                    _funnel_sql(steps, on),
                    _same_funnel,
                    _window_funnel_sql(steps),
                )
            )
    out.append(
        Case(
            "/retention birth 14d",
            "/api/2.0/retention",
            {**rng, "born_event": "event_00", "event": "event_01", "interval_count": "14"},
            BIRTH_SQL,
            _same_retention,
        )
    )
    out.append(
        Case(
            "/retention compounded 14d",
            "/api/2.0/retention",
            {**rng, "retention_type": "compounded", "event": "event_00", "interval_count": "14"},
            COMPOUNDED_SQL,
            _same_retention,
        )
    )
    out.append(
        Case(
            "/retention/addiction",
            "/api/2.0/retention/addiction",
            {**rng, "event": "event_00", "unit": "week", "addiction_unit": "day"},
            FREQUENCY_SQL,
            _same_frequency,
        )
    )
    return out


def _saved_funnels(warehouse: Any) -> dict[str, int]:
    from footfall.shared.saved import WarehouseSavedStore, parse_funnel

    store = WarehouseSavedStore(warehouse)
    found = {f.name: f.funnel_id for f in store.list_funnels(1)}
    for name, steps in FUNNELS.items():
        if name not in found:
            _, definition = parse_funnel(
                {"name": name, "steps": [{"event": s} for s in steps], "length": 1, "length_unit": "day"}
            )
            found[name] = store.create_funnel(1, name, definition).funnel_id
    return found


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--events", type=int, default=EVENTS, help="dataset size (1M, 10M, 100M side by side)")
    parser.add_argument("--data", type=Path, default=None, help="dataset folder (default: by size)")
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    parser.add_argument("--hot", default=None, help="hot properties (FOOTFALL_HOT_PROPERTIES; default: the defaults)")
    args = parser.parse_args(argv)

    from footfall.services.standalone.main import build_embedded
    from footfall.shared.schema import hot

    args.data = args.data or dataset_dir(args.events)
    ensure_dataset(args.data, args.events)
    if args.hot is not None:
        os.environ["FOOTFALL_HOT_PROPERTIES"] = args.hot
    settings = unlimited_serve_settings(args.data)
    embedded = build_embedded(settings)
    warehouse = embedded.warehouse
    materialised_s = _wait_for_hot_columns(warehouse)  # not under the measurements
    reset_peak_rss()  # the queries' memory only: chDB and this process, server included
    hot_names = hot.in_use()
    funnel_ids = _saved_funnels(warehouse)
    base, stop = _serve(embedded.app)
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_USERNAME"], BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SA_SECRET"])
    results = []
    try:
        with httpx.Client(base_url=base, auth=auth, timeout=300) as client:
            for case in cases(funnel_ids):
                if args.only not in case.name:
                    continue
                params = {**case.params, "project_id": "1"}
                # The hand-written query as written (JSON text) and, when it reads a hot
                # property, over the column too: the ratio is to the faster of the two.
                hand_hot = _hot_text(case.hand_written, hot_names)
                ours: list[float] = []
                hand: list[float] = []
                hand_col: list[float] = []
                ref: list[float] = []
                body, rows = None, None
                for i in range(args.rounds + 2):
                    t_ours, r = _timed(lambda case=case, params=params: client.get(case.path, params=params))
                    t_hand, rows = _timed(lambda case=case: warehouse.query(case.hand_written))
                    assert r.status_code == 200, r.text
                    body = r.json()
                    if hand_hot != case.hand_written:
                        t_col, rows_col = _timed(lambda text=hand_hot: warehouse.query(text))
                        same = sorted(rows_col, key=repr) == sorted(rows, key=repr)
                        assert same, f"{case.name}: the query over the column differs"
                        if i >= 2:
                            hand_col.append(t_col)
                    if i >= 2:  # warm-up
                        ours.append(t_ours)
                        hand.append(t_hand)
                        if case.reference is not None and i < 5:
                            ref.append(_timed(lambda case=case: warehouse.query(case.reference))[0])  # type: ignore[arg-type]
                assert body is not None and rows is not None and case.same(body, rows), f"{case.name}: numbers differ"
                o, h = _ms(ours), _ms(hand)
                c = _ms(hand_col) if hand_col else None
                best = min(h["median_ms"], c["median_ms"]) if c else h["median_ms"]
                result = {
                    "endpoint": case.name,
                    "ours": o,
                    "hand_written": h,
                    **({"hand_written_over_columns": c} if c else {}),
                    "ratio": round(o["median_ms"] / best, 2),
                    "params": case.params,
                    "hand_written_sql": " ".join(case.hand_written.split()),
                }
                if ref:
                    result["window_funnel_reference_ms"] = _ms(ref)["median_ms"]
                results.append(result)
                print(
                    f"{case.name:30s} ours {o['median_ms']:7.1f} ms  hand-written {h['median_ms']:7.1f} ms"
                    + (f" (over the column {c['median_ms']:7.1f} ms)" if c else "")
                    + f"  ratio {result['ratio']:.2f}",
                    flush=True,
                )
    finally:
        stop()
        warehouse.close()
    write_result(
        ("query_funnels_hot" if args.hot is not None else "query_funnels") + size_label(args.events),
        {
            "dataset": {
                "events": args.events,
                "days": 30,
                "event_names": 50,
                "users": users_for(args.events),
                "time_zone": TZ,
                "path": str(args.data),
                "merged": True,
                "same_as": "query_segmentation",
            },
            "hot_properties": list(hot_names),
            "materialise_wait_s": round(materialised_s, 1),
            "rounds": args.rounds,
            "peak_rss_mb_queries": round(peak_rss_mb(), 1),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "targets": {"median_ms": 1000, "ratio": 1.5},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
