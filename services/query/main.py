"""Composition root of `footfall query`: the query service alone, against the warehouse
named by `FOOTFALL_WAREHOUSE_DSN` (a ClickHouse server in the distributed setup).

Credentials come from the metadata tables of the same warehouse, reloaded every
`REFRESH_SECONDS`, so a project, secret or service account created (or revoked) through
the CLI or the management API reaches a running query process without a restart. A
failed reload keeps the last directory. No logic lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from starlette.applications import Starlette

from footfall.services.app.cohorts import cohort_routes
from footfall.services.app.data_groups import data_group_routes
from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.services.query.app import cohort_counter, query_routes
from footfall.services.query.endpoints import QUERY
from footfall.services.query.settings import QuerySettings
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import ClickHouseWarehouse, WarehouseError, open_warehouse
from footfall.shared.web import build_starlette

log = structlog.get_logger(__name__)

REFRESH_SECONDS = 10.0


@dataclass
class QueryProcess:
    app: Starlette
    warehouse: ClickHouseWarehouse
    authenticator: Authenticator


async def _refresh(repo: MetadataRepository, authenticator: Authenticator, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            directory = await repo.warehouse.run(repo.load_directory)
        except WarehouseError as exc:
            log.warning("directory_reload_failed", error=str(exc)[:500])
            continue
        authenticator.replace(directory)


def build_query(settings: QuerySettings, *, refresh_seconds: float = REFRESH_SECONDS) -> QueryProcess:
    warehouse = open_warehouse(settings.store.dsn)
    apply_migrations(warehouse)
    repo = MetadataRepository(warehouse)
    authenticator = Authenticator(repo.load_directory())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(_refresh(repo, authenticator, refresh_seconds))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            warehouse.close()

    # The management interface (saved funnels and reports, data groups) lives beside the
    # queries that read it: this process is the one with warehouse access in the distributed shape.
    counter = cohort_counter(warehouse, settings)  # one count cache for the reports and management
    routes = query_routes(authenticator, warehouse, settings, counter)
    routes += saved_routes(authenticator, WarehouseSavedStore(warehouse))
    routes += data_group_routes(authenticator, warehouse)
    routes += cohort_routes(authenticator, counter.store, counter.count_of)
    app = build_starlette("query", routes, interfaces=[QUERY, MANAGEMENT], lifespan=lifespan)
    return QueryProcess(app, warehouse, authenticator)
