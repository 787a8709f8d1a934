"""`build_app(...)` / `query_routes(...)`: the query service's routes. Explicit wiring only."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from footfall.services.query.endpoints import QUERY, Handler, QueryService
from footfall.services.query.jql import jql_handler
from footfall.services.query.limits import QueryLimiter
from footfall.services.query.reports import (
    _common,
    cohorts,
    engage,
    events,
    export,
    frequency,
    funnels,
    insights,
    properties,
    retention,
    segmentation,
    stream,
)
from footfall.services.query.settings import QuerySettings
from footfall.shared.auth import Authenticator
from footfall.shared.cohorts import WarehouseCohortStore
from footfall.shared.cohorts.counts import CohortCounter
from footfall.shared.warehouse import ClickHouseWarehouse, Warehouse
from footfall.shared.web import build_starlette

# Report endpoints, by path under /api/query and /api/2.0. Families register here.
REPORTS: dict[str, Handler] = {
    "segmentation": segmentation.segmentation,
    "segmentation/numeric": segmentation.numeric,
    "segmentation/sum": segmentation.sum_,
    "segmentation/average": segmentation.average,
    "events": events.events,
    "events/top": events.top,
    "events/names": events.names,
    "events/properties": properties.properties,
    "events/properties/top": properties.top,
    "events/properties/values": properties.values,
    "funnels": funnels.funnels,
    "funnels/list": funnels.funnels_list,
    "retention": retention.retention,
    "retention/addiction": frequency.frequency,
    "stream/query": stream.stream,
    "insights": insights.insights,
    "engage": engage.engage,
}


# Every report endpoint name: REPORTS and those wired with their dependencies in `query_routes`.
REPORT_NAMES = (*REPORTS, "cohorts/list", "jql")


def cohort_counter(warehouse: Warehouse, settings: QuerySettings) -> CohortCounter:
    """The process's cohort counter (`/cohorts/list` and the management `count`), on the reports' clock."""
    return CohortCounter(
        warehouse, WarehouseCohortStore(warehouse), now=lambda: _common.utc_now(), ttl=settings.cohort_count_ttl
    )


def query_routes(
    authenticator: Authenticator,
    warehouse: Warehouse,
    settings: QuerySettings,
    counter: CohortCounter | None = None,
) -> list[Route]:
    # Reports and exports run in their own warehouse lane (threads, per-statement time and
    # memory limits, second place behind ingestion on chDB): a burst of them cannot starve imports.
    if isinstance(warehouse, ClickHouseWarehouse):
        warehouse = warehouse.query_lane(settings.warehouse)
    service = QueryService(
        authenticator,
        warehouse,
        QueryLimiter(settings.rate_per_hour, settings.concurrency),
        max_body_bytes=settings.max_body_bytes,
        max_cells=settings.max_cells,
    )
    counter = counter or cohort_counter(warehouse, settings)
    # An /engage export pages through one session: its later pages do not spend the hourly
    # budget (mixpanel-utils fetches them all at once from `total`), only concurrency slots.
    reports = {**REPORTS, "cohorts/list": cohorts.cohorts_list(counter), "jql": jql_handler(settings.jql)}
    routes = service.routes(reports, free={"engage": engage.continues_session})
    # Raw export has its own limits at the interface (60/hour, 3/second, 100 at once per
    # project); it is not counted against the 60/hour report budget.
    limits = settings.export
    exports = QueryLimiter(limits.per_hour, limits.concurrency, per_second=limits.per_second, what="exports")
    export_endpoint = service.wrap("export", export.export, limiter=exports)
    routes += [Route(p, export_endpoint, methods=["GET", "POST"]) for p in ("/api/2.0/export", "/api/2.0/export/")]
    return routes


def build_app(authenticator: Authenticator, warehouse: Warehouse, settings: QuerySettings) -> Starlette:
    """The query interface alone (tests); `footfall query` adds management (`main.py`)."""
    return build_starlette("query", query_routes(authenticator, warehouse, settings), interfaces=[QUERY])
