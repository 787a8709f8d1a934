"""Composition root of `footfall query`: the query service alone, against the warehouse
named by `FOOTFALL_WAREHOUSE_DSN` (a ClickHouse server in the distributed setup).

Credentials come from the metadata tables of the same warehouse, reloaded every
`REFRESH_SECONDS`, so a project, secret or service account created (or revoked) through
the CLI or the management API reaches a running query process without a restart. A
failed reload keeps the last directory. No logic lives here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from starlette.applications import Starlette

from footfall.services.app.cohorts import cohort_routes
from footfall.services.app.data_deletion import data_deletions
from footfall.services.app.data_groups import data_group_routes
from footfall.services.app.experiments import WarehouseExperimentStore, experiment_routes, warehouse_results
from footfall.services.app.operations import Management
from footfall.services.app.organizations import organization_routes
from footfall.services.app.retention import retention_routes
from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.services.query.app import cohort_counter, query_routes
from footfall.services.query.endpoints import QUERY
from footfall.services.query.settings import QuerySettings
from footfall.services.ui import UI, UiSettings, ui_routes
from footfall.shared.auth import Authenticator
from footfall.shared.config import Env, HotSettings, RegionSettings
from footfall.shared.kafka.directory import DirectoryRefresher
from footfall.shared.metadata import Directory, MetadataRepository, UsageRecorder
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.schema import apply_migrations
from footfall.shared.schema.hot_auto import start_hot_columns
from footfall.shared.warehouse import ClickHouseWarehouse, open_warehouse
from footfall.shared.web import build_starlette

log = structlog.get_logger(__name__)

REFRESH_SECONDS = 5.0  # a revocation made by another process holds here within this


@dataclass
class QueryProcess:
    app: Starlette
    warehouse: ClickHouseWarehouse
    authenticator: Authenticator


def build_query(settings: QuerySettings, *, refresh_seconds: float = REFRESH_SECONDS) -> QueryProcess:
    if settings.store.embedded:
        settings.store.make_data_dir()
    warehouse = open_warehouse(settings.store.dsn)
    apply_migrations(warehouse)
    auto_hot = start_hot_columns(warehouse, HotSettings.from_env(Env()))  # FOOTFALL_HOT_PROPERTIES, _HOT_AUTO
    repo = MetadataRepository(warehouse)
    region = RegionSettings.from_env(Env())  # FOOTFALL_REGION, FOOTFALL_REGION_URLS
    usage = UsageRecorder(lambda used: warehouse.run(repo.record_usage, used))
    authenticator = Authenticator(repo.load_directory(), region=region, on_login=usage.note)

    async def load() -> Directory:
        return await warehouse.run(repo.load_directory)

    refresher = DirectoryRefresher(load, authenticator.replace, None, interval=refresh_seconds)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await refresher.start()
        await usage.start()
        await deletions.start()
        if auto_hot is not None:
            await auto_hot.start()
        try:
            yield
        finally:
            if auto_hot is not None:
                await auto_hot.stop()
            await deletions.stop()
            await refresher.stop()
            await usage.stop()
            warehouse.close()

    # The management interface (saved funnels and reports, data groups) lives beside the
    # queries that read it: this process is the one with warehouse access in the distributed shape.
    counter = cohort_counter(warehouse, settings)  # one count cache for the reports and management
    routes = query_routes(authenticator, warehouse, settings, counter)
    routes += saved_routes(authenticator, WarehouseSavedStore(warehouse))
    routes += data_group_routes(authenticator, warehouse)
    routes += cohort_routes(authenticator, counter.store, counter.count_of)
    routes += experiment_routes(authenticator, WarehouseExperimentStore(warehouse), warehouse_results(warehouse))
    deletion_routes, deletions = data_deletions(authenticator, warehouse)
    routes += deletion_routes
    management = Management(repo, region)
    routes += organization_routes(authenticator, management, run=warehouse.run, changed=refresher.changed)
    routes += retention_routes(authenticator, management, warehouse)
    ui = ui_routes(authenticator, UiSettings.from_env(Env()))  # the web UI under /ui
    app = build_starlette("query", [*routes, *ui], interfaces=[QUERY, MANAGEMENT, UI], lifespan=lifespan)
    return QueryProcess(app, warehouse, authenticator)
