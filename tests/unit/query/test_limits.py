"""Per-project query limits: the rolling hourly budget, the concurrency cap, and requests that
take a concurrency slot without spending the budget (the later pages of an /engage session)."""

from __future__ import annotations

import asyncio

import pytest

from footfall.services.query.limits import QueryLimiter
from footfall.services.query.params import Params
from footfall.services.query.reports.engage import continues_session
from footfall.shared.errors import RateLimitedError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _run(limiter: QueryLimiter, project: int, *, counted: bool = True) -> None:
    async with limiter.slot(project, counted=counted):
        pass


def test_the_hourly_budget_is_per_project_and_rolls() -> None:
    clock = Clock()
    limiter = QueryLimiter(2, 0, clock=clock)
    asyncio.run(_run(limiter, 1))
    clock.now = 10
    asyncio.run(_run(limiter, 1))
    with pytest.raises(RateLimitedError) as refused:
        asyncio.run(_run(limiter, 1))
    assert refused.value.retry_after == 3590  # when the oldest query leaves the hour
    asyncio.run(_run(limiter, 2))  # another project has its own budget
    clock.now = 3601
    asyncio.run(_run(limiter, 1))


def test_uncounted_requests_skip_the_budget_but_not_the_concurrency_cap() -> None:
    limiter = QueryLimiter(1, 1, clock=Clock())
    asyncio.run(_run(limiter, 1))
    for _ in range(5):
        asyncio.run(_run(limiter, 1, counted=False))  # the budget is spent; these still run

    async def overlapping() -> None:
        async with limiter.slot(1, counted=False):
            with pytest.raises(RateLimitedError, match="concurrent"):
                async with limiter.slot(1, counted=False):
                    pass

    asyncio.run(overlapping())


@pytest.mark.parametrize(
    ("params", "free"),
    [
        ({"page": "1", "session_id": "s"}, True),
        ({"page": "0", "session_id": "s"}, False),
        ({"page": "3"}, False),
        ({"page": "x", "session_id": "s"}, False),
        ({}, False),
    ],
    ids=["later-page", "page-0", "no-session", "bad-page", "nothing"],
)
def test_only_later_pages_of_a_session_are_free(params: dict[str, str], free: bool) -> None:
    assert continues_session(Params(params)) is free


def test_export_limits_per_second_per_hour_and_a_held_slot() -> None:
    """Raw export's windows (3/second, 60/hour) and its slot, held until the stream ends."""
    clock = Clock()
    exports = QueryLimiter(60, 2, per_second=3, what="exports", clock=clock)
    for _ in range(3):
        exports.acquire(7).release()
    with pytest.raises(RateLimitedError, match=r"exports rate limit exceeded \(3 per second\)") as refused:
        exports.acquire(7)
    assert refused.value.retry_after == 1
    exports.acquire(8).release()  # another project
    held = [exports.acquire(7, counted=False) for _ in range(2)]
    with pytest.raises(RateLimitedError, match="concurrent exports"):
        exports.acquire(7, counted=False)
    held[0].release()
    held[0].release()  # idempotent: a stream that ends and is then abandoned releases once
    exports.acquire(7, counted=False)
    with pytest.raises(RateLimitedError, match="concurrent"):
        exports.acquire(7, counted=False)
    # the hour: 57 more in later seconds fill it; the 61st waits for the first to leave it
    held[1].release()
    for i in range(57):
        clock.now = 2 + i
        exports.acquire(7).release()
    clock.now = 100
    with pytest.raises(RateLimitedError, match="60 per hour") as refused:
        exports.acquire(7)
    assert refused.value.retry_after == 3500
    assert QueryLimiter(0, 0, per_second=0).windows == ()  # 0 disables each
