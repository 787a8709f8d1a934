"""The store of cohorts: the warehouse table `cohorts` (m0007) and an in-memory twin.

One versioned row per change (ReplacingMergeTree by `updated_at`, microseconds, strictly
increasing per cohort), read with FINAL; a delete is a row with `deleted` = 1, so an id is never
reused. `definition` holds the canonical JSON object (`CohortDefinition.canonical()`). Every read
of `cohorts` goes through the SQL layer's project-scoped source: a store call sees one project.

Ids are unique across the deployment (§13.1) without reading any project's cohorts: they come
from the non-tenant counter table `id_counters` (row `cohort`: the highest id handed out; the
table keeps the highest value per name). Allocation reads the counter and writes the next value
under a process-wide lock, so one process never hands out an id twice. Caveat: two processes that
allocate at the same instant (two `footfall query` processes both serving cohort writes against
one ClickHouse server) can read the same value and hand out the same id; in one project that
would make the later cohort replace the earlier one. Run cohort writes through one management
process (the embedded `footfall serve` is one process; the `footfall cohorts` CLI goes through
the server's HTTP API) until the counter moves to a store with an atomic increment.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson

from footfall.shared.cohorts.definitions import CohortDefinition
from footfall.shared.schema.catalog import COHORTS, ID_COUNTERS
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse.client import Warehouse

__all__ = ["COUNTER", "Cohort", "CohortStore", "MemoryCohortStore", "WarehouseCohortStore", "created_text"]

COUNTER = "cohort"  # the `id_counters` row of cohort ids


def created_text(moment: datetime) -> str:
    """`created` (§13.1): `YYYY-MM-DD HH:MM:SS` in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Cohort:
    """A stored cohort: its id, project, validated definition and timestamps (UTC)."""

    id: int
    project_id: int
    definition: CohortDefinition
    created_at: datetime
    updated_at: datetime

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def created(self) -> str:
        return created_text(self.created_at)

    def canonical(self) -> dict[str, Any]:
        """The stored JSON object (what membership code consumes)."""
        return self.definition.canonical()


Cohorts = builtins.list[Cohort]


class CohortStore(Protocol):
    """Cohorts per project. Every method sees one project; ids are unique across projects."""

    def list(self, project_id: int, ids: Collection[int] | None = None) -> Cohorts:
        """The project's live cohorts (only `ids` when given), ordered by id."""
        ...

    def get(self, project_id: int, cohort_id: int) -> Cohort | None: ...

    def create(self, project_id: int, definition: CohortDefinition) -> Cohort: ...

    def update(self, project_id: int, cohort_id: int, definition: CohortDefinition) -> Cohort | None: ...

    def delete(self, project_id: int, cohort_id: int) -> bool: ...

    def referrers(self, project_id: int, cohort_id: int) -> Cohorts:
        """The project's cohorts whose selector references `cohort_id`, ordered by id."""
        ...


def _now() -> datetime:
    return datetime.now(UTC)


def _later(previous: datetime) -> datetime:
    """A version strictly after `previous` (ReplacingMergeTree keeps the highest `updated_at`)."""
    return max(_now(), previous + timedelta(microseconds=1))


class _Rows(Protocol):
    def rows(self, project_id: int, ids: Collection[int] | None) -> Cohorts: ...

    def write(self, cohort: Cohort, *, deleted: bool = False) -> None: ...

    def next_id(self) -> int: ...


class _Typed:
    """The typed operations on top of a row store (shared by the warehouse store and its twin)."""

    def __init__(self, rows: _Rows) -> None:
        self._rows = rows
        self._lock = threading.Lock()

    def list(self, project_id: int, ids: Collection[int] | None = None) -> Cohorts:
        if ids is not None and not ids:
            return []
        return self._rows.rows(project_id, ids)

    def get(self, project_id: int, cohort_id: int) -> Cohort | None:
        found = self._rows.rows(project_id, (cohort_id,))
        return found[0] if found else None

    def create(self, project_id: int, definition: CohortDefinition) -> Cohort:
        cohort_id = self._rows.next_id()
        now = _now()
        cohort = Cohort(cohort_id, project_id, definition, now, now)
        self._rows.write(cohort)
        return cohort

    def update(self, project_id: int, cohort_id: int, definition: CohortDefinition) -> Cohort | None:
        with self._lock:
            found = self.get(project_id, cohort_id)
            if found is None:
                return None
            cohort = replace(found, definition=definition, updated_at=_later(found.updated_at))
            self._rows.write(cohort)
            return cohort

    def delete(self, project_id: int, cohort_id: int) -> bool:
        with self._lock:
            found = self.get(project_id, cohort_id)
            if found is None:
                return False
            self._rows.write(replace(found, updated_at=_later(found.updated_at)), deleted=True)
            return True

    def referrers(self, project_id: int, cohort_id: int) -> Cohorts:
        return [c for c in self.list(project_id) if cohort_id in c.definition.references()]


