"""Suite-wide test wiring.

* Real-service fixtures (`kafka_bootstrap`, `redis_url`) come from `tests.services`.
* Under `CI=true` a test that needs a service (marked kafka, redis, warehouse or e2e)
  may not skip: a skip becomes a failure, so CI can never go green by not testing.
  Tests marked `docker` (testcontainers-only scenarios) are exempt, since CI has no
  Docker engine.
* Every test under `tests/fault/` is marked `serial`: it stops and restarts the Kafka or
  Redis that the other tests share, so `make test` runs those alone after the parallel phase.
* A test that is not marked for IO (kafka, redis, warehouse, e2e, docker) cannot reach it
  by accident: `_no_io` makes every socket connection and every warehouse client fail
  loudly (the Snuba pattern). Unit tests drive apps through `httpx.ASGITransport` and the
  IO seams' in-memory twins.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ["tests.services"]

_SERVICE_MARKERS = ("kafka", "redis", "warehouse", "e2e")
_IO_MARKERS = (*_SERVICE_MARKERS, "docker")


class UnmarkedIOError(RuntimeError):
    """Raised when a test without an IO marker tries to reach a service."""


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnmarkedIOError(f"{what} in a test not marked for IO: mark it {' / '.join(_IO_MARKERS)} or use a twin")

    return refuse


@pytest.fixture(autouse=True)
def _no_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if any(request.node.get_closest_marker(m) is not None for m in _IO_MARKERS):
        yield
        return
    import clickhouse_connect

    monkeypatch.setattr(socket.socket, "connect", _refuse("a network connection"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("a network connection"))
    monkeypatch.setattr(socket, "create_connection", _refuse("a network connection"))
    monkeypatch.setattr(clickhouse_connect, "get_client", _refuse("a warehouse client"))
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "fault" and item.path.parent.parent.name == "tests":
            item.add_marker(pytest.mark.serial)
    # The slow tests first (stable otherwise): xdist hands tests out in this order, so a
    # minute-long test starts while short ones fill the other workers instead of ending last.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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
