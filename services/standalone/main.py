"""Composition root of `footfall serve`: gateway + inline worker + query service on one port,
chDB (or the configured warehouse) as the store. No logic lives here."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.responses import Response

from footfall.services.app.backup import operation_routes
from footfall.services.app.bootstrap import BOOTSTRAP_FILE, bootstrap_if_empty
from footfall.services.app.cohorts import cohort_routes
from footfall.services.app.data_deletion import data_deletions
from footfall.services.app.data_groups import data_group_routes
from footfall.services.app.experiments import WarehouseExperimentStore, experiment_routes, warehouse_results
from footfall.services.app.operations import Management
from footfall.services.app.organizations import organization_routes
from footfall.services.app.retention import retention_routes
from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.services.gateway.app import INGESTION, ingestion_routes
from footfall.services.gateway.import_ import FastPath
from footfall.services.gateway.ratelimit import open_rate_limiter
from footfall.services.gateway.sinks import Sink
from footfall.services.migrate.http import MIGRATE, migrate_routes
from footfall.services.migrate.store import WarehouseJobStore
from footfall.services.query.app import cohort_counter, query_routes
from footfall.services.query.endpoints import QUERY
from footfall.services.standalone.job_process import JobProcess
from footfall.services.standalone.settings import ServeSettings
from footfall.services.standalone.sink import EmbeddedSink
from footfall.services.ui import UI, UiSettings, ui_routes
from footfall.services.worker.enrich import open_enricher
from footfall.shared.auth import Authenticator
from footfall.shared.backup import release_schema_version
from footfall.shared.config import Env, HotSettings
from footfall.shared.events import fast_import
from footfall.shared.kafka.directory import DirectoryRefresher
from footfall.shared.lifecycle import Services
from footfall.shared.metadata import Directory, MetadataRepository, UsageRecorder
from footfall.shared.profiles.cache import use_state_cache
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.schema import apply_migrations, hot
from footfall.shared.schema.hot_auto import start_hot_columns
from footfall.shared.streams import EVENTS
from footfall.shared.warehouse import ClickHouseWarehouse, open_warehouse
from footfall.shared.web import Background, build_starlette, json_response

log = structlog.get_logger(__name__)

SCHEMA_VERSION = release_schema_version()  # the store's, too: `build_embedded` migrates it to this
RELOAD_SECONDS = 5.0  # credential reload: revocations by another process hold within this


@dataclass
class Embedded:
    app: Starlette
    warehouse: ClickHouseWarehouse
    authenticator: Authenticator
    repo: MetadataRepository


def _fast_path(settings: ServeSettings, sink: Sink, *, geo: bool) -> FastPath[Any] | None:
    """The `/import` fast path: Native rows for the embedded sink, Kafka records for the Kafka
    sink (the distributed shape in one process), unless FOOTFALL_IMPORT_FAST_PATH=0 or the
    extension is not installed."""
    from footfall.services.gateway.kafka_sink import KafkaSink

    if not isinstance(sink, EmbeddedSink | KafkaSink) or not fast_import.usable(settings.gateway.import_fast_path):
        return None
    if isinstance(sink, KafkaSink):
        return FastPath.envelopes(fast_import.FastImport(settings.gateway.limits, geo=False), sink)
    return FastPath.rows(fast_import.FastImport(settings.gateway.limits, geo=geo, hot_columns=hot.in_use_columns), sink)


def build_embedded(settings: ServeSettings, *, sink: Sink | None = None) -> Embedded:
    settings.store.make_data_dir()
    warehouse = open_warehouse(settings.store.dsn, backup_dir=str(settings.store.backups))
    apply_migrations(warehouse)
    auto_hot = start_hot_columns(warehouse, HotSettings.from_env(Env()))  # FOOTFALL_HOT_PROPERTIES, _HOT_AUTO
    repo = MetadataRepository(warehouse)
    created = bootstrap_if_empty(
        repo, settings.bootstrap, settings.store.data_dir, region=settings.management.region.region
    )
    if created is not None:
        _announce(created, settings)
    region = settings.management.region
    usage = UsageRecorder(lambda used: warehouse.run(repo.record_usage, used))
    authenticator = Authenticator(repo.load_directory(), region=region, on_login=usage.note)
    enricher = open_enricher(settings.worker.geoip_db)
    background: list[Background] = []
    if sink is None and settings.distributed:
        # The distributed path in one process: /import → Kafka → in-process consumers → this store.
        from footfall.services.gateway.kafka_sink import KafkaSink
        from footfall.services.worker.main import in_process_workers

        sink = KafkaSink(settings.gateway.kafka)
        background = in_process_workers(settings.worker, warehouse, enricher, authenticator)
    # Events of concurrent requests share one insert (group commit); profile updates are grouped by their store.
    if sink is None:
        sink = EmbeddedSink(warehouse, enricher, grouped={EVENTS.name})
        # The inline profile store is the one writer of this store's profiles: it may keep their states.
        use_state_cache(warehouse, settings.profile_cache)
    # The import rate limit: in this process, or in Redis beside other gateways of a distributed shape.
    redis_url = settings.worker.redis_url if settings.distributed else ""
    rate = open_rate_limiter(settings.gateway.limits, redis_url, prefix=settings.worker.kafka.topic_prefix)
    # Credentials reload every few seconds (another process may share the store) and at once
    # after a management change; with Kafka the in-process worker's refresher also publishes.
    refresher = next((s for s in background if isinstance(s, DirectoryRefresher)), None)
    if refresher is None:
        refresher = _reloader(repo, authenticator)
        background = [refresher, *background]
    background = [usage, *background, *([auto_hot] if auto_hot is not None else [])]

    # Started in the background and stopped within the shutdown budget: HTTP (and so
    # /healthz and queries) answers at once, whatever the broker does (shared.lifecycle).
    services = Services.of(sink, *background)
    # The migration service's jobs run in a process of their own (its store calls and publishes
    # come back here); with the embedded sink its mapping workers build the events' rows.
    migrations = JobProcess(
        settings.migrate,
        WarehouseJobStore(warehouse),
        warehouse.run,
        sink,
        projects=lambda: sorted(authenticator.directory.projects),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.start()
        await migrations.resume_all(sorted(authenticator.directory.projects))  # jobs a crash left running
        await deletions.start()  # and the data deletions it left unfinished
        try:
            yield
        finally:
            await deletions.stop()
            await migrations.stop()
            await services.stop()
            await rate.close()
            enricher.close()
            warehouse.close()

    routes = ingestion_routes(
        authenticator,
        sink,
        settings.gateway.limits,
        trusted_proxies=settings.gateway.trusted_proxies,
        rate=rate,
        fast=_fast_path(settings, sink, geo=enricher.reader is not None),
    )
    counter = cohort_counter(warehouse, settings.query)  # one count cache for the reports and management
    routes += query_routes(authenticator, warehouse, settings.query, counter)
    routes += saved_routes(authenticator, WarehouseSavedStore(warehouse))
    routes += data_group_routes(authenticator, warehouse)
    routes += cohort_routes(authenticator, counter.store, counter.count_of)
    routes += experiment_routes(authenticator, WarehouseExperimentStore(warehouse), warehouse_results(warehouse))
    deletion_routes, deletions = data_deletions(authenticator, warehouse)
    routes += deletion_routes
    routes += migrate_routes(authenticator, migrations)
    management = Management(repo, region)
    routes += organization_routes(authenticator, management, run=warehouse.run, changed=refresher.changed)
    routes += retention_routes(authenticator, management, warehouse)
    routes += operation_routes(authenticator, repo, warehouse, settings.store.backups)
    app = build_starlette(
        "embedded",
        [*routes, *ui_routes(authenticator, UiSettings.from_env(Env()))],  # the web UI under /ui
        interfaces=[INGESTION, QUERY, MANAGEMENT, MIGRATE, UI],
        lifespan=lifespan,
        health=lambda request: health_response(services, sink),
    )
    return Embedded(app, warehouse, authenticator, repo)


def _reloader(repo: MetadataRepository, authenticator: Authenticator) -> DirectoryRefresher:
    async def load() -> Directory:
        return await repo.warehouse.run(repo.load_directory)

    return DirectoryRefresher(load, authenticator.replace, None, interval=RELOAD_SECONDS)


def health_response(services: Services, sink: Sink) -> Response:
    """200 while this process serves (queries need no broker): `status` is `degraded`, with
    the parts named, while a background part is starting, the broker is not up, or a
    consumer is not running."""
    parts = services.health()
    body: dict[str, Any] = {"status": "ok", "services": parts, "schema_version": SCHEMA_VERSION}
    degraded = [name for name, state in parts.items() if state != "started"]
    kafka = getattr(sink, "health", None)
    if callable(kafka):
        body["kafka"] = kafka()
        if body["kafka"].get("state") != "up":
            degraded.append("kafka")
    for name, service in services.services.items():
        report = getattr(service, "health", None)
        if name == "worker_group" and callable(report):
            ok, body["workers"] = report()
            if not ok and name not in degraded:
                degraded.append(name)
    if degraded:
        body["status"], body["degraded"] = "degraded", sorted(set(degraded))
    return json_response(body)


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
