"""Scenario 6: three consumers in one process share the partitions; stopping one moves its
partitions to the other two with no loss and no duplicate surfacing (chDB store, real
Kafka and Redis; run in its own process, which owns its chDB folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed import run_driver

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.timeout(180)]


def test_three_consumers_share_partitions_and_survive_one_leaving(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str
) -> None:
    result = run_driver("rebalance", "--kafka", kafka_bootstrap, "--redis", redis_url, "--data", str(tmp_path))

    before, after = result["before"], result["after"]
    assert all(before), f"every consumer had partitions: {before}"
    assert sorted(p for ps in before for p in ps) == list(range(12))
    assert after[1] == [], "the stopped consumer holds nothing"
    assert sorted(after[0] + after[2]) == list(range(12))
    assert 0 < result["stopped_after"] < result["sent"]
    # Every event stored; the one copy surfaces (FINAL), and nothing was inserted twice.
    assert result["unique"] == result["final"] == result["sent"]
    assert result["rows"] == result["sent"]
