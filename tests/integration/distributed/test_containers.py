"""Scenario 7: where a Docker engine runs, the distributed path against containers —
Kafka and Redis (from the session fixtures, which use testcontainers when Docker answers
and no address is given), a ClickHouse server, two gateways and two worker processes
writing to the same server — with a worker SIGKILLed mid-stream.

Without a Docker engine this test skips, saying so. It is marked `docker`, so under
CI=true the skip stays a skip (CI machines have no Docker engine); everything else in
the distributed suite runs there against the local Kafka and Redis scripts.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed import Cluster, export_events, import_with_retry, insert_ids, make_events, metric_value, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]

CLICKHOUSE_IMAGE = os.environ.get("FOOTFALL_TEST_CLICKHOUSE_IMAGE", "clickhouse/clickhouse-server:25.8")
CH_PASSWORD = "footfall-test"


def _docker_reason() -> str | None:
    """None when a Docker engine answers, else why not."""
    if os.environ.get("FOOTFALL_TEST_NO_DOCKER", "").lower() in ("1", "true", "yes"):
        return "FOOTFALL_TEST_NO_DOCKER is set"
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # no socket, no engine, no permission
        return f"no Docker engine answers ({type(exc).__name__})"
    return None


@pytest.fixture(scope="module")
def clickhouse_dsn() -> Iterator[str]:
    reason = _docker_reason()
    if reason is not None:
        pytest.skip(f"scenario 7 needs testcontainers: {reason}; expected on CI, which has no Docker engine")
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(CLICKHOUSE_IMAGE)
        .with_env("CLICKHOUSE_USER", "default")
        .with_env("CLICKHOUSE_PASSWORD", CH_PASSWORD)
        .with_env("CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT", "1")
        .with_exposed_ports(8123)
    )
    container.start()
    try:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(8123))

        def ping() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"http://{host}:{port}/ping", timeout=2).status_code == 200
            return False

        wait_for(ping, 90, interval=0.5, what="the ClickHouse server")
        yield f"http://default:{CH_PASSWORD}@{host}:{port}/default"
    finally:
        container.stop()


def test_containers_several_workers_on_a_clickhouse_server(
    tmp_path: Path, clickhouse_dsn: str, request: pytest.FixtureRequest, geoip_db: Path
) -> None:
    kafka = request.getfixturevalue("kafka_bootstrap")
    redis = request.getfixturevalue("redis_url")
    c = Cluster(tmp_path, kafka, redis, geoip_db, extra_env={"FOOTFALL_WAREHOUSE_DSN": clickhouse_dsn})
    try:
        c.publish_directory()  # migrations + project 1 on the server, snapshot to Kafka
        workers = [c.worker(consumers=2), c.worker(consumers=2)]
        gateways = [c.gateway(), c.gateway()]
        acked: list[str] = []
        errors: list[BaseException] = []

        def client(k: int) -> None:
            try:
                for b in range(30):
                    events = make_events(300, "ctr", start=(k * 30 + b) * 300)
                    for _ in range(1 + (b % 3 == 0)):  # every third batch is retried
                        r = import_with_retry(gateways[(b + k) % 2].base, events, deadline=time.monotonic() + 120)
                        assert r.status_code == 200, r.text
                    acked.extend(e["properties"]["$insert_id"] for e in events)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        wait_for(
            lambda: metric_value(workers[0].metrics(), "footfall_worker_messages_total", 'outcome="inserted"') > 0,
            60,
            what="worker 0 inserting",
        )
        workers[0].kill()
        for t in threads:
            t.join()
        assert not errors, repr(errors[0])
        c.caught_up(timeout=120)

        # Read back through a query process on the same server.
        reader = c.query()
        ids = insert_ids(export_events(reader.base, tag="ctr"))
        assert len(acked) == 2 * 30 * 300
        assert len(ids) == len(set(ids))
        assert set(ids) == set(acked)
    finally:
        c.stop_all()
