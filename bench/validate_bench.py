"""Time `validate_batch` on 2000 realistic events (10–20 properties each).

    PYTHONPATH=. .venv/bin/python bench/validate_bench.py [--strict 0|1] [--rounds N] [--body-bytes B]

Prints the best and median time per batch and the implied events/s on one core.
Events carry strings (a few non-ASCII), ints, floats, bools, null, a small list and one
nested object; times are mixed seconds (int and float) and milliseconds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

import orjson

from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import validate_batch

NOW_MS = 1_767_225_600_000


def make_events(n: int, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    names = ["Page View", "Sign Up", "Purchase", "Add To Cart", "Search", "Café visité"]
    out = []
    for _ in range(n):
        props: dict = {
            "time": rnd.choice(
                [
                    NOW_MS // 1000 - rnd.randrange(86400 * 30),
                    NOW_MS - rnd.randrange(10**9),
                    NOW_MS / 1000 - rnd.random() * 1e6,
                ]
            ),
            "distinct_id": f"user-{rnd.randrange(100000)}",
            "$insert_id": uuid.UUID(int=rnd.getrandbits(128)).hex,
            "token": "abcdef0123456789",
            "$browser": rnd.choice(["Chrome", "Firefox", "Safari"]),
            "$current_url": f"https://example.com/products/{rnd.randrange(1000)}?utm_source=newsletter",
            "$os": "Mac OS X",
            "mp_lib": "python",
            "plan": rnd.choice(["free", "pro", "enterprise"]),
            "price": round(rnd.random() * 100, 2),
            "quantity": rnd.randrange(1, 10),
            "is_trial": rnd.random() < 0.5,
            "tags": ["a", "b", rnd.choice(["c", "d"])],
            "cart": {"items": rnd.randrange(5), "currency": "EUR", "coupon": None},
        }
        for j in range(rnd.randrange(0, 7)):
            props[f"extra_{j}"] = rnd.choice([rnd.randrange(10**6), "value-" + str(j), "Zürich", 1.5, False])
        out.append({"event": rnd.choice(names), "properties": props})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strict", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--body-bytes", type=int, default=0, help="pretend the body was this big (forces size checks)")
    args = ap.parse_args()
    limits = ImportLimits()
    raws = make_events(args.events)
    body = orjson.dumps(raws)
    raws = orjson.loads(body)  # exactly what the gateway's decoder hands over
    body_bytes = args.body_bytes or len(body)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        events, failures = validate_batch(
            raws, project_id=1, strict=bool(args.strict), limits=limits, now_ms=NOW_MS, body_bytes=body_bytes
        )
        times.append(time.perf_counter() - t0)
    assert not failures and len(events) == args.events, failures[:3]
    best, med = min(times), statistics.median(times)
    props = sum(len(r["properties"]) for r in raws) / len(raws)
    print(
        f"{args.events} events ({props:.1f} properties avg, body {len(body)} bytes,"
        f" body_bytes={body_bytes}), strict={args.strict}"
    )
    print(f"best {best * 1e3:.2f} ms  median {med * 1e3:.2f} ms per batch")
    print(f"=> {args.events / med:,.0f} events/s (median), {args.events / best:,.0f} events/s (best)")


if __name__ == "__main__":
    main()
