"""FOOTFALL_HOT_AUTO against a `footfall serve` subprocess: a property that reports keep
reading becomes hot in the background and the answers do not change, before and after a
restart (that a starting process reads such a column again is
tests/integration/query/test_hot_auto.py)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
import pytest

from tests.distributed import wait_for
from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
PLANS = ["pro", "free", "pro", None, "team", "pro"]


def _segmentation(server: ServeProcess) -> dict[str, object]:
    today = datetime.now(UTC).date()  # a day either side: whatever the project's time zone
    days = {"from_date": (today - timedelta(days=1)).isoformat(), "to_date": (today + timedelta(days=1)).isoformat()}
    params = {"project_id": "1", "event": "Paid", "on": 'properties["plan"]', "unit": "day", **days}
    r = httpx.get(server.base + "/api/2.0/segmentation", params=params, auth=SA, timeout=30)
    assert r.status_code == 200, r.text
    data: dict[str, object] = r.json()["data"]
    return data


def test_a_property_reports_keep_reading_becomes_hot(tmp_path: Path) -> None:
    env = {"FOOTFALL_HOT_AUTO": "1", "FOOTFALL_HOT_AUTO_READS": "2", "FOOTFALL_HOT_AUTO_SECONDS": "1"}
    server = ServeProcess(tmp_path / "data", env=env)
    server.start()
    try:
        now = int(time.time()) - 60
        events = [
            {
                "event": "Paid",
                "properties": {
                    "time": now,
                    "distinct_id": f"u{i}",
                    "$insert_id": uuid.uuid4().hex,
                    **({} if plan is None else {"plan": plan}),
                },
            }
            for i, plan in enumerate(PLANS)
        ]
        r = httpx.post(
            server.base + "/import?strict=1",
            content=orjson.dumps(events),
            auth=(TOKEN, ""),
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        answers = [_segmentation(server) for _ in range(3)]
        assert answers[0] == answers[1] == answers[2]
        values = answers[0]["values"]
        assert isinstance(values, dict) and sum(sum(v.values()) for v in values.values()) == 5

        # The threshold holds per period: keep reading (several reads in every one-second
        # period) until a round makes the property hot; the answer never changes meanwhile.
        def hot_by_now() -> bool:
            assert _segmentation(server) == answers[0]
            return '"hot_columns_auto"' in server.log()

        wait_for(hot_by_now, 60, what="the round that makes plan hot")
        assert '"properties": ["plan"]' in server.log()
        assert _segmentation(server) == answers[0]  # read from the column now

        server.restart()
        assert _segmentation(server) == answers[0]
    finally:
        server.stop()
