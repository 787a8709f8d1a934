"""`Channel`: calls both ways over a pair of byte streams (here a socket pair in one loop)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from footfall.shared.channel import Channel, ChannelClosed, RemoteError
from footfall.shared.errors import NotFoundError, UnavailableError

Handler = Callable[[str, tuple[Any, ...]], Awaitable[Any]]


@asynccontextmanager
async def pair(left: Handler, right: Handler) -> AsyncIterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    ends = []
    for sock, handle, name in ((a, left, "left"), (b, right, "right")):
        reader, writer = await asyncio.open_connection(sock=sock)
        channel = Channel(reader, writer, handle, name=name)
        channel.start()
        ends.append(channel)
    try:
        yield ends[0], ends[1]
    finally:
        for channel in ends:
            await channel.close()


async def nothing(method: str, args: tuple[Any, ...]) -> Any:
    raise ValueError(f"no method {method}")


def test_calls_go_both_ways_and_run_concurrently() -> None:
    release = asyncio.Event()

    async def left(method: str, args: tuple[Any, ...]) -> Any:
        if method == "slow":
            await release.wait()
            return "slow done"
        return ("left", method, args)

    async def right(method: str, args: tuple[Any, ...]) -> Any:
        if method == "ask-back":  # a call that calls the caller while it waits
            return await ends[1].call("echo", *args)
        return sum(args)

    async def main() -> None:
        async with pair(left, right) as (a, b):
            ends[:] = [a, b]
            assert await a.call("add", 1, 2, 3) == 6
            assert await b.call("echo", [1, {"x": b"y"}]) == ("left", "echo", ([1, {"x": b"y"}],))
            assert await a.call("ask-back", "hi") == ("left", "echo", ("hi",))
            slow = asyncio.ensure_future(b.call("slow"))
            assert await asyncio.wait_for(b.call("fast", 1), 5) == ("left", "fast", (1,))  # not behind "slow"
            assert not slow.done()
            release.set()
            assert await slow == "slow done"

    ends: list[Channel] = []
    asyncio.run(main())


def test_large_values_cross_whole() -> None:
    async def right(method: str, args: tuple[Any, ...]) -> Any:
        (blobs,) = args
        return [len(b) for b in blobs], blobs[-1][-5:]

    async def main() -> None:
        async with pair(nothing, right) as (a, _):
            blobs = [bytes([i % 251]) * 3_000_000 for i in range(5)]  # 15 MB in one message
            assert await a.call("sizes", blobs) == ([3_000_000] * 5, bytes([4]) * 5)

    asyncio.run(main())


def test_errors_cross_as_themselves_or_as_their_text() -> None:
    class Unpicklable(Exception):
        def __init__(self) -> None:
            super().__init__("held a lock")
            self.lock = threading.Lock()

    async def right(method: str, args: tuple[Any, ...]) -> Any:
        if method == "busy":
            raise UnavailableError("store busy", retry_after=7)
        if method == "missing":
            raise NotFoundError("no such job")
        raise Unpicklable()

    async def main() -> None:
        async with pair(nothing, right) as (a, _):
            with pytest.raises(UnavailableError) as busy:
                await a.call("busy")
            assert (busy.value.status, busy.value.message, busy.value.retry_after) == (503, "store busy", 7)
            with pytest.raises(NotFoundError, match="no such job"):
                await a.call("missing")
            with pytest.raises(RemoteError, match="Unpicklable: held a lock"):
                await a.call("other")
            with pytest.raises(UnavailableError):
                await a.call("busy")

    asyncio.run(main())


def test_a_peer_that_goes_away_fails_the_waiting_calls() -> None:
    started = asyncio.Event()

    async def right(method: str, args: tuple[Any, ...]) -> Any:
        started.set()
        await asyncio.sleep(3600)

    async def main() -> None:
        async with pair(nothing, right) as (a, b):
            waiting = asyncio.ensure_future(a.call("forever"))
            await asyncio.wait_for(started.wait(), 5)
            await b.close()  # the other process exits
            with pytest.raises(ChannelClosed):
                await asyncio.wait_for(waiting, 5)
            await asyncio.wait_for(a.closed.wait(), 5)
            with pytest.raises(ChannelClosed):
                await a.call("after")
            await a.notify("ignored")  # a note to a closed channel is dropped

    asyncio.run(main())


def test_notes_are_handled_and_never_answered() -> None:
    got: list[tuple[str, tuple[Any, ...]]] = []
    seen = asyncio.Event()

    async def right(method: str, args: tuple[Any, ...]) -> Any:
        got.append((method, args))
        if method == "fails":
            raise ValueError("logged, not answered")
        seen.set()
        return "dropped"

    async def main() -> None:
        async with pair(nothing, right) as (a, _):
            await a.notify("fails")
            await a.notify("metrics", {"x": 1.0})
            await asyncio.wait_for(seen.wait(), 5)
            assert await a.call("sum-less") == "dropped"  # still answering calls

    asyncio.run(main())
    assert got[:2] == [("fails", ()), ("metrics", ({"x": 1.0},))]
