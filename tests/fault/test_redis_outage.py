"""Scenario 5: stop Redis during ingestion: the worker keeps ingesting without that layer
(metric and warning say so) and no duplicate surfaces; when Redis is back the layer
resumes by itself."""

from __future__ import annotations

import pytest

from tests.distributed import Cluster, insert_ids, make_events, metric_value, post_import, wait_for
from tests.services import redis_down

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(240)]


def test_redis_outage_keeps_ingesting_and_no_duplicate_surfaces(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    gateway = cluster.gateway()
    events = make_events(3000, "rdown")
    sent: list[list[dict]] = []

    def send(body: list[dict]) -> None:
        r = post_import(gateway.base, body)
        assert r.status_code == 200, r.text
        sent.append(body)

    send(events[:1000])
    cluster.caught_up()
    with redis_down():
        send(events[:1000])  # retries of stored events: Redis cannot drop them now
        send(events[1000:2000])
        send(events[1000:2000])
        cluster.caught_up()
        wm = worker.metrics()
        assert metric_value(wm, "footfall_dedup_redis_unavailable") == 1
        assert '"redis_dedup_bypassed"' in worker.log()
        assert metric_value(wm, "footfall_worker_messages_total", 'outcome="inserted"') >= 2000
    # Back (empty: no persistence). The worker tries Redis again a few seconds after the
    # last failure, on the next batch: keep a trickle of new events going until it has.
    probes = iter(range(1000))

    def restored() -> bool:
        send(make_events(5, "rprobe", start=next(probes) * 5))
        cluster.caught_up()
        return metric_value(worker.metrics(), "footfall_dedup_redis_unavailable") == 0

    wait_for(restored, 40, interval=0.5, what="Redis dedup restored")
    send(events[2000:])
    cluster.caught_up()
    send(events[2000:])  # marked after Redis came back: dropped by Redis
    cluster.caught_up()

    assert metric_value(worker.metrics(), "footfall_duplicates_dropped_total", 'layer="redis"') >= 1000
    ids = insert_ids(cluster.read_back("rdown", stop=[worker]))
    assert len(ids) == len(set(ids)) == 3000
