"""The import rate limit (`services/gateway/ratelimit.py`): the rolling one-minute budget
with a fake clock against a brute-force reference, and the HTTP contract of `/import` and
`/track` (429 with `Retry-After`, nothing published from a refused batch, accepted again
once the window has moved on)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.gateway.app import build_app
from footfall.services.gateway.ratelimit import WINDOW_SECONDS, Cost, MemoryRateLimiter, RateBudget
from footfall.services.gateway.sinks import MemorySink
from footfall.shared.auth import Authenticator
from footfall.shared.config import ConfigError, Env, ImportLimits
from footfall.shared.errors import RateLimitedError
from footfall.shared.metadata import Directory


class Clock:
    def __init__(self, now: float = 1_700_000_000.25) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- the arithmetic, against a reference written from the rule -----------------------------


class Reference:
    """Admitted requests as (second, events, bytes); a request is admitted when nothing was
    admitted in the last 60 seconds or when it fits both budgets beside what was; the wait
    is the first whole second from which it would be admitted (found by trying each)."""

    def __init__(self, events: int, size: int) -> None:
        self.budget = (events, size)
        self.log: list[tuple[int, int, int]] = []

    def _fits(self, at: int, cost: tuple[int, int]) -> bool:
        live = [entry for entry in self.log if at - WINDOW_SECONDS < entry[0] <= at]
        if not live:
            return True
        for dim in (0, 1):
            limit = self.budget[dim]
            if limit and sum(entry[dim + 1] for entry in live) + cost[dim] > limit:
                return False
        return True

    def charge(self, at: int, cost: tuple[int, int]) -> int:
        """0 when admitted, else the seconds to wait."""
        if self._fits(at, cost):
            self.log.append((at, *cost))
            return 0
        return next(d for d in range(1, WINDOW_SECONDS + 1) if self._fits(at + d, cost))


def charge(limiter: MemoryRateLimiter, costs: dict[int, Cost]) -> int:
    try:
        asyncio.run(limiter.charge(costs))
    except RateLimitedError as exc:
        assert exc.status == 429 and exc.retry_after is not None
        return exc.retry_after
    return 0


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed{s}")
def test_budget_matches_reference_on_random_traffic(seed: int) -> None:
    rng = random.Random(seed)
    events, size = rng.choice([(100, 0), (0, 5000), (100, 5000), (37, 1234)])
    clock = Clock()
    limiter = MemoryRateLimiter(RateBudget(events, size), clock=clock)
    reference = Reference(events, size)
    admitted = refused = 0
    for _ in range(400):
        clock.now += rng.choice([0, 0, 0.3, 0.9, 1.7, 4.0, 13.0, 61.0])
        cost = (rng.randint(0, 60), rng.randint(0, 3000))
        want = reference.charge(int(clock.now), cost)
        got = charge(limiter, {1: Cost(*cost)})
        assert got == want, (int(clock.now), cost)
        admitted += got == 0
        refused += got > 0
    assert admitted > 50 and refused > 50  # both paths were exercised


def test_budget_example_rolls_after_a_minute() -> None:
    clock = Clock(1000.5)
    limiter = MemoryRateLimiter(RateBudget(events=100, bytes=0), clock=clock)
    assert charge(limiter, {1: Cost(60, 10)}) == 0
    clock.now = 1010.0
    assert charge(limiter, {1: Cost(40, 10)}) == 0  # exactly the budget
    clock.now = 1020.0
    assert charge(limiter, {1: Cost(1, 10)}) == 40  # the first 60 leave the window at 1060
    assert charge(limiter, {2: Cost(100, 10)}) == 0  # another project has its own budget
    clock.now = 1059.99
    assert charge(limiter, {1: Cost(1, 10)}) == 1
    clock.now = 1060.0
    assert charge(limiter, {1: Cost(60, 10)}) == 0
    assert charge(limiter, {1: Cost(1, 10)}) == 10  # the 40 of 1010 leave at 1070


def test_request_larger_than_the_budget_is_admitted_alone() -> None:
    clock = Clock()
    limiter = MemoryRateLimiter(RateBudget(events=10, bytes=100), clock=clock)
    assert charge(limiter, {1: Cost(500, 5000)}) == 0
    assert charge(limiter, {1: Cost(1, 1)}) == WINDOW_SECONDS
    clock.now += WINDOW_SECONDS
    assert charge(limiter, {1: Cost(500, 5000)}) == 0


def test_several_projects_are_charged_all_or_nothing() -> None:
    clock = Clock()
    limiter = MemoryRateLimiter(RateBudget(events=10, bytes=0), clock=clock)
    assert charge(limiter, {1: Cost(9, 0)}) == 0
    assert charge(limiter, {1: Cost(5, 0), 2: Cost(5, 0)}) > 0  # project 1 is over: nothing charged
    assert charge(limiter, {2: Cost(10, 0)}) == 0  # so project 2 still has its whole budget


def test_zero_disables_each_dimension() -> None:
    limiter = MemoryRateLimiter(RateBudget(events=0, bytes=0), clock=Clock())
    for _ in range(5):
        assert charge(limiter, {1: Cost(10**9, 10**12)}) == 0
    bytes_only = MemoryRateLimiter(RateBudget(events=0, bytes=100), clock=Clock())
    assert charge(bytes_only, {1: Cost(10**6, 60)}) == 0
    assert charge(bytes_only, {1: Cost(10**6, 40)}) == 0
    assert charge(bytes_only, {1: Cost(0, 1)}) > 0


def test_settings_defaults_and_refusals() -> None:
    limits = ImportLimits.from_env(Env({}))
    assert (limits.rate_events_per_second, limits.rate_bytes_per_minute) == (30_000, 2 * 1024**3)
    assert RateBudget.from_limits(limits) == RateBudget(1_800_000, 2 * 1024**3)
    env = {"FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND": "0", "FOOTFALL_IMPORT_RATE_BYTES_PER_MINUTE": "0"}
    assert not RateBudget.from_limits(ImportLimits.from_env(Env(env))).enabled
    with pytest.raises(ConfigError, match="IMPORT_RATE_EVENTS_PER_SECOND"):
        ImportLimits.from_env(Env({"FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND": "-1"}))


# -- HTTP: /import and /track ----------------------------------------------------------------


class RatedGateway:
    """The gateway app over a `MemorySink`, its rate limit on a fake clock."""

    def __init__(self, directory: Directory, events_per_minute: int) -> None:
        self.clock = Clock(time.time())
        self.sink = MemorySink()
        limiter = MemoryRateLimiter(RateBudget(events_per_minute, 0), clock=self.clock)
        self.app = build_app(Authenticator(directory), self.sink, ImportLimits(), rate=limiter)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://footfall.test") as client:
                return await client.request(method, url, **kwargs)

        return asyncio.run(go())


def events(n: int, start: int = 0, **props: Any) -> list[dict[str, Any]]:
    now = int(time.time()) - 60
    return [
        {"event": "Rated", "properties": {"time": now, "distinct_id": "u", "$insert_id": f"r-{i}", **props}}
        for i in range(start, start + n)
    ]


def test_import_over_the_budget_is_429_and_stores_nothing(directory: Directory, creds: Any) -> None:
    gw = RatedGateway(directory, events_per_minute=60)
    auth = (creds.token, "")
    post = {"headers": {"content-type": "application/json"}, "auth": auth}
    r = gw.request("POST", "/import?strict=1", content=orjson.dumps(events(50)), **post)
    assert r.status_code == 200, r.text
    gw.clock.now += 20
    r = gw.request("POST", "/import?strict=1", content=orjson.dumps(events(20, 50)), **post)
    assert r.status_code == 429, r.text
    assert r.headers["retry-after"] == "40"
    body = r.json()
    assert (body["code"], body["status"]) == (429, "Too Many Requests") and "rate limit" in body["error"]
    assert len(gw.sink.events) == 50  # nothing of the refused batch
    # invalid events count too (the interface: 400s count toward the limit)
    bad = [{"event": "Rated", "properties": {"time": 0, "distinct_id": "u", "$insert_id": "x"}}] * 10
    r = gw.request("POST", "/import?strict=1", content=orjson.dumps(bad), **post)
    assert r.status_code == 400
    r = gw.request("POST", "/import?strict=1", content=orjson.dumps(events(1, 70)), **post)
    assert r.status_code == 429
    # /track is charged to the same project's budget
    track = orjson.dumps(events(1, 80, token=creds.token))
    r = gw.request("POST", "/track?strict=1", content=track, headers={"content-type": "application/json"})
    assert r.status_code == 429 and r.headers["retry-after"] == "40"
    # once the first batch has left the window, the refused one is accepted
    gw.clock.now += 40
    r = gw.request("POST", "/import?strict=1", content=orjson.dumps(events(20, 50)), **post)
    assert r.status_code == 200, r.text
    r = gw.request("POST", "/track?strict=1", content=track, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert [e.insert_id for e in gw.sink.events] == [f"r-{i}" for i in [*range(50), *range(50, 70), 80]]


def test_track_of_another_project_is_not_charged_to_the_first(directory: Directory, creds: Any) -> None:
    gw = RatedGateway(directory, events_per_minute=10)
    json_type = {"content-type": "application/json"}
    r = gw.request("POST", "/track?strict=1", content=orjson.dumps(events(10, token=creds.token)), headers=json_type)
    assert r.status_code == 200, r.text
    r = gw.request("POST", "/track?strict=1", content=orjson.dumps(events(1, 10, token=creds.token)), headers=json_type)
    assert r.status_code == 429
    other = orjson.dumps(events(10, 20, token=creds.token2))
    assert gw.request("POST", "/track?strict=1", content=other, headers=json_type).status_code == 200
    # a body of both projects is refused as a whole
    mixed = orjson.dumps(events(1, 40, token=creds.token2) + events(1, 41, token=creds.token))
    assert gw.request("POST", "/track?strict=1", content=mixed, headers=json_type).status_code == 429
    assert len(gw.sink.events) == 20
