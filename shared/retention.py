"""Per-project retention: how many days of events a project keeps, enforced by the warehouse.

A period is a row of `project_retention` (no row, or 0 days: keep everything). Setting one
re-renders the TTL rules of every table that holds event data, one rule per project that has
a period:

    TTL toDateTime(time) + toIntervalDay(30) WHERE project_id = 5, …

ClickHouse deletes expired rows when it merges parts (at the latest every
`merge_with_ttl_timeout`, 4 hours by default), and `ALTER TABLE … MODIFY TTL` applies a new
rule to the parts already stored (a mutation that rewrites the parts holding expired rows: its
cost is reading and rewriting those parts once). Events therefore leave every report and
export within hours of expiring. The tables: `events`, and the two kept by materialised views
over it, so that the counts and the known ids expire with the events (`event_counts_15m` by
quarter hour, `known_ids` by the id's last event). Profiles are not expired: a profile is
state, not history, and is deleted through the data-deletion API.

The rules are rendered from integers read from the store (never from request text), so the
DDL carries no user input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from footfall.shared.schema.catalog import EVENT_COUNTS_15M, EVENTS, KNOWN_IDS, PROJECT_RETENTION, Table
from footfall.shared.schema.retention import ttl_statement
from footfall.shared.warehouse import Warehouse

__all__ = [
    "EXPIRING",
    "MAX_DAYS",
    "RetentionError",
    "apply_retention",
    "applying",
    "check_days",
    "load_periods",
    "set_period",
]

MAX_DAYS = 36_500  # a hundred years; beyond that, keep everything (0)


@dataclass(frozen=True)
class Expiring:
    table: Table
    column: str  # the row's time


EXPIRING = (Expiring(EVENTS, "time"), Expiring(EVENT_COUNTS_15M, "quarter"), Expiring(KNOWN_IDS, "last_seen"))


class RetentionError(ValueError):
    """A period that is not a whole number of days between 0 and MAX_DAYS."""


def check_days(days: object) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_DAYS:
        raise RetentionError(f"retention must be a whole number of days from 1 to {MAX_DAYS}, or 0 to keep everything")
    return days


def load_periods(warehouse: Warehouse) -> dict[int, int]:
    """project -> days, for the projects that expire data."""
    rows = warehouse.query(f"SELECT project_id, days FROM {PROJECT_RETENTION.name} FINAL WHERE days > 0")  # noqa: S608 - a catalog name
    return {int(pid): int(days) for pid, days in rows}


def apply_retention(warehouse: Warehouse, periods: Mapping[int, int] | None = None) -> dict[int, int]:
    """Render the rules of `periods` (default: the stored ones) onto every expiring table."""
    periods = load_periods(warehouse) if periods is None else dict(periods)
    for item in EXPIRING:
        statement = ttl_statement(item.table.name, item.column, periods)
        if statement is not None or _has_ttl(warehouse, item.table.name):
            warehouse.command(statement or f"ALTER TABLE {item.table.name} REMOVE TTL")
    return periods


def set_period(warehouse: Warehouse, project_id: int, days: int) -> dict[int, int]:
    """Store a project's period (0: keep everything) and apply every period at once."""
    days = check_days(days)
    warehouse.insert(
        PROJECT_RETENTION.name, ["project_id", "days", "updated_at"], [[project_id, days, datetime.now(UTC)]]
    )
    return apply_retention(warehouse)


def applying(warehouse: Warehouse) -> dict[str, int]:
    """How far the last change is from being applied to the stored data: the unfinished
    mutations of the expiring tables and the parts they still have to rewrite."""
    rows = warehouse.query(
        "SELECT count(), sum(parts_to_do) FROM system.mutations "
        "WHERE database = currentDatabase() AND table IN {tables:Array(String)} AND NOT is_done",
        {"tables": [item.table.name for item in EXPIRING]},
    )
    mutations, parts = rows[0] if rows else (0, 0)
    return {"mutations": int(mutations or 0), "parts_to_do": int(parts or 0)}


def _has_ttl(warehouse: Warehouse, table: str) -> bool:
    rows = warehouse.query(
        "SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        {"t": table},
    )
    return bool(rows) and " TTL " in str(rows[0][0])
