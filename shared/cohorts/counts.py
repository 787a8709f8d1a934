"""`CohortCounter`: the member count of a project's cohorts (semantics-2 §13.5), with a cache.

`count` = the members at request time, ids without a profile included (a static cohort: the
length of its list, no query). The dynamic cohorts asked for whose count is not cached are
counted together by one statement (`membership.counts_sql`, one scan).

Cache: a count is reused for at most `ttl` seconds (0 turns the cache off). Its key is the
cohort's version and the versions of every cohort it references, directly or not (`updated_at`
of each) and the project's time zone: editing or deleting the cohort or any cohort it reaches
gives a new key, so the old value is never read again, in this process or another one over the
same warehouse, with no invalidation to send. The cache holds at most `max_entries` counts
(least recently used dropped first).

`counts`/`counts_of` block (warehouse reads): call them off the event loop (`Warehouse.run`);
`count_of` is the async form the management interface takes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from footfall.shared.cohorts.membership import counts_sql
from footfall.shared.cohorts.store import Cohort, CohortStore
from footfall.shared.metadata import Project
from footfall.shared.sql import Params, render
from footfall.shared.warehouse.client import Warehouse

__all__ = ["DEFAULT_TTL", "CohortCounter"]

DEFAULT_TTL = 60.0  # seconds a count may be reused (§13.5: at most 60)
_Key = tuple[int, str, tuple[tuple[int, datetime], ...]]  # (cohort id, tz, versions of its closure)


def _closure(cohort_id: int, cohorts: Mapping[int, Cohort]) -> tuple[tuple[int, datetime], ...]:
    """(id, updated_at) of the cohort and of every cohort it reaches through references."""
    seen: dict[int, datetime] = {}
    stack = [cohort_id]
    while stack:
        cid = stack.pop()
        if cid in seen or cid not in cohorts:
            continue
        seen[cid] = cohorts[cid].updated_at
        stack.extend(cohorts[cid].definition.references())
    return tuple(sorted(seen.items()))


class CohortCounter:
    def __init__(
        self,
        warehouse: Warehouse,
        store: CohortStore,
        *,
        now: Callable[[], datetime],
        ttl: float = DEFAULT_TTL,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._warehouse = warehouse
        self.store = store
        self._now = now  # the reports' clock (membership windows end at it)
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._cache: OrderedDict[_Key, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    async def count_of(self, project: Project, cohorts: Sequence[Cohort]) -> dict[int, int]:
        """The management interface's `count_of`: the counts of `cohorts`, off the event loop."""
        ids = [c.id for c in cohorts]
        return await self._warehouse.run(self.counts, project.project_id, project.timezone, ids)

    def counts(self, project_id: int, tz: str, cohort_ids: Iterable[int] | None = None) -> dict[int, int]:
        """{cohort id: member count} for the project's cohorts (those of `cohort_ids` that exist)."""
        cohorts = {c.id: c for c in self.store.list(project_id)}
        return self.counts_of(project_id, tz, cohorts, cohort_ids)

    def counts_of(
        self, project_id: int, tz: str, cohorts: Mapping[int, Cohort], cohort_ids: Iterable[int] | None = None
    ) -> dict[int, int]:
        """As `counts`, over `cohorts` (every live cohort of the project, as the store lists them)."""
        wanted = sorted(cohorts) if cohort_ids is None else [cid for cid in cohort_ids if cid in cohorts]
        out: dict[int, int] = {}
        missing: dict[int, _Key] = {}
        for cid in wanted:
            definition = cohorts[cid].definition
            if definition.is_static:
                out[cid] = len(definition.distinct_ids or ())
                continue
            key = (cid, tz, _closure(cid, cohorts))
            cached = self._cached(key)
            if cached is None:
                missing[cid] = key
            else:
                out[cid] = cached
        if missing:
            computed = self._count(project_id, tz, list(missing), cohorts)
            for cid, value in computed.items():
                out[cid] = value
                self._store(missing[cid], value)
        return {cid: out[cid] for cid in wanted}

    def _count(self, project_id: int, tz: str, ids: Sequence[int], cohorts: Mapping[int, Cohort]) -> dict[int, int]:
        definitions: dict[int, Mapping[str, Any]] = {cid: c.canonical() for cid, c in cohorts.items()}
        binds = Params()
        statement = counts_sql(ids, definitions, project_id, tz, self._now(), binds)
        (row,) = self._warehouse.query(render(statement), binds.values)
        return {cid: int(value) for cid, value in zip(ids, row, strict=True)}

    def _cached(self, key: _Key) -> int | None:
        if self._ttl <= 0:
            return None
        with self._lock:
            hit = self._cache.get(key)
            if hit is None:
                return None
            value, stored = hit
            if self._clock() - stored > self._ttl:
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return value

    def _store(self, key: _Key, value: int) -> None:
        if self._ttl <= 0:
            return
        with self._lock:
            self._cache[key] = (value, self._clock())
            self._cache.move_to_end(key)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
