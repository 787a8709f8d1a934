"""Composition root of `footfall serve`: gateway + inline worker + query service on one port,
chDB (or the configured warehouse) as the store. No logic lives here."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from starlette.applications import Starlette

from footfall.services.app.bootstrap import BOOTSTRAP_FILE, bootstrap_if_empty
from footfall.services.app.cohorts import cohort_routes
from footfall.services.app.data_groups import data_group_routes
from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.services.gateway.app import INGESTION, ingestion_routes
from footfall.services.gateway.sinks import Sink
from footfall.services.query.app import cohort_counter, query_routes
from footfall.services.query.endpoints import QUERY
from footfall.services.standalone.settings import ServeSettings
from footfall.services.standalone.sink import EmbeddedSink
from footfall.services.worker.enrich import open_enricher
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import ClickHouseWarehouse, open_warehouse
from footfall.shared.web import Background, build_starlette

log = structlog.get_logger(__name__)


@dataclass
class Embedded:
    app: Starlette
    warehouse: ClickHouseWarehouse
    authenticator: Authenticator
    repo: MetadataRepository


def build_embedded(settings: ServeSettings, *, sink: Sink | None = None) -> Embedded:
    settings.store.data_dir.mkdir(parents=True, exist_ok=True)
    warehouse = open_warehouse(settings.store.dsn)
    apply_migrations(warehouse)
    repo = MetadataRepository(warehouse)
    created = bootstrap_if_empty(repo, settings.bootstrap, settings.store.data_dir)
    if created is not None:
        _announce(created, settings)
    authenticator = Authenticator(repo.load_directory())
    enricher = open_enricher(settings.worker.geoip_db)
    background: list[Background] = []
    if sink is None and settings.distributed:
        # The distributed path in one process: /import → Kafka → in-process consumers → this store.
        from footfall.services.gateway.kafka_sink import KafkaSink
        from footfall.services.worker.main import in_process_workers

        sink = KafkaSink(settings.gateway.kafka)
        background = in_process_workers(settings.worker, warehouse, enricher, authenticator)
    sink = sink or EmbeddedSink(warehouse, enricher)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sink.start()
        for service in background:
            await service.start()
        try:
            yield
        finally:
            await sink.stop()
            for service in reversed(background):
                await service.stop()
            enricher.close()
            warehouse.close()

    routes = ingestion_routes(
        authenticator, sink, settings.gateway.limits, trusted_proxies=settings.gateway.trusted_proxies
    )
    counter = cohort_counter(warehouse, settings.query)  # one count cache for the reports and management
    routes += query_routes(authenticator, warehouse, settings.query, counter)
    routes += saved_routes(authenticator, WarehouseSavedStore(warehouse))
    routes += data_group_routes(authenticator, warehouse)
    routes += cohort_routes(authenticator, counter.store, counter.count_of)
    app = build_starlette("embedded", routes, interfaces=[INGESTION, QUERY, MANAGEMENT], lifespan=lifespan)
    return Embedded(app, warehouse, authenticator, repo)


def _announce(created: dict[str, object], settings: ServeSettings) -> None:
    sa = created["service_account"]
    if not isinstance(sa, dict):
        raise AssertionError("invariant: isinstance(sa, dict)")
    lines = [
        "",
        'Footfall created project 1 ("Default", UTC). These credentials are shown once;',
        f"they are also in {settings.store.data_dir / BOOTSTRAP_FILE} (mode 0600):",
        f"  project token:            {created['project_token']}",
        f"  project secret:           {created['project_secret']}",
        f"  service account username: {sa['username']}",
        f"  service account secret:   {sa['secret']}",
        "",
    ]
    print("\n".join(lines), file=sys.stderr, flush=True)
