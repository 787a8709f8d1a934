"""The import rate limit is one budget for all gateways (issue 15): two `footfall gateway`
processes share the project's rolling one-minute window through Redis, so what one admitted
counts against the other; a refused request is a 429 with `Retry-After`. A gateway whose
Redis is unreachable keeps its own window instead of refusing every import."""

from __future__ import annotations

import httpx
import pytest
import redis

from tests.distributed import Cluster, free_port, make_events, post_import

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(180)]

RATE = {"FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND": "1"}  # 60 events per rolling minute


def refused(r: httpx.Response) -> int:
    assert r.status_code == 429, r.text
    body = r.json()
    assert (body["code"], body["status"]) == (429, "Too Many Requests")
    wait = int(r.headers["retry-after"])
    assert 1 <= wait <= 60
    return wait


def test_two_gateways_share_one_budget(cluster: Cluster) -> None:
    a = cluster.gateway(**RATE)
    b = cluster.gateway(**RATE)
    assert post_import(a.base, make_events(40, "rl")).status_code == 200
    refused(post_import(b.base, make_events(30, "rl", start=40)))  # 40 + 30 > 60, though b saw nothing
    assert post_import(b.base, make_events(20, "rl", start=40)).status_code == 200  # exactly 60
    refused(post_import(a.base, make_events(1, "rl", start=60)))
    refused(post_import(b.base, make_events(1, "rl", start=60)))
    keys = redis.Redis.from_url(str(cluster.redis)).keys(f"{cluster.prefix}footfall:rate:*")
    assert keys == [f"{cluster.prefix}footfall:rate:1".encode()]


def test_gateway_without_reachable_redis_keeps_its_own_window(cluster: Cluster) -> None:
    gw = cluster.gateway(FOOTFALL_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", **RATE)
    assert post_import(gw.base, make_events(50, "nr")).status_code == 200
    refused(post_import(gw.base, make_events(50, "nr", start=50)))
    assert post_import(gw.base, make_events(10, "nr", start=50)).status_code == 200
    assert "import_rate_limit_local" in gw.log()
