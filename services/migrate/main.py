"""Composition root of `footfall migrate --port P`: the migration service alone. Events and
profile updates go to Kafka (`KafkaSink`, the workers dedup and insert); job state and the
credential directory come from the warehouse. No logic lives here.

`footfall serve` runs the same `Runner` in its job process (`services/standalone/job_process.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from starlette.applications import Starlette

from footfall.services.gateway.kafka_sink import KafkaSink
from footfall.services.migrate.http import MIGRATE, migrate_routes
from footfall.services.migrate.runner import Publisher, Runner
from footfall.services.migrate.settings import MigrateSettings
from footfall.services.migrate.store import WarehouseJobStore, load_cipher
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import ClickHouseWarehouse, Warehouse, WarehouseError, open_warehouse
from footfall.shared.web import build_starlette

log = structlog.get_logger(__name__)

REFRESH_SECONDS = 10.0


@dataclass
class MigrateProcess:
    app: Starlette
    warehouse: ClickHouseWarehouse
    runner: Runner


def build_runner(settings: MigrateSettings, warehouse: Warehouse, sink: Publisher) -> Runner:
    cipher = load_cipher(settings.key, settings.store.data_dir)
    return Runner(WarehouseJobStore(warehouse), warehouse.run, sink, settings, cipher)


def build_migrate(settings: MigrateSettings) -> MigrateProcess:
    if not settings.kafka.bootstrap:
        raise SystemExit("footfall migrate needs FOOTFALL_KAFKA_BOOTSTRAP (imports go through the ingestion streams)")
    warehouse = open_warehouse(settings.store.dsn)
    apply_migrations(warehouse)
    repo = MetadataRepository(warehouse)
    authenticator = Authenticator(repo.load_directory())
    sink = KafkaSink(settings.kafka)
    runner = build_runner(settings, warehouse, sink)

    async def refresh() -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                authenticator.replace(await warehouse.run(repo.load_directory))
            except WarehouseError as exc:
                log.warning("directory_reload_failed", error=str(exc)[:500])

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sink.start()
        await runner.resume_all(sorted(authenticator.directory.projects))
        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await runner.stop()
            await sink.stop()
            warehouse.close()

    app = build_starlette("migrate", migrate_routes(authenticator, runner), interfaces=[MIGRATE], lifespan=lifespan)
    return MigrateProcess(app, warehouse, runner)
