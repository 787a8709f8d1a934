"""`python -m bench [name ...] [--option ...]`: run the named benchmarks (default: all), each with
the options, and write their results."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = [
    "import_embedded",
    "track_embedded",
    "profiles_embedded",
    "gateway_kafka",
    "end_to_end",
    "query_segmentation",
    "query_funnels",
    "query_engage",
    "query_cohorts",
    "query_jql",
    "import_under_export",
    "migrate_amplitude",
]


def main(argv: list[str]) -> None:
    split = next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv))
    names, options = argv[:split] or BENCHMARKS, argv[split:]  # options go to each named benchmark
    for name in names:
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    for name in names:
        print(f"== {name}", file=sys.stderr)
        importlib.import_module(f"bench.{name}").main(options)


if __name__ == "__main__":
    main(sys.argv[1:])
