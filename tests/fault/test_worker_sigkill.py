"""Scenario 3: SIGKILL the worker process mid-stream and start it again: every event the
gateway acknowledged is stored, and surfaces exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from tests.distributed import Cluster, import_with_retry, insert_ids, make_events, metric_value

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(240)]


def test_sigkill_worker_mid_stream_every_acknowledged_event_once(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    gateway = cluster.gateway()
    acked: list[str] = []
    sent = threading.Event()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            send_all()
        except BaseException as exc:
            errors.append(exc)

    def send_all() -> None:
        for b in range(60):
            events = make_events(250, "kill", start=b * 250)
            r = import_with_retry(gateway.base, events, deadline=time.monotonic() + 90)
            assert r.status_code == 200, r.text
            acked.extend(e["properties"]["$insert_id"] for e in events)
            time.sleep(0.03)
        sent.set()

    thread = threading.Thread(target=client)
    thread.start()
    try:
        # Kill while batches are being inserted, not before the first one.
        deadline = time.monotonic() + 60
        while metric_value(worker.metrics(), "footfall_worker_messages_total", 'outcome="inserted"') < 2000:
            assert time.monotonic() < deadline, "the worker never inserted anything"
            time.sleep(0.05)
        worker.kill()
        assert not sent.is_set(), "the stream ended before the kill: make it longer"
        time.sleep(1.0)  # the gateway keeps accepting while no worker runs
        restarted = cluster.worker(consumers=2)
    finally:
        thread.join()

    assert not errors, f"the client gave up: {errors[0]!r}"
    cluster.caught_up(timeout=90)
    ids = insert_ids(cluster.read_back("kill", stop=[restarted]))
    assert len(acked) == 15000
    assert len(ids) == len(set(ids)), "an event surfaced twice"
    assert set(ids) == set(acked), f"missing: {len(set(acked) - set(ids))}"
