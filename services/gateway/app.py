"""The gateway's routes and app. Explicit wiring; no logic lives here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from footfall.services.gateway.addresses import Network
from footfall.services.gateway.engage import UpdatesEndpoint
from footfall.services.gateway.import_ import FastPath, ImportEndpoint
from footfall.services.gateway.ratelimit import MemoryRateLimiter, RateBudget, RateLimiter
from footfall.services.gateway.responses import INGESTION
from footfall.services.gateway.sinks import Sink
from footfall.services.gateway.track import TrackEndpoint
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.streams import GROUP_UPDATES, USER_UPDATES
from footfall.shared.web import build_starlette

__all__ = ["INGESTION", "build_app", "ingestion_routes"]


def ingestion_routes(
    authenticator: Authenticator,
    sink: Sink,
    limits: ImportLimits,
    *,
    trusted_proxies: tuple[Network, ...] = (),
    rate: RateLimiter | None = None,
    fast: FastPath[Any] | None = None,
) -> list[Route]:
    """The ingestion routes (each with a trailing-slash alias): events through `/import` and
    `/track`, profile updates through `/engage`, group profile updates through `/groups`.
    `rate` is the import rate limit of `/import` and `/track` (default: this process's own)."""
    rate = rate or MemoryRateLimiter(RateBudget.from_limits(limits))
    endpoint = ImportEndpoint(authenticator, sink, limits, rate, fast)
    track = TrackEndpoint(authenticator, sink, limits, trusted_proxies, rate)
    engage = UpdatesEndpoint(USER_UPDATES, authenticator, sink, limits, trusted_proxies)
    groups = UpdatesEndpoint(GROUP_UPDATES, authenticator, sink, limits, trusted_proxies)
    browser = ["POST", "GET", "OPTIONS"]
    return [
        *(Route(path, endpoint.handle, methods=["POST", "GET"]) for path in ("/import", "/import/")),
        *(Route(path, track.handle, methods=browser) for path in ("/track", "/track/")),
        *(Route(path, engage.handle, methods=browser) for path in ("/engage", "/engage/")),
        *(Route(path, groups.handle, methods=browser) for path in ("/groups", "/groups/")),
    ]


def build_app(
    authenticator: Authenticator,
    sink: Sink,
    limits: ImportLimits,
    *,
    trusted_proxies: tuple[Network, ...] = (),
    rate: RateLimiter | None = None,
) -> Starlette:
    """The ingestion interface alone, over `sink` (the unit tests' gateway)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sink.start()
        try:
            yield
        finally:
            await sink.stop()

    routes = ingestion_routes(authenticator, sink, limits, trusted_proxies=trusted_proxies, rate=rate)
    return build_starlette("gateway", routes, interfaces=[INGESTION], lifespan=lifespan)
