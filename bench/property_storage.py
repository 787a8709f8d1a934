"""How to store event properties: measured on the segmentation benchmark's 10M events.

Variants (each a copy of the events table with the same sorting key, fully merged):

* `string_zstd`: `properties String CODEC(ZSTD(1))`, read with `JSONExtractRaw` (today);
* `string_lz4`: the same text with LZ4 (cheaper to decompress, larger);
* `map`: `Map(String, String)` of raw JSON values (`props[name]` replaces `JSONExtractRaw`);
* `json`: ClickHouse's `JSON` type, a path read as `props.{name:Identifier}` (the name
  still a bound parameter) and turned back into JSON text with `toJSONString`;
* `hot`: the JSON text plus materialised raw-value columns for the three properties the
  queries use (`$browser`, `plan`, `price`) — the best case of "hot columns".

Queries are the expression compiler's real output (`compile_where`/`compile_on`/
`compile_number`) with the one property access swapped per variant, run interleaved.
Also recorded: the compressed size of the property storage and the time to insert
1,000,000 rows into each layout from the JSON text (what ingestion pays).
Works on a copy (FOOTFALL_BENCH_STORAGE_DIR, default /tmp/footfall-bench-10m-storage).
Result: bench/results/property_storage.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench._common import write_result
from bench.query_segmentation import DEFAULT_DIR, END, START, ensure_dataset
from footfall.shared.expr import check_expr, compile_number, compile_on, compile_where, parse_expr
from footfall.shared.sql import Params, render

STORAGE_DIR = Path(os.environ.get("FOOTFALL_BENCH_STORAGE_DIR", "/tmp/footfall-bench-10m-storage"))
KEY = "PARTITION BY toYYYYMM(time) ORDER BY (project_id, toDate(time), event, distinct_id, time, dedup_hash)"
BASE = (
    "project_id UInt64, time DateTime64(3, 'UTC'), event LowCardinality(String), distinct_id String, "
    "dedup_hash FixedString(16)"
)
BASE_COLS = "project_id, time, event, distinct_id, dedup_hash"
HOT = {"$browser": "p_browser", "plan": "p_plan", "price": "p_price"}

VARIANTS: dict[str, tuple[str, str, str]] = {
    # name: (extra columns DDL, SELECT list from `events`, table)
    "string_zstd": ("properties String CODEC(ZSTD(1))", "properties", "ps_string_zstd"),
    "string_lz4": ("properties String CODEC(LZ4)", "properties", "ps_string_lz4"),
    "map": (
        "props Map(String, String) CODEC(ZSTD(1))",
        "CAST(JSONExtractKeysAndValuesRaw(properties), 'Map(String, String)')",
        "ps_map",
    ),
    "json": ("props JSON", "properties", "ps_json"),
    "hot": (
        "properties String CODEC(ZSTD(1)), p_browser String, p_plan String, p_price String",
        "properties, JSONExtractRaw(properties, '$browser'), JSONExtractRaw(properties, 'plan'), "
        "JSONExtractRaw(properties, 'price')",
        "ps_hot",
    ),
}
R = (
    f"project_id = 1 AND time >= toDateTime64('{START}', 3, 'UTC') AND time < toDateTime64('{END}', 3, 'UTC') "
    "AND event = 'event_07'"
)


NOTES = {
    "json": "Fastest general layout for reads, smallest, but 7-8x the insert CPU, and not faithful: a JSON null "
    "is dropped (indistinguishable from a missing property, so defined() breaks), objects are flattened "
    'into paths (properties["obj"] has no value), and read-back reorders keys and turns 1.0 into 1 '
    "(/export fidelity). Usable only beside the JSON text, not instead of it.",
    "hot": "Exact (a materialised column holds the same raw text JSONExtractRaw returns, '' when missing) and the "
    "fastest, but only for the properties chosen as hot; every other property still reads the JSON text.",
    "map": "Slower than the JSON text: the map column is larger to read and decompress than the text is to parse.",
    "string_lz4": "About 20% faster reads than ZSTD(1) for 60% more storage; the same semantics.",
    "decision": "Keep `properties String CODEC(ZSTD(1))` as the stored form. Proposed next step (needs the "
    "expression compiler's property_value and a migration): materialised raw-value columns for the "
    "interface's default properties ($browser, $os, $city, $region, mp_country_code, $device, "
    "$referring_domain, $current_url, utm_source ...), chosen from the column catalog.",
}


def access(variant: str, param: str, name: str) -> str:
    """The raw JSON text of property `name` (bound as `param`) in each layout."""
    return {
        "string_zstd": f"JSONExtractRaw(properties, {{{param}:String}})",
        "string_lz4": f"JSONExtractRaw(properties, {{{param}:String}})",
        "map": f"props[{{{param}:String}}]",
        "json": f"ifNull(toJSONString(props.{{{param}:Identifier}}), '')",
        "hot": HOT.get(name, f"JSONExtractRaw(properties, {{{param}:String}})"),
    }[variant]


def compiled() -> tuple[dict[str, str], dict[str, Any]]:
    params = Params()
    where = render(compile_where(check_expr(parse_expr('properties["$browser"] == "Chrome"')), params))
    on = render(compile_on(check_expr(parse_expr('properties["plan"]')), params).sql)
    number = render(compile_number(check_expr(parse_expr('properties["price"]')), params))
    queries = {
        "where_count": f"SELECT toDate(time, 'Europe/Berlin') AS d, count() FROM T WHERE {R} AND ({where}) GROUP BY d",
        "on_where": f"SELECT s, toDate(time, 'Europe/Berlin') AS d, count() FROM T ARRAY JOIN {on} AS s "
        f"WHERE {R} AND ({where}) GROUP BY s, d",
        "numeric_min_max": f"SELECT min(x), max(x) FROM (SELECT {number} AS x FROM T WHERE {R}) WHERE isNotNull(x)",
    }
    return queries, params.values


def for_variant(text: str, values: dict[str, Any], variant: str) -> str:
    def swap(m: re.Match[str]) -> str:
        return access(variant, m.group(1), values[m.group(1)])

    return re.sub(r"JSONExtractRaw\(properties, \{(p\d+):String\}\)", swap, text).replace(
        "FROM T ", f"FROM {VARIANTS[variant][2]} "
    )


def prepare(warehouse: Any) -> dict[str, dict[str, float]]:
    """Create and fill the variant tables once; return sizes and insert timings."""
    info: dict[str, dict[str, float]] = {}
    for name, (ddl, select, table) in VARIANTS.items():
        exists = warehouse.query("SELECT count() FROM system.tables WHERE name = {t:String}", {"t": table})[0][0]
        if not exists:
            warehouse.command(f"CREATE TABLE {table} ({BASE}, {ddl}) ENGINE = MergeTree {KEY}")
            warehouse.command(f"INSERT INTO {table} SELECT {BASE_COLS}, {select} FROM events")
            warehouse.command(f"OPTIMIZE TABLE {table} FINAL")
        probe = f"{table}_insert_probe"
        warehouse.command(f"DROP TABLE IF EXISTS {probe}")
        warehouse.command(f"CREATE TABLE {probe} ({BASE}, {ddl}) ENGINE = MergeTree {KEY}")
        started = time.perf_counter()
        warehouse.command(f"INSERT INTO {probe} SELECT {BASE_COLS}, {select} FROM events LIMIT 1000000")
        insert_s = time.perf_counter() - started
        warehouse.command(f"DROP TABLE {probe}")
        columns = [c for c in ("properties", "props", "p_browser", "p_plan", "p_price") if c in ddl]
        ((compressed, uncompressed),) = warehouse.query(
            "SELECT sum(data_compressed_bytes), sum(data_uncompressed_bytes) FROM system.columns "
            "WHERE table = {t:String} AND name IN {c:Array(String)}",
            {"t": table, "c": columns},
        )
        info[name] = {
            "property_storage_mib": round(compressed / 2**20, 1),
            "uncompressed_mib": round(uncompressed / 2**20, 1),
            "insert_1m_rows_s": round(insert_s, 2),
        }
    return info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    from footfall.shared.warehouse import open_warehouse

    ensure_dataset(DEFAULT_DIR)
    if not (STORAGE_DIR / "chdb").exists():
        shutil.copytree(DEFAULT_DIR, STORAGE_DIR)
    warehouse = open_warehouse(f"chdb://{STORAGE_DIR / 'chdb'}")
    try:
        info = prepare(warehouse)
        queries, values = compiled()
        texts = {(v, q): for_variant(text, values, v) for v in VARIANTS for q, text in queries.items()}
        answers = {key: sorted(warehouse.query(text, values)) for key, text in texts.items()}
        for q in queries:  # every layout gives the same numbers
            assert len({repr(answers[(v, q)]) for v in VARIANTS}) == 1, q
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in texts}
        for _ in range(args.rounds):
            for key, text in texts.items():
                started = time.perf_counter()
                warehouse.query(text, values)
                samples[key].append(time.perf_counter() - started)
    finally:
        warehouse.close()
    results = {
        v: {**info[v], **{f"{q}_median_ms": round(statistics.median(samples[(v, q)]) * 1000, 1) for q in queries}}
        for v in VARIANTS
    }
    for v, row in results.items():
        print(f"{v:12s} " + "  ".join(f"{k} {val}" for k, val in row.items()))
    write_result(
        "property_storage",
        {
            "notes": NOTES,
            "dataset": "query_segmentation (10M events, 30 days, one event = 200k rows per query)",
            "rounds": args.rounds,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "queries": {q: " ".join(t.split()) for q, t in queries.items()},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
