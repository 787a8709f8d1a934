"""Collect consumed records into a batch until it is big enough or old enough.

Pure bookkeeping: no Kafka calls. `take()` hands over the records together with the
offsets to commit once they are safely stored (per partition: last offset + 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import TopicPartition


class Record(Protocol):
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any


@dataclass
class Pending:
    records: list[Any] = field(default_factory=list)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)


class BatchBuffer:
    def __init__(self, max_messages: int, max_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if max_messages < 1 or max_seconds <= 0:
            raise ValueError("batch thresholds must be positive")
        self.max_messages = max_messages
        self.max_seconds = max_seconds
        self.clock = clock
        self._pending = Pending()
        self._opened_at = 0.0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, tp: TopicPartition, records: Sequence[Record]) -> None:
        """One partition's records, in offset order (as a fetch returns them): the batch
        commits up to the last one. No per-record work here: a consumed batch is tens of
        thousands of records."""
        if not records:
            return
        pending = self._pending
        if not pending.records:
            self._opened_at = self.clock()
        pending.records.extend(records)
        following = records[-1].offset + 1
        if following > pending.offsets.get(tp, -1):
            pending.offsets[tp] = following

    @property
    def room(self) -> int:
        return max(self.max_messages - len(self._pending), 0)

    def ready(self) -> bool:
        """Full, or holding records for at least `max_seconds`."""
        if not self._pending.records:
            return False
        return len(self._pending) >= self.max_messages or self.clock() - self._opened_at >= self.max_seconds

    def wait_seconds(self) -> float:
        """How long a poll may block before the batch is due."""
        if not self._pending.records:
            return self.max_seconds
        return max(self.max_seconds - (self.clock() - self._opened_at), 0.0)

    def take(self) -> Pending:
        pending, self._pending = self._pending, Pending()
        return pending
