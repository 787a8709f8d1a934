"""The TTL rules of per-project retention (DDL: `footfall.shared.retention` applies them)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ttl_rules", "ttl_statement"]


def ttl_rules(periods: Mapping[int, int], column: str) -> str:
    """One rule per project with a period, ordered by project (empty when nothing expires).
    The numbers are ints read from the store, never request text."""
    return ", ".join(
        f"toDateTime({column}) + toIntervalDay({int(days)}) WHERE project_id = {int(pid)}"
        for pid, days in sorted(periods.items())
        if days > 0
    )


def ttl_statement(table: str, column: str, periods: Mapping[int, int]) -> str | None:
    """`ALTER TABLE … MODIFY TTL …`, or None when no project expires data."""
    rules = ttl_rules(periods, column)
    return f"ALTER TABLE {table} MODIFY TTL {rules}" if rules else None
