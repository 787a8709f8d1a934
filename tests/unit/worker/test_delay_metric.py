"""The worker's delay histogram steps once per gateway request: the exposition must equal
what one `observe` per event gives (checked against prometheus_client's own `observe`)."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Histogram

from footfall.services.worker.pipeline import observe_many

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)


def test_observe_many_equals_one_observe_per_event() -> None:
    rng = random.Random(3)
    fast_registry, slow_registry = CollectorRegistry(), CollectorRegistry()
    fast = Histogram("d", "delay", buckets=BUCKETS, registry=fast_registry)
    slow = Histogram("d", "delay", buckets=BUCKETS, registry=slow_registry)
    for _ in range(200):
        value = rng.choice([0.0, 0.05, 1.0, 3600.0, 5000.0, rng.uniform(0, 100)])  # edges and beyond the last
        times = rng.randint(1, 50)
        observe_many(fast, value, times)
        for _ in range(times):
            slow.observe(value)
    assert samples(fast_registry) == samples(slow_registry)


def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float | object]:
    """Bucket counts and count exactly, the sum to float precision (one multiplication
    against many additions); not the creation time."""
    out: dict[tuple[str, str], float | object] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name.endswith("_created"):
                continue
            key = (s.name, s.labels.get("le", ""))
            out[key] = pytest.approx(s.value, rel=1e-9) if s.name.endswith("_sum") else s.value
    return out


def test_observe_many_falls_back_to_observe() -> None:
    class Plain:
        def __init__(self) -> None:
            self.seen: list[float] = []

        def observe(self, value: float) -> None:
            self.seen.append(value)

    plain = Plain()
    observe_many(plain, 0.3, 4)
    assert plain.seen == [0.3] * 4
