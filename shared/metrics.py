"""Prometheus metrics shared by every service, served on `/metrics`.

Metrics live in the default registry: one process may run several services (embedded
mode), and they all report through the same endpoint.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

HTTP_REQUESTS = Counter(
    "footfall_http_requests_total", "HTTP requests answered", ["service", "route", "status"]
)
EVENTS_IMPORTED = Counter("footfall_events_imported_total", "Events accepted by /import", ["path"])
EVENTS_REJECTED = Counter("footfall_events_rejected_total", "Events rejected by /import", ["reason"])
INSERT_SECONDS = Histogram(
    "footfall_warehouse_insert_seconds",
    "Time to insert one batch of events into the warehouse",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
INSERT_BATCH_EVENTS = Histogram(
    "footfall_warehouse_insert_batch_events",
    "Events per warehouse insert",
    buckets=(1, 10, 100, 500, 1000, 2000, 5000, 10000, 50000),
)
DUPLICATES_DROPPED = Counter("footfall_duplicates_dropped_total", "Events dropped as duplicates", ["layer"])
PUBLISH_SECONDS = Histogram("footfall_kafka_publish_seconds", "Time until Kafka acknowledged a request's events")
DEAD_LETTERED = Counter("footfall_dead_lettered_total", "Messages sent to the dead-letter topic", ["reason"])
CONSUMER_LAG = Gauge("footfall_consumer_lag", "Messages behind the partition end", ["topic", "partition"])
REDIS_FALLBACK = Gauge("footfall_dedup_redis_unavailable", "1 while Redis dedup is bypassed because Redis is down")
QUERY_SECONDS = Histogram("footfall_query_seconds", "Query endpoint latency", ["endpoint"])


async def metrics_endpoint(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
