"""Experiments (semantics-2.md §16): definitions, the stored record, results from events, the API."""

from footfall.services.app.experiments.api import experiment_routes, warehouse_results
from footfall.services.app.experiments.store import (
    ExperimentStore,
    MemoryExperimentStore,
    WarehouseExperimentStore,
)

__all__ = [
    "ExperimentStore",
    "MemoryExperimentStore",
    "WarehouseExperimentStore",
    "experiment_routes",
    "warehouse_results",
]
