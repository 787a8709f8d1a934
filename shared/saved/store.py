"""The store of saved funnels and reports: the warehouse tables (`m0004_saved`) and an in-memory twin."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson

from footfall.shared.saved.definitions import (
    Bookmark,
    FunnelDefinition,
    InsightsParams,
    SavedFunnel,
    parse_funnel_definition,
    parse_insights_params,
)
from footfall.shared.schema.catalog import SAVED_FUNNELS, SAVED_REPORTS
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse.client import Warehouse

__all__ = ["MemorySavedStore", "SavedStore", "WarehouseSavedStore"]


class SavedStore(Protocol):
    def list_funnels(self, project_id: int) -> list[SavedFunnel]: ...

    def get_funnel(self, project_id: int, funnel_id: int) -> SavedFunnel | None: ...

    def create_funnel(self, project_id: int, name: str, definition: FunnelDefinition) -> SavedFunnel: ...

    def update_funnel(
        self, project_id: int, funnel_id: int, name: str, definition: FunnelDefinition
    ) -> SavedFunnel | None: ...

    def delete_funnel(self, project_id: int, funnel_id: int) -> bool: ...

    def list_bookmarks(self, project_id: int) -> list[Bookmark]: ...

    def get_bookmark(self, project_id: int, bookmark_id: int) -> Bookmark | None: ...

    def create_bookmark(self, project_id: int, name: str, params: InsightsParams) -> Bookmark: ...

    def update_bookmark(
        self, project_id: int, bookmark_id: int, name: str, params: InsightsParams
    ) -> Bookmark | None: ...

    def delete_bookmark(self, project_id: int, bookmark_id: int) -> bool: ...


@dataclass(frozen=True)
class _Row:
    item_id: int
    project_id: int
    name: str
    body: dict[str, Any]
    created: datetime
    modified: datetime


def _funnel(row: _Row) -> SavedFunnel:
    return SavedFunnel(
        row.item_id, row.project_id, row.name, parse_funnel_definition(row.body), row.created, row.modified
    )


def _bookmark(row: _Row) -> Bookmark:
    return Bookmark(row.item_id, row.project_id, row.name, parse_insights_params(row.body), row.created, row.modified)


class _RowStore(Protocol):
    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]: ...

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None: ...

    def next_id(self, kind: str, project_id: int) -> int: ...


def _now() -> datetime:
    return datetime.now(UTC)


def _later(previous: datetime) -> datetime:
    """A version strictly after `previous` (ReplacingMergeTree keeps the highest `updated_at`)."""
    return max(_now(), previous + timedelta(microseconds=1))


class _Typed:
    """The typed CRUD on top of a row store (shared by the warehouse store and its twin)."""

    def __init__(self, rows: _RowStore) -> None:
        self._rows = rows
        self._lock = threading.Lock()

    def _create(self, kind: str, project_id: int, name: str, body: dict[str, Any]) -> _Row:
        with self._lock:
            now = _now()
            row = _Row(self._rows.next_id(kind, project_id), project_id, name, body, now, now)
            self._rows.write(kind, row)
            return row

    def _update(self, kind: str, project_id: int, item_id: int, name: str, body: dict[str, Any]) -> _Row | None:
        with self._lock:
            found = self._rows.rows(kind, project_id, item_id)
            if not found:
                return None
            row = replace(found[0], name=name, body=body, modified=_later(found[0].modified))
            self._rows.write(kind, row)
            return row

    def _delete(self, kind: str, project_id: int, item_id: int) -> bool:
        with self._lock:
            found = self._rows.rows(kind, project_id, item_id)
            if not found:
                return False
            self._rows.write(kind, replace(found[0], modified=_later(found[0].modified)), deleted=True)
            return True

    def list_funnels(self, project_id: int) -> list[SavedFunnel]:
        return [_funnel(r) for r in self._rows.rows("funnel", project_id)]

    def get_funnel(self, project_id: int, funnel_id: int) -> SavedFunnel | None:
        found = self._rows.rows("funnel", project_id, funnel_id)
        return _funnel(found[0]) if found else None

    def create_funnel(self, project_id: int, name: str, definition: FunnelDefinition) -> SavedFunnel:
        return _funnel(self._create("funnel", project_id, name, definition.to_json()))

    def update_funnel(
        self, project_id: int, funnel_id: int, name: str, definition: FunnelDefinition
    ) -> SavedFunnel | None:
        row = self._update("funnel", project_id, funnel_id, name, definition.to_json())
        return _funnel(row) if row else None

    def delete_funnel(self, project_id: int, funnel_id: int) -> bool:
        return self._delete("funnel", project_id, funnel_id)

    def list_bookmarks(self, project_id: int) -> list[Bookmark]:
        return [_bookmark(r) for r in self._rows.rows("bookmark", project_id)]

    def get_bookmark(self, project_id: int, bookmark_id: int) -> Bookmark | None:
        found = self._rows.rows("bookmark", project_id, bookmark_id)
        return _bookmark(found[0]) if found else None

    def create_bookmark(self, project_id: int, name: str, params: InsightsParams) -> Bookmark:
        return _bookmark(self._create("bookmark", project_id, name, params.to_json()))

    def update_bookmark(self, project_id: int, bookmark_id: int, name: str, params: InsightsParams) -> Bookmark | None:
        row = self._update("bookmark", project_id, bookmark_id, name, params.to_json())
        return _bookmark(row) if row else None

    def delete_bookmark(self, project_id: int, bookmark_id: int) -> bool:
        return self._delete("bookmark", project_id, bookmark_id)


# The two tables of m0004_saved, by kind.
_TABLE = {"funnel": SAVED_FUNNELS, "bookmark": SAVED_REPORTS}


def _select(kind: str, project_id: int, item_id: int | None) -> tuple[str, dict[str, Any]]:
    """The live items of one project (or one of them), through the SQL layer's scoped source."""
    binds = Params()
    keys = sql("item_id = {}", binds.add(item_id, "UInt64")) if item_id is not None else None
    rows = source(_TABLE[kind], Scope(project_id), binds, final=True, keys=keys, where=sql("deleted = 0"))
    text = sql("SELECT item_id, project_id, name, body, created_at, updated_at FROM {} ORDER BY item_id", rows)
    return render(text), binds.values


