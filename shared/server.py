"""Running an app under uvicorn with a bounded shutdown: every process exits within
`SHUTDOWN_SECONDS` (5 s) of SIGTERM or SIGINT, whatever state it is in.

The sequence after the signal:

1. uvicorn stops accepting connections and gives requests in flight `DRAIN_SECONDS`
   to finish; it then cancels them (their clients see the connection close and retry:
   an `/import` cut here was not acknowledged, and a retry deduplicates).
2. The lifespan shutdown stops the process's services, bounded by `STOP_SECONDS`
   (`footfall.shared.lifecycle`): consumers finish or abandon the batch in hand,
   commit what was inserted and leave their group; producers flush briefly.
3. A watchdog armed by the signal ends the process at `EXIT_DEADLINE_SECONDS` if it is
   still there (a warehouse call that does not return, a library that hangs on close),
   with exit status 1 and a `shutdown_deadline_exceeded` line on stderr. Nothing
   acknowledged is lost by this: it is the same as the SIGKILL the fault tests exercise.

A SIGTERM that arrives while the lifespan starts is honoured as soon as it returns, which
is at once (services connect in the background), and the lifespan shutdown still runs.

`gateway --workers N` runs uvicorn's own multi-process supervisor, whose children are
plain uvicorn servers: they have steps 1 and 2 (both bounded), not the watchdog.

Before anything is created, a command takes what it will need and fails in one line
when it cannot: `listen()` binds the port (the socket is then handed to uvicorn, so
nobody can take it in between), `lock_data_dir()` takes the data folder's lock (a second
process on the same chDB folder would otherwise fail deep inside chDB). `AccessLog`
writes one structured `access` line per request (`FOOTFALL_ACCESS_LOG=0` turns it off):
method, path without the query string (which may carry a secret), status, duration,
response bytes and the TCP peer (successful `/healthz` and `/metrics` probes are not logged).
"""

from __future__ import annotations

import fcntl
import gc
import os
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import structlog
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from footfall.shared.config import LogSettings
from footfall.shared.lifecycle import SHUTDOWN_SECONDS
from footfall.shared.slow_clients import PROTOCOL

__all__ = [
    "DRAIN_SECONDS",
    "EXIT_DEADLINE_SECONDS",
    "AccessLog",
    "BoundedServer",
    "StartError",
    "listen",
    "lock_data_dir",
    "run_app",
]

access_log = structlog.get_logger("footfall.access")
LOCK_FILE = ".lock"
# Probes: answered successfully, they are not logged (a healthcheck every few seconds).
QUIET_PATHS = frozenset({"/healthz", "/metrics"})


class StartError(Exception):
    """A process cannot start; the message is the one line the command prints."""


def listen(host: str, port: int) -> socket.socket:
    """Bind `host:port` now (StartError when it is taken), before credentials or stores exist."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        reason = "address already in use" if exc.errno == 98 else (exc.strerror or str(exc))
        raise StartError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def lock_data_dir(data_dir: Path) -> int:
    """Take the data folder's lock for the life of the process (StartError when another
    process holds it). Returns the descriptor, which must stay open."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StartError(
            f"the data folder {data_dir} is in use by another Footfall process (pid {holder}):"
            " stop it, or give this one its own folder with --data"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


class AccessLog:
    """ASGI middleware: one `access` log line per HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        sent = 0

        async def send_and_note(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            if not (scope.get("path") in QUIET_PATHS and 200 <= status < 300):
                self._log(scope, status, sent, started)

    @staticmethod
    def _log(scope: Scope, status: int, sent: int, started: float) -> None:
        client = scope.get("client")
        access_log.info(
            "access",
            method=scope.get("method"),
            path=scope.get("path"),
            status=status or 500,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
            bytes=sent,
            client=client[0] if client else None,
        )


DRAIN_SECONDS = 1.5
EXIT_DEADLINE_SECONDS = SHUTDOWN_SECONDS - 0.5


# Container allocations between two young-generation collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Once the process is set up: collect, then move every object alive now (modules,
    settings, clients, caches) out of the cyclic collector's sight, and collect young objects
    less often. A loaded worker creates tens of thousands of short-lived records per batch;
    with the defaults the collector kept re-scanning them and, in full collections, the whole
    heap (≈ 3.5 % of a loaded `serve`'s CPU in perf). Reference counting frees those records
    as before; only cycles wait for a later collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


class BoundedServer(uvicorn.Server):
    """uvicorn's server plus a watchdog armed by the first exit signal; the heap settled
    once the app has started."""

    deadline = EXIT_DEADLINE_SECONDS

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._watchdog: threading.Timer | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        settle_heap()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Timer(self.deadline, _hard_exit, args=(sig, time.monotonic()))
            self._watchdog.daemon = True
            self._watchdog.start()
        super().handle_exit(sig, frame)


def _hard_exit(sig: int, since: float) -> None:
    line = (
        f'{{"event": "shutdown_deadline_exceeded", "level": "error", "signal": {sig},'
        f' "seconds": {time.monotonic() - since:.2f}}}\n'
    )
    try:
        os.write(sys.stderr.fileno(), line.encode())
    finally:
        os._exit(1)


def run_app(
    app: Any,
    host: str,
    port: int,
    log: LogSettings,
    *,
    workers: int = 1,
    factory: bool = False,
    sock: socket.socket | None = None,
) -> int:
    """Serve `app` (an ASGI app, or an import string with `factory`) until a signal, on
    `sock` when given (from `listen`)."""
    if log.access and not factory:
        app = AccessLog(app)
    options: dict[str, Any] = {
        "factory": factory,
        "host": host,
        "port": port,
        "log_level": log.level if log.level != "info" else "warning",
        "access_log": False,
        "timeout_graceful_shutdown": DRAIN_SECONDS,
        # The peer address is the TCP peer: uvicorn would otherwise rewrite it from
        # X-Forwarded-For for 127.0.0.1; the gateway applies FOOTFALL_TRUSTED_PROXIES itself.
        "proxy_headers": False,
        # Request-head and body timeouts for slow clients (footfall.shared.slow_clients).
        "http": PROTOCOL,
    }
    if workers > 1:
        if sock is not None:
            sock.close()  # it was a check: uvicorn's supervisor binds for its children
        uvicorn.run(app, workers=workers, **options)
        return 0
    server = BoundedServer(uvicorn.Config(app, **options))
    server.run(sockets=[sock] if sock is not None else None)
    return 0 if server.started else 3
