"""Bounded starts and stops (footfall.shared.lifecycle), the access log, and the CLI's
--version and --help: pure, in memory."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
import structlog
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from footfall.services.cli import build_parser
from footfall.shared import server
from footfall.shared.config import ConfigError, Env, LogSettings
from footfall.shared.lifecycle import Services, bounded
from footfall.shared.server import AccessLog


class Hanging:
    """A service whose start and stop never return on their own."""

    def __init__(self) -> None:
        self.started = 0
        self.stop_cancelled = False

    async def start(self) -> None:
        self.started += 1
        await asyncio.sleep(3600)

    async def stop(self) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.stop_cancelled = True
            raise


class Flaky:
    """Fails its first `failures` starts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.stopped = False

    async def start(self) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError(f"attempt {self.attempts} refused")

    async def stop(self) -> None:
        self.stopped = True


def test_start_returns_at_once_and_stop_is_bounded_whatever_the_services_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Services, "RETRY_SECONDS", (0.01,))
    hanging, flaky = Hanging(), Flaky(failures=2)
    services = Services(hanging=hanging, flaky=flaky)

    async def go() -> tuple[float, dict[str, str], dict[str, str], float, dict[str, str]]:
        t0 = time.monotonic()
        await services.start()
        started_in = time.monotonic() - t0
        early = services.health()
        for _ in range(200):
            if services.health()["flaky"] == "started":
                break
            await asyncio.sleep(0.01)
        later = services.health()
        t1 = time.monotonic()
        await services.stop(seconds=0.5)
        return started_in, early, later, time.monotonic() - t1, services.health()

    started_in, early, later, stopped_in, final = asyncio.run(go())
    assert started_in < 0.05
    assert early["hanging"] == "starting"
    assert later == {"hanging": "starting", "flaky": "started"}
    assert flaky.attempts == 3  # two refusals, retried
    assert stopped_in < 1.0  # 0.5 s budget plus the cancellation grace
    assert hanging.stop_cancelled and flaky.stopped
    assert final == {"hanging": "stopped", "flaky": "stopped"}


def test_a_start_failure_is_reported_while_it_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Services, "RETRY_SECONDS", (10.0,))
    services = Services.of(Flaky(failures=99))

    async def go() -> tuple[dict[str, str], float]:
        await services.start()
        await asyncio.sleep(0.05)
        health = services.health()
        t0 = time.monotonic()
        await services.stop(seconds=1.0)  # cuts the 10 s backoff short
        return health, time.monotonic() - t0

    health, stopped_in = asyncio.run(go())
    assert health == {"flaky": "starting (last error: attempt 1 refused)"}
    assert stopped_in < 0.5


def test_bounded_cancels_what_overruns() -> None:
    async def go() -> tuple[bool, bool]:
        return await bounded(asyncio.sleep(10), 0.05, what="sleep"), await bounded(asyncio.sleep(0), 1, what="none")

    assert asyncio.run(go()) == (False, True)


def test_access_log_writes_one_structured_line_per_request_without_the_query_string() -> None:
    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hello", status_code=201)

    routes = [Route("/hello", hello, methods=["POST"]), Route("/healthz", hello)]
    app = AccessLog(Starlette(routes=routes))

    async def go() -> None:
        transport = httpx.ASGITransport(app=app, client=("10.0.0.7", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://footfall") as client:
            await client.post("/hello?api_secret=s3cret", content=b"x")
            await client.get("/healthz")  # a probe that succeeds is not logged
            await client.get("/missing")

    with structlog.testing.capture_logs() as logs:
        asyncio.run(go())
    lines = [entry for entry in logs if entry["event"] == "access"]
    assert [(e["method"], e["path"], e["status"], e["bytes"]) for e in lines] == [
        ("POST", "/hello", 201, 5),
        ("GET", "/missing", 404, len(b"Not Found")),
    ]
    assert all(e["duration_ms"] >= 0 and e["client"] == "10.0.0.7" and "s3cret" not in str(e) for e in lines)


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("on", True), ("TRUE", True), ("0", False), ("off", False), ("no", False)]
)
def test_access_log_setting(raw: str, expected: bool) -> None:
    assert LogSettings.from_env(Env({"FOOTFALL_ACCESS_LOG": raw})).access is expected


def test_access_log_setting_refuses_other_values() -> None:
    assert LogSettings.from_env(Env({})).access is True
    with pytest.raises(ConfigError, match="FOOTFALL_ACCESS_LOG"):
        LogSettings.from_env(Env({"FOOTFALL_ACCESS_LOG": "maybe"}))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("footfall ")


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{parser.prog} {name}", sub))
                found.extend(_subparsers(sub))
    return found


def test_every_subcommand_help_shows_its_defaults() -> None:
    """Every option with a default names it in `--help` (checked on the formatted help)."""
    subs = _subparsers(build_parser())
    assert len(subs) >= 10
    for prog, sub in subs:
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
                continue
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            assert "default" in (action.help or ""), f"{prog} {action.option_strings[0]} hides its default"
            assert "default" in text
    serve = dict(subs)["footfall serve"].format_help()
    assert "(default: 8000)" in serve and "(default: 127.0.0.1)" in serve


@pytest.mark.parametrize("access", [True, False])
def test_run_app_adds_the_access_log_unless_turned_off(monkeypatch: pytest.MonkeyPatch, access: bool) -> None:
    served: list[Any] = []

    def fake_run(self: server.BoundedServer, sockets: Any = None) -> None:
        served.append(self.config.app)

    monkeypatch.setattr(server.BoundedServer, "run", fake_run)
    app = Starlette()
    server.run_app(app, "127.0.0.1", 1, LogSettings(access=access))
    assert isinstance(served[0], AccessLog) is access


def test_a_settled_heap_is_frozen_and_collected_less_often() -> None:
    """In a fresh interpreter (freezing is for the whole process): what is alive at start-up
    leaves the collector's sight, and young objects are collected at the higher threshold."""
    code = (
        "import gc; from footfall.shared.server import GC_YOUNG_THRESHOLD, settle_heap; "
        "before = gc.get_freeze_count(); settle_heap(); "
        "print(before, gc.get_freeze_count(), gc.get_threshold()[0] == GC_YOUNG_THRESHOLD)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, frozen, threshold = done.stdout.split()
    assert int(before) == 0 and int(frozen) > 10_000 and threshold == "True"
