"""`build(req) -> Query`: one exact query for a `/funnels` request.

The rules (semantics §2.1, decisions.md), per date bucket B and user U (non-empty
`distinct_id`), over U's deduplicated events that pass `where`:

1. entry: U's first event matching step 0 whose time lies in B (B clipped to
   [from_date, to_date] in the project's zone; ties in time broken by event name, then
   `$insert_id`);
2. for each next step k: the earliest not-yet-used event matching step k whose time is at
   least t(k-1) - 2 s (the grace that makes near-simultaneous steps interchangeable) and at
   most t(0) + window (inclusive). Events after `to_date` are examined. No such event: U
   stops at step k-1. A later step-0 event does not restart the clock.

ClickHouse's `windowFunnel` cannot express this (it restarts from any step-0 event and has
no grace), so the query does it directly, in one pass over the events table grouped by
user, with two variants:

* `disjoint.build_disjoint` when no event name belongs to two steps (the usual funnel):
  then an event can only ever serve one step, "not yet used" is automatic, and each step
  is a lower-bound search of the attempt's previous time in the user's sorted step-k
  times, one attempt per row;
* `general.build_general` otherwise (e.g. `View Item` -> `View Item`): the user's events as
  sorted arrays and, per entry, an `arrayFold` over the steps that picks the first unused
  event with `arrayFirstIndex`, ending in a per-user column `out` of one tuple per
  (attempt, step reached).

Both count, per bucket and step, the attempts that reached the step and their summed ms
since the previous step and since step 0, into rows of `COLUMNS`. With `on`, every attempt
counts in `$overall` (the NULL segment) and in each of its entry event's keys; the top
`limit` keys by number of entries over the whole range are kept by a window function, so
the result stays small.

Duplicates: without `where`, selectors and `on` a funnel reads only event names and times,
which duplicates share, so it reads the table without FINAL. `on` without `where` and
selectors keeps the latest copy of an entry event (its keys are what the latest copy
says). With `where` or a selector, the table is read with FINAL, so a conflicting
duplicate's latest properties decide.
"""

from __future__ import annotations

from footfall.services.query.reports.funnels._common import COLUMNS, GRACE_MS, Query
from footfall.services.query.reports.funnels.disjoint import build_disjoint
from footfall.services.query.reports.funnels.general import build_general
from footfall.services.query.reports.funnels.request import FunnelsRequest

__all__ = ["COLUMNS", "GRACE_MS", "Query", "build", "is_disjoint"]


def is_disjoint(req: FunnelsRequest) -> bool:
    """No event name belongs to two steps, so no event can serve two steps."""
    seen: set[str] = set()
    for step in req.funnel.steps:
        if seen & set(step.names):
            return False
        seen |= set(step.names)
    return True


def build(req: FunnelsRequest) -> Query:
    return build_disjoint(req) if is_disjoint(req) else build_general(req)
