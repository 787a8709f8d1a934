"""What every query is built from: its `Scope` (project and UTC time range; the SQL layer's
`source` writes both into every scan, STYLE principle 6), the `Query` it ends as, the
event-name filter and the two scans of the events table: `final_events` (deduplicated)
and `raw_events`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.reports._common.timeline import Timeline
from footfall.shared.expr import compile_where
from footfall.shared.expr.typed import TNode
from footfall.shared.schema.catalog import EVENTS, NO_USER_KEY, USER_KEY
from footfall.shared.sql import Params as Binds
from footfall.shared.sql import Scope, Sql, render, source, sql

__all__ = [
    "HAS_USER",
    "TIME",
    "USER",
    "Binds",
    "Query",
    "Scope",
    "event_filter",
    "final_events",
    "one_event",
    "raw_events",
    "scope_of",
    "where_condition",
]

TIME = sql("time")
# Per-user reports group by the events' user key (`catalog.USER_KEY`, a number: cheaper to
# read and to hash than distinct_id); the empty distinct_id is never a user.
USER = sql(USER_KEY)
HAS_USER = sql("{} != {}", USER, sql(NO_USER_KEY))  # the events of a user


def scope_of(project_id: int, timeline: Timeline) -> Scope:
    """The scope of a report over `timeline`: its project and UTC range."""
    return Scope(project_id, timeline.start, timeline.end)


@dataclass(frozen=True)
class Query:
    """Finished SQL plus its bound values."""

    sql: Sql
    binds: Binds

    @property
    def text(self) -> str:
        return render(self.sql)

    async def run(self, ctx: QueryContext) -> list[tuple[Any, ...]]:
        return await ctx.warehouse.run(ctx.warehouse.query, self.text, self.binds.values)


def event_filter(names: Sequence[str] | None, binds: Binds) -> Sql:
    """`event` restricted to `names` (None: every event)."""
    if names is None:
        return sql("1")
    if not names:
        return sql("0")
    if len(names) == 1:
        return sql("event = {}", binds.add(names[0], "String"))
    return sql("event IN {}", binds.add(list(names), "Array(String)"))


def one_event(name: str | None) -> list[str] | None:
    """The `names` of `event_filter` for an optional single event (None: every event)."""
    return [name] if name is not None else None


def where_condition(where: TNode | None, binds: Binds) -> Sql | None:
    """The compiled `where` expression (None without one)."""
    return compile_where(where, binds) if where is not None else None


def _keys(names: Sequence[str] | None, keys: Sql | None, binds: Binds) -> Sql:
    names_filter = event_filter(names, binds)
    return sql("{} AND {}", names_filter, keys) if keys is not None else names_filter


def final_events(
    scope: Scope, names: Sequence[str] | None, where: Sql | None, binds: Binds, *, keys: Sql | None = None
) -> Sql:
    """`events FINAL`, scoped: the table with duplicates collapsed (the latest ingested copy
    wins), for reports that read properties. `keys`: more conditions on sorting-key
    columns only (`distinct_id` or a function of it, e.g. `HAS_USER`).

    The scope, event and `keys` conditions go into an explicit PREWHERE: they test
    sorting-key columns only, which every copy of a duplicate shares, so filtering before
    the FINAL merge is exact — and it lets ClickHouse skip reading `properties` for other
    rows, which it does not do on its own under FINAL (`optimize_move_to_prewhere_if_final`
    is off, rightly: a property condition must see only the latest copy, so `where`
    stays in WHERE, after the merge)."""
    return source(EVENTS, scope, binds, final=True, keys=_keys(names, keys, binds), where=where)


def raw_events(scope: Scope, names: Sequence[str] | None, binds: Binds, *, keys: Sql | None = None) -> Sql:
    """The events table, scoped, with the unmerged copies of duplicates: for queries that
    read no property, whose answer a copy cannot change (distinct hashes, users or times).
    Without FINAL, ClickHouse moves the key conditions to PREWHERE by itself."""
    return source(EVENTS, scope, binds, keys=_keys(names, keys, binds))
