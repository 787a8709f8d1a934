"""Unmarked tests cannot reach IO by accident: the suite-wide `_no_io` fixture refuses it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from footfall.shared.warehouse import open_warehouse
from tests.conftest import UnmarkedIOError


def test_a_socket_connection_is_refused() -> None:
    with socket.socket() as s, pytest.raises(UnmarkedIOError, match="not marked for IO"):
        s.connect(("127.0.0.1", 9))


def test_an_asyncio_connection_is_refused() -> None:
    async def connect() -> None:
        await asyncio.open_connection("127.0.0.1", 9)

    with pytest.raises(UnmarkedIOError):
        asyncio.run(connect())


def test_a_warehouse_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnmarkedIOError, match="warehouse"):
        open_warehouse(f"chdb://{tmp_path}/chdb")


def test_redis_is_refused() -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=9, socket_connect_timeout=0.5)
    with pytest.raises(UnmarkedIOError):
        client.ping()
