"""`python -m bench [name ...]`: run the named benchmarks (default: all) and write their results."""

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
    "import_under_export",
    "migrate_amplitude",
]


def main(argv: list[str]) -> None:
    names = argv or BENCHMARKS
    for name in names:
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    for name in names:
        print(f"== {name}", file=sys.stderr)
        importlib.import_module(f"bench.{name}").main([])


if __name__ == "__main__":
    main(sys.argv[1:])