# ------------------------------------------------------------------------------------------ warehouse
def _select(project_id: int, ids: Collection[int] | None) -> tuple[str, dict[str, Any]]:
    """The live cohorts of one project (or some of them), through the SQL layer's scoped source."""
    binds = Params()
    keys = sql("cohort_id IN {}", binds.add(sorted(ids), "Array(UInt64)")) if ids is not None else None
    rows = source(COHORTS, Scope(project_id), binds, final=True, keys=keys, where=sql("deleted = 0"))
    text = sql("SELECT cohort_id, project_id, definition, created_at, updated_at FROM {} ORDER BY cohort_id", rows)
    return render(text), binds.values


def _counter(name: str) -> tuple[str, dict[str, Any]]:
    """The highest value of one id counter (the table is not a tenant table: no project is read)."""
    binds = Params()
    return render(sql("SELECT max(value) FROM id_counters WHERE name = {}", binds.add(name, "String"))), binds.values


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


# Every allocation in this process, whichever store instance makes it.
_COUNTER_LOCK = threading.Lock()


class _WarehouseRows:
    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def rows(self, project_id: int, ids: Collection[int] | None) -> Cohorts:
        found = self.warehouse.query(*_select(project_id, ids))
        return [
            Cohort(int(r[0]), int(r[1]), CohortDefinition.from_canonical(orjson.loads(r[2])), _utc(r[3]), _utc(r[4]))
            for r in found
        ]

    def write(self, cohort: Cohort, *, deleted: bool = False) -> None:
        d = cohort.definition
        self.warehouse.insert(
            COHORTS.name,
            COHORTS.column_names,
            [
                [
                    cohort.project_id,
                    cohort.id,
                    d.name,
                    d.description,
                    d.is_visible,
                    1 if d.is_static else 0,
                    orjson.dumps(d.canonical()).decode(),
                    cohort.created_at,
                    cohort.updated_at,
                    1 if deleted else 0,
                ]
            ],
        )

    def next_id(self) -> int:
        with _COUNTER_LOCK:
            value = int(self.warehouse.query(*_counter(COUNTER))[0][0] or 0) + 1
            self.warehouse.insert(ID_COUNTERS.name, ID_COUNTERS.column_names, [[COUNTER, value]])
            return value


class WarehouseCohortStore(_Typed):
    """Cohorts in the warehouse table `cohorts`, ids from `id_counters`."""

    def __init__(self, warehouse: Warehouse) -> None:
        super().__init__(_WarehouseRows(warehouse))


# ------------------------------------------------------------------------------------------- memory
@dataclass
class _MemoryRows:
    data: dict[tuple[int, int], tuple[Cohort, bool]] = field(default_factory=dict)
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def rows(self, project_id: int, ids: Collection[int] | None) -> Cohorts:
        wanted = None if ids is None else set(ids)
        return [
            cohort
            for (p, i), (cohort, deleted) in sorted(self.data.items(), key=lambda item: item[0])
            if p == project_id and not deleted and (wanted is None or i in wanted)
        ]

    def write(self, cohort: Cohort, *, deleted: bool = False) -> None:
        self.data[(cohort.project_id, cohort.id)] = (cohort, deleted)

    def next_id(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter


class MemoryCohortStore(_Typed):
    """The in-memory twin of `WarehouseCohortStore` (unit tests); ids count across its projects."""

    def __init__(self) -> None:
        super().__init__(_MemoryRows())
