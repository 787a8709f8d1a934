"""The gateway's routes and app. Explicit wiring; no logic lives here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.routing import Route

from footfall.services.gateway.addresses import Network
from footfall.services.gateway.import_ import ImportEndpoint
from footfall.services.gateway.responses import INGESTION
from footfall.services.gateway.sinks import Sink
from footfall.services.gateway.track import TrackEndpoint
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.web import build_starlette

__all__ = ["INGESTION", "build_app", "import_routes"]


def import_routes(
    authenticator: Authenticator, sink: Sink, limits: ImportLimits, *, trusted_proxies: tuple[Network, ...] = ()
) -> list[Route]:
    """The event ingestion routes: `/import` and `/track` (each with a trailing-slash alias)."""
    endpoint = ImportEndpoint(authenticator, sink, limits)
    track = TrackEndpoint(authenticator, sink, limits, trusted_proxies)
    return [
        Route("/import", endpoint.handle, methods=["POST", "GET"]),
        Route("/import/", endpoint.handle, methods=["POST", "GET"]),
        Route("/track", track.handle, methods=["POST", "GET", "OPTIONS"]),
        Route("/track/", track.handle, methods=["POST", "GET", "OPTIONS"]),
    ]


def build_app(
    authenticator: Authenticator, sink: Sink, limits: ImportLimits, *, trusted_proxies: tuple[Network, ...] = ()
) -> Starlette:
    """The ingestion interface alone, over `sink` (the unit tests' gateway)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sink.start()
        try:
            yield
        finally:
            await sink.stop()

    routes = import_routes(authenticator, sink, limits, trusted_proxies=trusted_proxies)
    return build_starlette("gateway", routes, interfaces=[INGESTION], lifespan=lifespan)