def _max_id(kind: str, project_id: int) -> tuple[str, dict[str, Any]]:
    """The highest item id ever used in the project (deleted items included: ids are not reused)."""
    binds = Params()
    return render(sql("SELECT max(item_id) FROM {}", source(_TABLE[kind], Scope(project_id), binds))), binds.values


class _WarehouseRows:
    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]:
        found = self.warehouse.query(*_select(kind, project_id, item_id))
        return [_Row(int(r[0]), int(r[1]), r[2], orjson.loads(r[3]), _utc(r[4]), _utc(r[5])) for r in found]

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None:
        self.warehouse.insert(
            _TABLE[kind].name,
            _TABLE[kind].column_names,
            [
                [
                    row.project_id,
                    row.item_id,
                    row.name,
                    orjson.dumps(row.body).decode(),
                    row.created,
                    row.modified,
                    1 if deleted else 0,
                ]
            ],
        )

    def next_id(self, kind: str, project_id: int) -> int:
        return int(self.warehouse.query(*_max_id(kind, project_id))[0][0] or 0) + 1


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class WarehouseSavedStore(_Typed):
    """Saved funnels and reports in the warehouse's metadata tables."""

    def __init__(self, warehouse: Warehouse) -> None:
        super().__init__(_WarehouseRows(warehouse))


@dataclass
class _MemoryRows:
    data: dict[tuple[str, int, int], tuple[_Row, bool]] = field(default_factory=dict)

    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]:
        return [
            row
            for (k, p, i), (row, deleted) in sorted(self.data.items())
            if k == kind and p == project_id and not deleted and (item_id is None or i == item_id)
        ]

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None:
        self.data[(kind, row.project_id, row.item_id)] = (row, deleted)

    def next_id(self, kind: str, project_id: int) -> int:
        return max((i for (k, p, i) in self.data if k == kind and p == project_id), default=0) + 1


class MemorySavedStore(_Typed):
    """The in-memory twin of `WarehouseSavedStore` (unit tests)."""

    def __init__(self) -> None:
        super().__init__(_MemoryRows())
