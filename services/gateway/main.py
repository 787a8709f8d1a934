"""Composition root of `footfall gateway`: `/import` and `/track` → `KafkaSink`, credentials from the
directory topic. It never opens the warehouse. No logic lives here.

`create_app()` reads the environment itself so that uvicorn can build one app per worker
process (`footfall gateway --workers N` passes it as an import string).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.gateway.app import INGESTION, ingestion_routes
from footfall.services.gateway.credentials import FollowedAuthenticator
from footfall.services.gateway.import_ import FastPath
from footfall.services.gateway.kafka_sink import KafkaSink
from footfall.services.gateway.ratelimit import open_rate_limiter
from footfall.services.gateway.settings import GatewaySettings
from footfall.shared.events import fast_import
from footfall.shared.kafka import Topics
from footfall.shared.kafka.directory import DirectoryFollower
from footfall.shared.kafka.logs import quiet_aiokafka
from footfall.shared.lifecycle import Services
from footfall.shared.logging import configure_logging
from footfall.shared.server import AccessLog, settle_heap
from footfall.shared.web import build_starlette


def build_gateway(settings: GatewaySettings) -> Starlette:
    if not settings.kafka.bootstrap:
        raise SystemExit("footfall gateway needs FOOTFALL_KAFKA_BOOTSTRAP (host:port of a Kafka broker)")
    quiet_aiokafka()
    topics = Topics.for_prefix(settings.kafka.topic_prefix)
    authenticator = FollowedAuthenticator(settings.region)
    follower = DirectoryFollower(settings.kafka.bootstrap, topics.directory, authenticator.replace)
    sink = KafkaSink(settings.kafka, topics)
    # The import rate limit's window, shared by every gateway through Redis (else per process).
    rate = open_rate_limiter(settings.limits, settings.redis_url, prefix=settings.kafka.topic_prefix)

    # Both start in the background (HTTP answers at once, 503 until the credentials are
    # known) and stop within the shutdown budget (footfall.shared.lifecycle).
    services = Services(kafka=sink, directory=follower)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.start()
        try:
            yield
        finally:
            await services.stop()
            await rate.close()

    async def healthz(request: Request) -> Response:
        # Ready once the credentials are known; Kafka's state is reported, not required
        # (a gateway without Kafka still answers, with 503s the clients retry).
        body = {
            "status": "ok" if authenticator.loaded else "loading",
            "credentials": authenticator.loaded,
            "kafka": sink.state,
            "services": services.health(),
        }
        return Response(
            orjson.dumps(body), status_code=200 if authenticator.loaded else 503, media_type="application/json"
        )

    # Plain requests' records written by the Rust fast path (FOOTFALL_IMPORT_FAST_PATH): the
    # same bytes as the Python path's, at a fraction of the CPU.
    fast = (
        FastPath.envelopes(fast_import.FastImport(settings.limits, geo=False), sink)
        if fast_import.usable(settings.import_fast_path)
        else None
    )
    routes = ingestion_routes(
        authenticator, sink, settings.limits, trusted_proxies=settings.trusted_proxies, rate=rate, fast=fast
    )
    return build_starlette("gateway", routes, interfaces=[INGESTION], lifespan=lifespan, health=healthz)


def create_app() -> Starlette:
    """uvicorn factory (one per worker process): settings from the environment."""
    settings = GatewaySettings.from_env()
    configure_logging(settings.log.level, settings.log.format)
    app = build_gateway(settings)
    if settings.log.access:  # run_app adds it to an app object, not to a factory's apps
        app.add_middleware(AccessLog)
    settle_heap()  # uvicorn's own server runs a factory's apps, not BoundedServer
    return app
