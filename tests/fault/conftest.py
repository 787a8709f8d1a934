"""Fault tests of the distributed path: SIGKILL, broker, Redis and warehouse outages."""

from tests.distributed import cluster, geoip_db  # noqa: F401 - fixtures
