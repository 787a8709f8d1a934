"""Cohorts (semantics-2.md §13): definitions, their validation and their store.

* `definitions` — `parse_cohort`, `apply_patch`, `parse_raw_definition`, `check_delete` and the
  canonical stored form `CohortDefinition.canonical()` (the JSON object membership code reads):

      {"name", "description", "is_visible": 0|1, "is_static": true, "distinct_ids": [sorted ids]}
      {"name", "description", "is_visible": 0|1, "is_static": false,
       "selector": <tree | profile expression text>,
       "behaviors": {"<key>": {"count": {"event_selector": {"event", "selector"}, "type"},
                               "window": {"unit", "value"}}}}     (or "from_date"/"to_date";
                                                                  several selectors: "event_selectors")

* `store` — `CohortStore` (list, get, create, update, delete, referrers), `WarehouseCohortStore`
  (table `cohorts`, m0007; ids unique across the deployment from `id_counters`) and
  `MemoryCohortStore`, its in-memory twin.

Used by the management interface (`footfall.services.app.cohorts`) and by the query service
(membership, `/cohorts/list`, `/engage filter_by_cohort`). Imports only `footfall.shared`.
"""

from footfall.shared.cohorts.definitions import (
    MAX_BEHAVIORS,
    MAX_DEPTH,
    MAX_NODES,
    Behavior,
    CohortDefinition,
    CohortDefinitionError,
    EventSelector,
    apply_patch,
    check_delete,
    parse_cohort,
    parse_raw_definition,
    referrers_of,
)
from footfall.shared.cohorts.store import (
    Cohort,
    CohortStore,
    MemoryCohortStore,
    WarehouseCohortStore,
    created_text,
)

__all__ = [
    "MAX_BEHAVIORS",
    "MAX_DEPTH",
    "MAX_NODES",
    "Behavior",
    "Cohort",
    "CohortDefinition",
    "CohortDefinitionError",
    "CohortStore",
    "EventSelector",
    "MemoryCohortStore",
    "WarehouseCohortStore",
    "apply_patch",
    "check_delete",
    "created_text",
    "parse_cohort",
    "parse_raw_definition",
    "referrers_of",
]
