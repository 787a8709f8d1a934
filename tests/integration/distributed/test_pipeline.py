"""Scenarios 1 and 2 of the distributed path, plus the credential channel and the dead-letter
topic: `footfall gateway` and `footfall worker` as processes, real Kafka and Redis, chDB
owned by the worker process and read back through its export endpoint."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from footfall.services.app.bootstrap import BOOTSTRAP_FILE
from tests.distributed import (
    IMPORT_AUTH,
    Cluster,
    Proc,
    export_events,
    insert_ids,
    make_events,
    metric_value,
    post_import,
    run_driver,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(180)]


def wait_all_assigned(worker: Proc, topic: str, partitions: int = 12) -> None:
    def assigned() -> bool:
        body = httpx.get(worker.base + "/healthz", timeout=2).json()
        got = [p for c in body["consumers"] for p in c["partitions"].get(topic, [])]
        return sorted(got) == list(range(partitions))

    wait_for(assigned, 30, what="all partitions assigned")


def test_gateway_process_to_chdb_through_kafka_read_back_by_export(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    gateway = cluster.gateway()
    events = make_events(3000, "s1")
    invalid = {"event": "Broken", "properties": {"time": int(time.time()), "$insert_id": "s1-broken"}}

    r1 = post_import(gateway.base, events[:1500])
    r2 = post_import(gateway.base, events[1500:2999])
    r3 = post_import(gateway.base, [events[2999], invalid])
    assert (r1.status_code, r1.json()["num_records_imported"]) == (200, 1500)
    assert (r2.status_code, r2.json()["num_records_imported"]) == (200, 1499)
    assert r3.status_code == 400 and r3.json()["num_records_imported"] == 1
    assert [f["index"] for f in r3.json()["failed_records"]] == [1]

    cluster.caught_up()
    gm = gateway.metrics()
    assert metric_value(gm, "footfall_kafka_events_published_total") == 3000
    # The Rust fast path wrote the records of the two plain requests; the one with a failing event
    # went the Python way.
    assert metric_value(gm, "footfall_import_fast_path_total", 'outcome="taken"') == 2
    assert metric_value(gm, "footfall_import_fast_path_total", 'outcome="declined"') == 1
    wm = worker.metrics()
    assert metric_value(wm, "footfall_worker_messages_total", 'outcome="inserted"') == 3000
    # Every event carries an address the worker's GeoIP database locates: the Python path's.
    assert metric_value(wm, "footfall_worker_fast_path_batches_total", 'outcome="taken"') == 0
    assert metric_value(wm, "footfall_warehouse_insert_seconds_count") >= 1
    assert metric_value(wm, "footfall_worker_batch_messages_count") >= 1
    # The lag gauge is set right after each commit; the commit can become visible to
    # `caught_up` a moment before the worker's own bookkeeping runs.
    deadline = time.monotonic() + 5
    while "footfall_consumer_lag{" not in wm and time.monotonic() < deadline:
        time.sleep(0.1)
        wm = worker.metrics()
    assert "footfall_consumer_lag{" in wm
    assert metric_value(wm, "footfall_dedup_redis_unavailable") == 0

    rows = cluster.read_back("s1", stop=[worker])
    assert sorted(insert_ids(rows)) == sorted(e["properties"]["$insert_id"] for e in events)
    # GeoIP on the worker, with the embedded path's code: ip → place, ip dropped.
    props = rows[0]["properties"]
    assert (props["$city"], props["$region"], props["mp_country_code"]) == ("London", "England", "GB")
    assert "ip" not in props


def test_retried_batches_and_respread_events_surface_once(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    wait_all_assigned(worker, cluster.raw_topic)
    gateway = cluster.gateway()
    events = make_events(1200, "s2", ip=None)  # nothing to locate: the worker's fast path takes them
    requests = [events[:600]] * 3  # the same batch retried three times
    requests += [events[600:800], events[800:1000], events[1000:]]
    requests += [events[300:900], events[::2], events[1::3][::-1]]  # the same events, regrouped
    sent = 0
    for body in requests:
        r = post_import(gateway.base, body)
        assert r.status_code == 200, r.text
        sent += len(body)

    cluster.caught_up()
    wm = worker.metrics()
    # With Redis up every repeat was dropped before the insert (in the batch or by Redis).
    assert metric_value(wm, "footfall_worker_messages_total", 'outcome="inserted"') == 1200
    assert metric_value(wm, "footfall_duplicates_dropped_total") == sent - 1200
    assert metric_value(wm, "footfall_duplicates_dropped_total", 'layer="redis"') > 0
    assert metric_value(wm, "footfall_worker_fast_path_batches_total", 'outcome="taken"') >= 1
    assert metric_value(wm, "footfall_worker_fast_path_batches_total", 'outcome="declined"') == 0
    assert metric_value(gateway.metrics(), "footfall_import_fast_path_total", 'outcome="taken"') == len(requests)

    rows = cluster.read_back("s2", stop=[worker])
    ids = insert_ids(rows)
    assert len(ids) == len(set(ids)) == 1200
    sent_props = {e["properties"]["$insert_id"]: e["properties"] for e in events}
    for row in rows:  # every property as sent (time, distinct_id and $insert_id as /export gives them back)
        sent = sent_props[row["properties"]["$insert_id"]]
        assert {k: row["properties"].get(k) for k in sent} == sent


def test_changed_copy_under_the_same_dedup_key_is_not_dropped_by_redis(cluster: Cluster) -> None:
    """Redis drops plain retries only; a changed copy goes to the table, where the latest wins."""
    worker = cluster.worker(consumers=1)
    gateway = cluster.gateway()
    first = make_events(1, "s2b", ip=None)
    changed = [{"event": first[0]["event"], "properties": {**first[0]["properties"], "plan": "changed"}}]
    assert post_import(gateway.base, first).status_code == 200
    cluster.caught_up()
    assert post_import(gateway.base, first).status_code == 200  # plain retry
    assert post_import(gateway.base, changed).status_code == 200
    cluster.caught_up()
    wm = worker.metrics()
    assert metric_value(wm, "footfall_duplicates_dropped_total", 'layer="redis"') == 1
    assert metric_value(wm, "footfall_worker_messages_total", 'outcome="inserted"') == 2
    rows = cluster.read_back("s2b", stop=[worker])
    assert [r["properties"]["plan"] for r in rows] == ["changed"]


def test_undecodable_records_go_to_the_dead_letter_topic_and_do_not_block(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=1)
    good = make_events(3, "dlq")
    gateway = cluster.gateway()

    async def produce_garbage() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka, acks="all")
        await producer.start()
        try:
            key = b"1:dlq-user-0"  # the partition of a good event that follows
            await producer.send_and_wait(cluster.raw_topic, b"not json at all", key=key)
            await producer.send_and_wait(cluster.raw_topic, orjson.dumps({"v": 1, "p": "one"}), key=key)
            await producer.send_and_wait(cluster.raw_topic, orjson.dumps({"v": 99}), key=key)
        finally:
            await producer.stop()

    asyncio.run(produce_garbage())
    assert post_import(gateway.base, good).status_code == 200
    cluster.caught_up()
    assert metric_value(worker.metrics(), "footfall_dead_lettered_total") == 3
    assert sorted(insert_ids(cluster.read_back("dlq", stop=[worker]))) == sorted(
        e["properties"]["$insert_id"] for e in good
    )

    async def read_dlq() -> list[dict[str, str]]:
        consumer = AIOKafkaConsumer(cluster.dlq_topic, bootstrap_servers=cluster.kafka, auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = await consumer.getmany(timeout_ms=5000)
            records = [r for batch in got.values() for r in batch]
            return [{k: v.decode() for k, v in r.headers} | {"value": r.value.decode()} for r in records]
        finally:
            await consumer.stop()

    letters = asyncio.run(read_dlq())
    assert sorted(letter["reason"] for letter in letters) == ["field", "json", "version"]
    assert {letter["source_topic"] for letter in letters} == {cluster.raw_topic}
    assert "not json at all" in [letter["value"] for letter in letters]


def test_a_credential_change_reaches_a_running_gateway(cluster: Cluster) -> None:
    gateway = cluster.gateway()
    assert post_import(gateway.base, make_events(2, "cred")).status_code == 200
    rotated = "rotated-token-0123456789abcdef01"
    assert post_import_as(gateway, rotated).status_code == 401

    # The metadata owner changes the credentials (no worker runs, so another process may
    # open the chDB folder) and publishes them with the CLI; the running gateway follows.
    run_driver("rotate-token", "--data", str(cluster.data_dir), "--add", rotated, "--revoke", IMPORT_AUTH[0])
    cluster.publish_directory()

    wait_for(lambda: post_import_as(gateway, rotated).status_code == 200, 15, what="rotated token accepted")
    assert post_import(gateway.base, make_events(1, "cred2")).status_code == 401
    # A gateway started now reads the newest snapshot first.
    fresh = cluster.gateway()
    assert post_import_as(fresh, rotated).status_code == 200
    assert post_import(fresh.base, make_events(1, "cred3")).status_code == 401


def post_import_as(gateway: Proc, token: str) -> httpx.Response:
    return httpx.post(
        gateway.base + "/import",
        params={"strict": "1"},
        content=orjson.dumps(make_events(1, "as")),
        headers={"content-type": "application/json"},
        auth=(token, ""),
        timeout=30,
    )


def test_serve_with_kafka_runs_the_distributed_path_and_owns_the_directory(
    tmp_path, kafka_bootstrap: str, redis_url: str, geoip_db
) -> None:  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path, kafka_bootstrap, redis_url, geoip_db)  # nothing published beforehand
    try:
        serve = c.serve()
        assert (c.data_dir / BOOTSTRAP_FILE).exists()
        # serve publishes the credentials it bootstrapped: a separate gateway can import.
        gateway = c.gateway()
        events = make_events(500, "serve")
        assert post_import(serve.base, events[:250]).status_code == 200
        assert post_import(gateway.base, events[250:]).status_code == 200
        c.caught_up()
        rows = export_events(serve.base, tag="serve")
        assert sorted(insert_ids(rows)) == sorted(e["properties"]["$insert_id"] for e in events)
        assert metric_value(serve.metrics(), "footfall_kafka_events_published_total") == 250
    finally:
        c.stop_all()
