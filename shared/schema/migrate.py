"""Apply the numbered migrations in `footfall.shared.schema.migrations` once each, in order."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import UTC, datetime

import structlog

from footfall.shared.schema import migrations
from footfall.shared.warehouse.client import Warehouse

log = structlog.get_logger(__name__)

_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations
(
    version     UInt32,
    name        String,
    applied_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(applied_at)
ORDER BY version
"""


def discover() -> list[tuple[int, str, list[str]]]:
    """(version, name, statements) for every `mNNNN_name` module, sorted by version."""
    found = []
    for info in pkgutil.iter_modules(migrations.__path__):
        if not info.name.startswith("m") or "_" not in info.name:
            continue
        version = int(info.name[1:].split("_", 1)[0])
        module = importlib.import_module(f"{migrations.__name__}.{info.name}")
        found.append((version, info.name, list(module.STATEMENTS)))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration numbers: {versions}")
    return found


def apply_migrations(warehouse: Warehouse, *, upto: int | None = None) -> list[int]:
    """Run every migration not yet recorded (those numbered at most `upto`, if given: the
    upgrade tests build a store of an earlier schema version); return the versions applied now."""
    warehouse.command(_LEDGER)
    done = {row[0] for row in warehouse.query("SELECT version FROM schema_migrations FINAL")}
    applied = []
    for version, name, statements in discover():
        if version in done or (upto is not None and version > upto):
            continue
        for statement in statements:
            warehouse.command(statement)
        warehouse.insert("schema_migrations", ["version", "name", "applied_at"], [[version, name, datetime.now(UTC)]])
        log.info("migration_applied", version=version, name=name)
        applied.append(version)
    return applied
