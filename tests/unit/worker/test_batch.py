"""BatchBuffer: size and time thresholds, and the offsets a batch commits."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from aiokafka import TopicPartition

from footfall.services.worker.batch import BatchBuffer


@dataclass
class Rec:
    topic: str
    partition: int
    offset: int
    key: bytes | None = None
    value: bytes | None = None


T0 = TopicPartition("t", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ready_when_full() -> None:
    buf = BatchBuffer(3, 10.0, Clock())
    buf.add(T0, [Rec("t", 0, 0), Rec("t", 0, 1)])
    assert not buf.ready() and buf.room == 1
    buf.add(TopicPartition("t", 1), [Rec("t", 1, 7)])
    assert buf.ready() and buf.room == 0


def test_ready_when_old_enough_counting_from_the_first_record() -> None:
    clock = Clock()
    buf = BatchBuffer(100, 0.5, clock)
    assert not buf.ready() and buf.wait_seconds() == 0.5
    buf.add(T0, [])  # an empty fetch opens no batch
    assert buf.wait_seconds() == 0.5
    buf.add(T0, [Rec("t", 0, 0)])
    clock.now += 0.3
    buf.add(T0, [Rec("t", 0, 1)])
    assert not buf.ready() and buf.wait_seconds() == pytest.approx(0.2)
    clock.now += 0.2
    assert buf.ready() and buf.wait_seconds() == 0.0


def test_take_returns_records_and_next_offsets_per_partition() -> None:
    buf = BatchBuffer(10, 1.0, Clock())
    buf.add(T0, [Rec("t", 0, 5), Rec("t", 0, 6)])
    buf.add(TopicPartition("t", 2), [Rec("t", 2, 40)])
    buf.add(TopicPartition("u", 0), [Rec("u", 0, 1)])
    buf.add(T0, [Rec("t", 0, 7), Rec("t", 0, 8)])  # the partition's next fetch
    pending = buf.take()
    assert [(r.topic, r.partition, r.offset) for r in pending.records] == [
        ("t", 0, 5),
        ("t", 0, 6),
        ("t", 2, 40),
        ("u", 0, 1),
        ("t", 0, 7),
        ("t", 0, 8),
    ]
    assert pending.offsets == {T0: 9, TopicPartition("t", 2): 41, TopicPartition("u", 0): 2}
    assert len(buf) == 0 and not buf.ready()


@pytest.mark.parametrize(("size", "seconds"), [(0, 1.0), (1, 0.0)], ids=["no-size", "no-time"])
def test_thresholds_must_be_positive(size: int, seconds: float) -> None:
    with pytest.raises(ValueError):
        BatchBuffer(size, seconds)
