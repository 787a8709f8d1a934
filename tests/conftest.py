"""Suite-wide test wiring.

* Real-service fixtures (`kafka_bootstrap`, `redis_url`) come from `tests.services`.
* Under `CI=true` a test that needs a service (marked kafka, redis, warehouse or e2e)
  may not skip: a skip becomes a failure, so CI can never go green by not testing.
  Tests marked `docker` (testcontainers-only scenarios) are exempt, since CI has no
  Docker engine.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["tests.services"]

_SERVICE_MARKERS = ("kafka", "redis", "warehouse", "e2e")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if not (_in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    if item.get_closest_marker("docker") is not None:
        return
    if any(item.get_closest_marker(m) is not None for m in _SERVICE_MARKERS):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"CI=true: a test that needs a service may not skip ({reason})"
