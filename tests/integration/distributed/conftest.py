"""Fixtures of the distributed-ingestion tests (real Kafka and Redis, chDB store)."""

from tests.distributed import cluster, geoip_db  # noqa: F401 - fixtures
