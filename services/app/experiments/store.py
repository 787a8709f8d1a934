"""The store of experiments: the warehouse table `experiments` (m0010) and an in-memory twin.

One versioned row per change (ReplacingMergeTree by `updated_at`, microseconds, strictly
increasing per experiment: the caller makes each version with `later(previous)`), read with
FINAL through the SQL layer's project-scoped source; a soft-deleted experiment is a row with
`deleted` = 1 and is never returned again. `record` is `Experiment.to_json()`.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

import orjson

from footfall.services.app.experiments.model import Experiment
from footfall.shared.schema.catalog import EXPERIMENTS
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse.client import Warehouse

__all__ = ["ExperimentStore", "MemoryExperimentStore", "WarehouseExperimentStore", "later", "now"]


def now() -> datetime:
    return datetime.now(UTC)


def later(previous: datetime) -> datetime:
    """A version strictly after `previous` (ReplacingMergeTree keeps the highest `updated_at`)."""
    return max(now(), previous + timedelta(microseconds=1))


class ExperimentStore(Protocol):
    """Experiments per project; every method sees one project."""

    def list(self, project_id: int) -> list[Experiment]:
        """The project's experiments that are not deleted, oldest first."""
        ...

    def get(self, project_id: int, experiment_id: str) -> Experiment | None: ...

    def put(self, experiment: Experiment) -> None:
        """Store a new version (a set `deleted_at` deletes it)."""
        ...


def _select(project_id: int, experiment_id: str | None) -> tuple[str, dict[str, object]]:
    binds = Params()
    keys = sql("experiment_id = {}", binds.add(experiment_id, "String")) if experiment_id is not None else None
    rows = source(EXPERIMENTS, Scope(project_id), binds, final=True, keys=keys, where=sql("deleted = 0"))
    return render(sql("SELECT record FROM {} ORDER BY created_at, experiment_id", rows)), binds.values


class WarehouseExperimentStore:
    """Experiments in the warehouse table `experiments`."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def _read(self, project_id: int, experiment_id: str | None) -> list[Experiment]:
        return [
            Experiment.from_json(orjson.loads(r[0])) for r in self.warehouse.query(*_select(project_id, experiment_id))
        ]

    def list(self, project_id: int) -> list[Experiment]:
        return self._read(project_id, None)

    def get(self, project_id: int, experiment_id: str) -> Experiment | None:
        found = self._read(project_id, experiment_id)
        return found[0] if found else None

    def put(self, experiment: Experiment) -> None:
        e = experiment
        row = [
            e.project_id,
            e.id,
            e.name,
            e.status,
            1 if e.archived else 0,
            orjson.dumps(e.to_json()).decode(),
            e.created_at,
            e.updated_at,
            0 if e.deleted_at is None else 1,
        ]
        self.warehouse.insert(EXPERIMENTS.name, EXPERIMENTS.column_names, [row])


class MemoryExperimentStore:
    """The in-memory twin of `WarehouseExperimentStore` (unit tests)."""

    def __init__(self) -> None:
        self._data: dict[tuple[int, str], Experiment] = {}
        self._lock = threading.Lock()

    def list(self, project_id: int) -> list[Experiment]:
        with self._lock:
            found = [e for (p, _), e in self._data.items() if p == project_id and e.deleted_at is None]
        return sorted(found, key=lambda e: (e.created_at, e.id))

    def get(self, project_id: int, experiment_id: str) -> Experiment | None:
        with self._lock:
            found = self._data.get((project_id, experiment_id))
        return found if found is not None and found.deleted_at is None else None

    def put(self, experiment: Experiment) -> None:
        with self._lock:
            self._data[(experiment.project_id, experiment.id)] = experiment
