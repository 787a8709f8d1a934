"""Scenario 4: stop Kafka while clients import. The gateway answers 503 with Retry-After
(never 200 for events Kafka did not acknowledge, never 401: it keeps the credentials it
last knew); after Kafka is back and the clients retried, every event acknowledged with
200 is stored exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from tests.distributed import Cluster, import_with_retry, insert_ids, make_events
from tests.services import kafka_down

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]

CLIENTS = 3
BATCHES = 40
PER_BATCH = 200


def test_kafka_outage_answers_503_then_every_acknowledged_event_once(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    gateway = cluster.gateway()
    acked: list[str] = []
    statuses: list[int] = []
    stats: dict[str, int] = {}
    progress = [0] * CLIENTS
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            send_all(k)
        except BaseException as exc:
            errors.append(exc)

    def send_all(k: int) -> None:
        for b in range(BATCHES):
            events = make_events(PER_BATCH, "kdown", start=(k * BATCHES + b) * PER_BATCH)
            r = import_with_retry(gateway.base, events, deadline=time.monotonic() + 180, stats=stats)
            statuses.append(r.status_code)
            if r.status_code in (200, 400):
                acked.extend(e["properties"]["$insert_id"] for e in events)
            progress[k] = b + 1
            time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        while min(progress) < 5 and not errors:
            time.sleep(0.05)
        with kafka_down():
            # While the broker is gone the clients only get 503s: nothing is acknowledged.
            stalled = sum(progress)
            time.sleep(8)
            assert sum(progress) - stalled <= CLIENTS, "requests were acknowledged while Kafka was down"
    finally:
        for t in threads:
            t.join()

    assert not errors, f"a client gave up: {errors[0]!r}"
    assert stats.get("503", 0) > 0, "the gateway never answered 503 during the outage"
    assert set(statuses) == {200}, f"statuses other than 200 after retries: {set(statuses)}"
    cluster.caught_up(timeout=120)
    ids = insert_ids(cluster.read_back("kdown", stop=[worker]))
    assert len(acked) == CLIENTS * BATCHES * PER_BATCH
    assert len(ids) == len(set(ids)), "an event surfaced twice"
    assert set(ids) == set(acked), f"missing: {len(set(acked) - set(ids))}"
