"""Sources: the only way query SQL names a table, with the tenant guard written in.

A `Scope` is what a request may read: one project and, for a time-ordered table, a
half-open UTC time range. `source(table, scope, binds, ...)` renders the table together
with its guard (`project_id = {pN:UInt64}`, and `time >= … AND time < …` on the table's
time column) as the first conditions of the scan, so the primary index prunes by them
and no report, cohort or JQL author can leave them out (as HogQL's printer adds its team
guard to every table it prints). A tenant table cannot be read without a scope; a
time-ordered one not without a range.

    events FINAL PREWHERE <guard> AND <keys> WHERE <where>     (final=True)
    events WHERE <guard> AND <keys> AND <where>                (final=False)

`keys` are extra conditions on sorting-key columns (every copy of a duplicate shares them,
so they may filter before the FINAL merge); `where` is anything else (properties), which
under FINAL must see only the merged, latest copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from footfall.shared.schema.catalog import Table
from footfall.shared.sql.params import Params
from footfall.shared.sql.sql import Sql, _unchecked, sql

__all__ = ["Scope", "source"]

_UTC_MS = "DateTime64(3, 'UTC')"


@dataclass(frozen=True)
class Scope:
    """What one request may read: its project and, for time-ordered tables, [start, end)."""

    project_id: int
    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if type(self.project_id) is not int or self.project_id <= 0:
            raise ValueError("a scope needs a positive project id")
        if (self.start is None) != (self.end is None):
            raise ValueError("a scope's time range needs both ends")

    @property
    def span(self) -> tuple[datetime, datetime]:
        """(start, end) of a scope that has a time range."""
        if self.start is None or self.end is None:
            raise ValueError("this scope has no time range")
        return self.start, self.end

    def within(self, start: datetime, end: datetime) -> Scope:
        """The same project over another range (e.g. the partial quarter hours of a range)."""
        return Scope(self.project_id, start, end)


def guard(table: Table, scope: Scope, binds: Params) -> Sql:
    """The conditions every read of `table` starts with."""
    if not table.tenant:
        raise ValueError(f"{table.name} is not a tenant table")
    project = sql("project_id = {}", binds.add(scope.project_id, "UInt64"))
    if table.time_column is None:
        return project
    if scope.start is None or scope.end is None:
        raise ValueError(f"reading {table.name} needs a time range")
    time = _unchecked(table.time_column)
    return sql(
        "{} AND {} >= {} AND {} < {}",
        project,
        time,
        binds.add(scope.start, _UTC_MS),
        time,
        binds.add(scope.end, _UTC_MS),
    )


def source(
    table: Table, scope: Scope, binds: Params, *, final: bool = False, keys: Sql | None = None, where: Sql | None = None
) -> Sql:
    """`table` restricted to `scope` (and `keys`, `where`): a FROM-clause source."""
    name = _unchecked(table.name)
    first = guard(table, scope, binds)
    if keys is not None:
        first = sql("{} AND {}", first, keys)
    if final:
        return sql("{} FINAL PREWHERE {} WHERE {}", name, first, where if where is not None else sql("1"))
    if where is not None:
        first = sql("{} AND ({})", first, where)
    return sql("{} WHERE {}", name, first)
