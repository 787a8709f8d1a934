"""Saved funnels and saved reports ("bookmarks"): their definitions and their store.

Used by the management interface (`footfall.services.app.saved`), the CLI and the query
service (`/funnels`, `/funnels/list`, `/insights`). Definitions are validated here for
structure; the expression texts they carry (`selector`, `where`, `on`) are checked by a
callable the caller passes in (the management interface passes `footfall.shared.expr`'s
parse and check).

Saved funnel (stored JSON `definition`; `name` is a column)::

    {"steps": [{"event": "Sign Up"},
               {"event": "Purchase", "selector": "number(properties[\\"price\\"]) > 10"},
               {"custom_event": {"id": 101, "name": "Any view", "events": ["View Item", "page view"]}}],
     "length": 7, "length_unit": "day"}

* 1..`MAX_STEPS` steps. A step is an event name with an optional `selector` (an
  expression every matching event must satisfy), or a custom event: the OR of 1..50
  event names, with an integer `id` and a display `name`. A custom step's `event` is
  `$custom_event:<id>` (it is set when missing).
* `length` x `length_unit` (`day`, `hour`, `minute`, `second`) is the default conversion
  window, at most 90 days; the default is 7 days (the interface's UI default).

Saved report (bookmark; stored JSON `params`)::

    {"type": "insights", "events": ["Logged in", "Viewed page"], "unit": "day",
     "type_of_count": "general", "where": "...", "on": "...", "limit": 60,
     "from_date": "2024-03-01", "to_date": "2024-03-31"}      # or "last_days": 30

* `type` is `insights` (the only kind of saved report so far): counts of each of 1..20
  `events` per `unit` bucket (`hour`, `day`, `week`, `month`; default `day`), counted by
  `type_of_count` (`general`, `unique`, `average`; default `general`), optionally filtered
  by `where` and segmented by `on` (top `limit`, default 60).
* Dates: absolute `from_date`/`to_date` (inclusive local days), or relative
  `last_days`: N (1..3650): the N local days ending today in the project's time zone.

Store: two ReplacingMergeTree tables (`m0004_saved`), one row per change, versioned by
`updated_at` (microseconds); a delete is a row with `deleted = 1`. Ids count per project:
max + 1 over the project's items (deleted ones included, so an id is never reused), under
a process lock (metadata writes come from one management process or the CLI). Every read,
the id allocation included, goes through the SQL layer's project-scoped source.
`MemorySavedStore` is the in-memory twin.
"""

from footfall.shared.saved.definitions import (
    BOOKMARK_UNITS,
    COUNT_TYPES,
    LENGTH_UNITS,
    MAX_STEPS,
    MAX_WINDOW_SECONDS,
    Bookmark,
    CustomEvent,
    DefinitionError,
    ExprCheck,
    FunnelDefinition,
    FunnelStep,
    InsightsParams,
    SavedFunnel,
    parse_bookmark,
    parse_funnel,
    parse_funnel_definition,
    parse_insights_params,
)
from footfall.shared.saved.store import MemorySavedStore, SavedStore, WarehouseSavedStore

__all__ = [
    "BOOKMARK_UNITS",
    "COUNT_TYPES",
    "LENGTH_UNITS",
    "MAX_STEPS",
    "MAX_WINDOW_SECONDS",
    "Bookmark",
    "CustomEvent",
    "DefinitionError",
    "ExprCheck",
    "FunnelDefinition",
    "FunnelStep",
    "InsightsParams",
    "MemorySavedStore",
    "SavedFunnel",
    "SavedStore",
    "WarehouseSavedStore",
    "parse_bookmark",
    "parse_funnel",
    "parse_funnel_definition",
    "parse_insights_params",
]
