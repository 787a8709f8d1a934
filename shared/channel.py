"""`Channel`: calls both ways between two of our own processes over a pair of byte streams.

Used between `serve` and its migration job process (`services/standalone/job_process.py`):
serve calls the job process's runner (submit, get, cancel), the job process calls serve's store
and ingestion sink. Each message is one pickled tuple behind an 8-byte length:

    ("call", id, method, args)    answered by ("reply", id, True, value) or (…, False, error)
    ("note", 0, method, args)     not answered (progress, metrics)

Calls are handled concurrently (each in its own task), so a long publish does not hold up a
status query. Pickle is safe here only because both ends are our own code in processes we
started; nothing else can write to the pipes. Large messages are encoded and decoded in a thread
so that neither event loop stalls on them (calls are encoded in a thread; replies and notes are
small). When the peer goes away (its end of the pipe closes)
every call waiting for it fails with `ChannelClosed`, and `closed` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import pickle
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

__all__ = ["Channel", "ChannelClosed", "RemoteError"]

log = structlog.get_logger(__name__)

_LENGTH = struct.Struct(">Q")
_OFF_LOOP_BYTES = 256 * 1024  # messages at least this large are (un)pickled in a thread
MAX_MESSAGE = 1 << 31  # a length beyond this is a broken stream, not a message

Handler = Callable[[str, tuple[Any, ...]], Awaitable[Any]]


class ChannelClosed(ConnectionError):
    """The other process is gone (or the channel was closed): the call's outcome is unknown."""


class RemoteError(RuntimeError):
    """An error of the other process that could not cross as itself (its type and message)."""


def _encode(message: tuple[Any, ...]) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _decode(data: bytes) -> Any:
    return pickle.loads(data)  # noqa: S301 - both ends are our own processes (see the module's doc)


def _portable(exc: BaseException) -> BaseException:
    try:
        pickle.dumps(exc)
    except Exception:  # any unpicklable error crosses as its text
        return RemoteError(f"{type(exc).__name__}: {exc}"[:2000])
    return exc


class Channel:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handle: Handler, *, name: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.handle = handle
        self.name = name
        self.closed = asyncio.Event()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._handling: set[asyncio.Task[None]] = set()
        self._send_lock = asyncio.Lock()
        self._reading: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reading = asyncio.create_task(self._read(), name=f"channel-{self.name}")

    async def call(self, method: str, *args: Any) -> Any:
        """`method(*args)` in the other process; its value, or its error raised here."""
        if self.closed.is_set():
            raise ChannelClosed(f"the {self.name} channel is closed")
        call_id = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            await self._send(("call", call_id, method, args))
            return await answer
        finally:
            self._waiting.pop(call_id, None)

    async def notify(self, method: str, *args: Any) -> None:
        """`method(*args)` in the other process, unanswered (and not sent once the channel closed)."""
        if not self.closed.is_set():
            await self._send(("note", 0, method, args))

    async def close(self) -> None:
        """Stop reading, fail the calls still waiting, close this end."""
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading
        self._shut()
        for task in list(self._handling):
            task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()
            await self.writer.wait_closed()

    # ------------------------------------------------------------------------------ internals
    async def _send(self, message: tuple[Any, ...]) -> None:
        # Calls carry the large values (a publish's rows or updates): encoded in a thread.
        data = await asyncio.to_thread(_encode, message) if message[0] == "call" else _encode(message)
        async with self._send_lock:
            try:
                self.writer.write(_LENGTH.pack(len(data)))
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, RuntimeError) as exc:
                self._shut()
                raise ChannelClosed(f"the {self.name} channel is closed: {exc}") from exc

    async def _read(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(_LENGTH.size)
                (size,) = _LENGTH.unpack(head)
                if size > MAX_MESSAGE:
                    raise ValueError(f"a message of {size} bytes")
                data = await self.reader.readexactly(size)
                message = await asyncio.to_thread(_decode, data) if size >= _OFF_LOOP_BYTES else _decode(data)
                self._dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the other process is gone
        except Exception as exc:  # a broken stream ends the channel, loudly
            log.error("channel_broken", channel=self.name, error=str(exc)[:500])
        finally:
            self._shut()

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind, call_id, first, rest = message
        if kind == "reply":
            answer = self._waiting.get(call_id)
            if answer is not None and not answer.done():
                if first:
                    answer.set_result(rest)
                else:
                    answer.set_exception(rest)
            return
        task = asyncio.create_task(self._serve(kind == "call", call_id, first, rest))
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _serve(self, answered: bool, call_id: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            value = await self.handle(method, args)
        except Exception as exc:  # every error of a call goes back to its caller
            if not answered:
                log.error("channel_note_failed", channel=self.name, method=method, error=str(exc)[:500])
                return
            reply: tuple[Any, ...] = ("reply", call_id, False, _portable(exc))
        else:
            if not answered:
                return
            reply = ("reply", call_id, True, value)
        with contextlib.suppress(ChannelClosed):
            await self._send(reply)

    def _shut(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(ChannelClosed(f"the {self.name} channel closed before the answer"))
