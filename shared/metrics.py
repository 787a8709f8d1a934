"""Prometheus metrics shared by every service, served on `/metrics`.

Metrics live in the default registry: one process may run several services (embedded
mode), and they all report through the same endpoint.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

HTTP_REQUESTS = Counter("footfall_http_requests_total", "HTTP requests answered", ["service", "route", "status"])
EVENTS_IMPORTED = Counter("footfall_events_imported_total", "Events accepted by /import and /track", ["path"])
IMPORT_FAST_PATH = Counter(
    "footfall_import_fast_path_total",
    "/import requests the Rust fast path stored (taken) or left to the Python path (declined)",
    ["outcome"],
)
WORKER_FAST_PATH = Counter(
    "footfall_worker_fast_path_batches_total",
    "Consumed batches of event records the Rust fast path stored (taken) or left to the Python path (declined)",
    ["outcome"],
)
EVENTS_REJECTED = Counter("footfall_events_rejected_total", "Events rejected by /import and /track", ["path", "reason"])
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
ITEMS_ACCEPTED = Counter(
    "footfall_items_accepted_total", "Profile and group updates accepted by /engage and /groups", ["stream"]
)
ITEMS_REJECTED = Counter(
    "footfall_items_rejected_total", "Profile and group updates refused by validation", ["stream", "reason"]
)
ITEMS_REFUSED = Counter(
    "footfall_items_refused_total",
    "Accepted items the store refused (profile updates that clash with their profile)",
    ["stream", "reason"],
)
QUERY_SECONDS = Histogram("footfall_query_seconds", "Query endpoint latency", ["endpoint"])
HOT_COLUMNS = Gauge("footfall_hot_columns", "Event properties the reports read from a column of their own", ["source"])
HOT_AUTO_ADDED = Counter("footfall_hot_columns_auto_added_total", "Event properties this process made hot by use")
HOT_AUTO_JSON_READS = Counter(
    "footfall_hot_columns_auto_json_reads_total",
    "Event property reads compiled against the JSON text, counted by FOOTFALL_HOT_AUTO's rounds",
)

# -- distributed ingestion (gateway → Kafka → workers) --------------------------------
KAFKA_PUBLISH_FAILURES = Counter(
    "footfall_kafka_publish_failures_total", "Requests answered 503 because Kafka did not acknowledge", ["reason"]
)
KAFKA_EVENTS_PUBLISHED = Counter("footfall_kafka_events_published_total", "Events acknowledged by Kafka")
WORKER_BATCH_MESSAGES = Histogram(
    "footfall_worker_batch_messages",
    "Messages per batch a worker consumer processed",
    buckets=(1, 10, 100, 500, 1000, 2000, 5000, 10000, 50000),
)
WORKER_MESSAGES = Counter(
    "footfall_worker_messages_total", "Messages a worker finished with, by outcome", ["outcome"]
)  # outcome: inserted | duplicate | dead_lettered
WORKER_INSERT_RETRIES = Counter(
    "footfall_worker_insert_retries_total", "Failed warehouse inserts that a worker will retry (nothing committed)"
)
WORKER_COMMIT_FAILURES = Counter(
    "footfall_worker_commit_failures_total", "Offset commits refused (rebalance); the batch may be redelivered"
)
WORKER_EVENT_DELAY = Histogram(
    "footfall_worker_event_delay_seconds",
    "From the gateway's acceptance of an event to its insert into the warehouse",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600),
)
WORKER_ASSIGNED_PARTITIONS = Gauge(
    "footfall_worker_assigned_partitions", "Partitions assigned to a worker consumer", ["consumer"]
)
DEDUP_LOOKUP_SECONDS = Histogram(
    "footfall_dedup_lookup_seconds",
    "Time to look a batch's dedup keys up in Redis",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
DIRECTORY_SNAPSHOTS = Counter(
    "footfall_directory_snapshots_total", "Credential snapshots published or applied", ["action"]
)
DIRECTORY_PUBLISHED_AT = Gauge(
    "footfall_directory_published_timestamp_seconds", "Publication time of the credential snapshot in use"
)


async def metrics_endpoint(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
