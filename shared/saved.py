"""Saved funnels and saved reports ("bookmarks"): their definitions and their store.

Used by the management interface (`services/app/saved.py`), the CLI and the query service
(`/funnels`, `/funnels/list`, `/insights`). Definitions are validated here for structure;
the expression texts they carry (`selector`, `where`, `on`) are checked by a callable the
caller passes in (`check_expr`), so that `shared/` does not depend on the query service.

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
`updated_at` (microseconds); a delete is a row with `deleted = 1`. Ids are allocated as
max + 1 over all projects under a process lock (metadata writes come from one
management process or the CLI; ids are global like the interface's, but every read is
scoped by project). `MemorySavedStore` is the in-memory twin.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

import orjson

from shared.warehouse.client import Warehouse

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
]

LENGTH_UNITS: Mapping[str, int] = {"day": 86_400, "hour": 3_600, "minute": 60, "second": 1}
MAX_WINDOW_SECONDS = 90 * 86_400
MAX_STEPS = 32
MAX_CUSTOM_EVENTS = 50
MAX_NAME = 255
DEFAULT_LENGTH = (7, "day")
BOOKMARK_UNITS = ("hour", "day", "week", "month")
COUNT_TYPES = ("general", "unique", "average")
MAX_BOOKMARK_EVENTS = 20
MAX_LAST_DAYS = 3650
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

# Checks one expression text; raises an exception with a `.message` (and `.position`) when invalid.
ExprCheck = Callable[[str], None]


class DefinitionError(ValueError):
    """An invalid saved definition. `field` names the offending member (`steps[1].selector`)."""

    def __init__(self, message: str, field: str | None = None, position: int | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.message = str(self)
        self.field = field
        self.position = position


# ------------------------------------------------------------------------------------- funnels
@dataclass(frozen=True)
class CustomEvent:
    id: int
    name: str
    events: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "events": list(self.events)}


@dataclass(frozen=True)
class FunnelStep:
    event: str
    selector: str | None = None
    custom_event: CustomEvent | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The event names this step matches."""
        return self.custom_event.events if self.custom_event else (self.event,)

    @property
    def goal(self) -> str:
        return f"$custom_event:{self.custom_event.id}" if self.custom_event else self.event

    @property
    def label(self) -> str:
        return self.custom_event.name if self.custom_event else self.event

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.event}
        if self.selector is not None:
            out["selector"] = self.selector
        if self.custom_event is not None:
            out["custom_event"] = self.custom_event.to_json()
        return out


@dataclass(frozen=True)
class FunnelDefinition:
    steps: tuple[FunnelStep, ...]
    length: int = DEFAULT_LENGTH[0]
    length_unit: str = DEFAULT_LENGTH[1]

    @property
    def window_seconds(self) -> int:
        return self.length * LENGTH_UNITS[self.length_unit]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [s.to_json() for s in self.steps], "length": self.length, "length_unit": self.length_unit}


@dataclass(frozen=True)
class SavedFunnel:
    funnel_id: int
    project_id: int
    name: str
    definition: FunnelDefinition
    created: datetime
    modified: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "funnel_id": self.funnel_id,
            "project_id": self.project_id,
            "name": self.name,
            **self.definition.to_json(),
            "created": _iso(self.created),
            "modified": _iso(self.modified),
        }


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError("must be a non-empty string", where)
    if len(value) > MAX_NAME:
        raise DefinitionError(f"must be at most {MAX_NAME} characters", where)
    return value


def _int(value: Any, where: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionError("must be an integer", where)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise DefinitionError(f"must be {bound}", where)
    return value


def _object(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DefinitionError("must be a JSON object", where)
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise DefinitionError(f"unknown member {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})", where)
    return value


def _expression(value: Any, where: str, check: ExprCheck | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError("must be a non-empty expression string", where)
    if check is not None:
        try:
            check(value)
        except DefinitionError:
            raise
        except Exception as exc:  # the checker's own error type (ExprError); keep its position
            message = getattr(exc, "message", None) or str(exc)
            raise DefinitionError(message, where, getattr(exc, "position", None)) from None
    return value


def _step(value: Any, where: str, check: ExprCheck | None) -> FunnelStep:
    obj = _object(value, where, {"event", "selector", "custom_event"})
    selector = _expression(obj.get("selector"), f"{where}.selector", check)
    custom_raw = obj.get("custom_event")
    if custom_raw is None:
        return FunnelStep(_name(obj.get("event"), f"{where}.event"), selector)
    cwhere = f"{where}.custom_event"
    custom = _object(custom_raw, cwhere, {"id", "name", "events"})
    events_raw = custom.get("events")
    if not isinstance(events_raw, list) or not 1 <= len(events_raw) <= MAX_CUSTOM_EVENTS:
        raise DefinitionError(f"must be a list of 1 to {MAX_CUSTOM_EVENTS} event names", f"{cwhere}.events")
    names = tuple(dict.fromkeys(_name(e, f"{cwhere}.events[{i}]") for i, e in enumerate(events_raw)))
    ce = CustomEvent(_int(custom.get("id"), f"{cwhere}.id", 1), _name(custom.get("name"), f"{cwhere}.name"), names)
    event = obj.get("event")
    event = _name(event, f"{where}.event") if event is not None else f"$custom_event:{ce.id}"
    return FunnelStep(event, selector, ce)


def parse_funnel_definition(
    data: Mapping[str, Any], *, check: ExprCheck | None = None, where: str = ""
) -> FunnelDefinition:
    """The definition part (steps, window) of a funnel object; unknown members are the caller's business."""
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not 1 <= len(steps_raw) <= MAX_STEPS:
        raise DefinitionError(f"must be a list of 1 to {MAX_STEPS} steps", f"{where}steps")
    steps = tuple(_step(s, f"{where}steps[{i}]", check) for i, s in enumerate(steps_raw))
    length = _int(data.get("length", DEFAULT_LENGTH[0]), f"{where}length", 1)
    unit = data.get("length_unit", DEFAULT_LENGTH[1])
    if unit not in LENGTH_UNITS:
        raise DefinitionError(f"must be one of {', '.join(LENGTH_UNITS)}", f"{where}length_unit")
    if length * LENGTH_UNITS[unit] > MAX_WINDOW_SECONDS:
        raise DefinitionError("the conversion window may be at most 90 days", f"{where}length")
    return FunnelDefinition(steps, length, unit)


FUNNEL_MEMBERS = {"name", "steps", "length", "length_unit", "funnel_id", "project_id", "created", "modified"}


def parse_funnel(data: Any, *, check: ExprCheck | None = None) -> tuple[str, FunnelDefinition]:
    """(name, definition) from a funnel JSON object (`funnel_id`, `created`… are ignored)."""
    obj = _object(data, "funnel", FUNNEL_MEMBERS)
    return _name(obj.get("name"), "name"), parse_funnel_definition(obj, check=check)


# ------------------------------------------------------------------------------------ bookmarks
@dataclass(frozen=True)
class InsightsParams:
    events: tuple[str, ...]
    unit: str = "day"
    type_of_count: str = "general"
    where: str | None = None
    on: str | None = None
    limit: int = 60
    from_date: date | None = None
    to_date: date | None = None
    last_days: int | None = None

    def dates(self, today: date) -> tuple[date, date]:
        """The inclusive local date range; `today` is the current date in the project's zone."""
        if self.last_days is not None:
            return date.fromordinal(today.toordinal() - self.last_days + 1), today
        assert self.from_date is not None and self.to_date is not None
        return self.from_date, self.to_date

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "insights",
            "events": list(self.events),
            "unit": self.unit,
            "type_of_count": self.type_of_count,
        }
        if self.where is not None:
            out["where"] = self.where
        if self.on is not None:
            out["on"] = self.on
            out["limit"] = self.limit
        if self.last_days is not None:
            out["last_days"] = self.last_days
        else:
            assert self.from_date is not None and self.to_date is not None
            out["from_date"] = self.from_date.isoformat()
            out["to_date"] = self.to_date.isoformat()
        return out


@dataclass(frozen=True)
class Bookmark:
    bookmark_id: int
    project_id: int
    name: str
    params: InsightsParams
    created: datetime
    modified: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.bookmark_id,
            "project_id": self.project_id,
            "name": self.name,
            "params": self.params.to_json(),
            "created": _iso(self.created),
            "modified": _iso(self.modified),
        }


_PARAM_MEMBERS = {"type", "events", "unit", "type_of_count", "where", "on", "limit", "from_date", "to_date", "last_days"}


def _date(value: Any, where: str) -> date:
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise DefinitionError("must be a date yyyy-mm-dd", where)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise DefinitionError("must be a valid date yyyy-mm-dd", where) from None


def parse_insights_params(data: Any, *, check: ExprCheck | None = None, where: str = "params") -> InsightsParams:
    obj = _object(data, where, _PARAM_MEMBERS)
    if obj.get("type", "insights") != "insights":
        raise DefinitionError("only 'insights' reports can be saved", f"{where}.type")
    events_raw = obj.get("events")
    if not isinstance(events_raw, list) or not 1 <= len(events_raw) <= MAX_BOOKMARK_EVENTS:
        raise DefinitionError(f"must be a list of 1 to {MAX_BOOKMARK_EVENTS} event names", f"{where}.events")
    events = tuple(dict.fromkeys(_name(e, f"{where}.events[{i}]") for i, e in enumerate(events_raw)))
    unit = obj.get("unit", "day")
    if unit not in BOOKMARK_UNITS:
        raise DefinitionError(f"must be one of {', '.join(BOOKMARK_UNITS)}", f"{where}.unit")
    count = obj.get("type_of_count", "general")
    if count not in COUNT_TYPES:
        raise DefinitionError(f"must be one of {', '.join(COUNT_TYPES)}", f"{where}.type_of_count")
    where_expr = _expression(obj.get("where"), f"{where}.where", check)
    on_expr = _expression(obj.get("on"), f"{where}.on", check)
    limit = _int(obj.get("limit", 60), f"{where}.limit", 1, 10_000)
    has_abs = "from_date" in obj or "to_date" in obj
    if has_abs == ("last_days" in obj):
        raise DefinitionError("give either from_date and to_date, or last_days", where)
    if has_abs:
        from_date = _date(obj.get("from_date"), f"{where}.from_date")
        to_date = _date(obj.get("to_date"), f"{where}.to_date")
        if to_date < from_date:
            raise DefinitionError("is before from_date", f"{where}.to_date")
        return InsightsParams(events, unit, count, where_expr, on_expr, limit, from_date, to_date)
    last = _int(obj.get("last_days"), f"{where}.last_days", 1, MAX_LAST_DAYS)
    return InsightsParams(events, unit, count, where_expr, on_expr, limit, last_days=last)


BOOKMARK_MEMBERS = {"name", "params", "id", "project_id", "created", "modified"}


def parse_bookmark(data: Any, *, check: ExprCheck | None = None) -> tuple[str, InsightsParams]:
    obj = _object(data, "bookmark", BOOKMARK_MEMBERS)
    return _name(obj.get("name"), "name"), parse_insights_params(obj.get("params"), check=check)


# ---------------------------------------------------------------------------------------- store
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
    return SavedFunnel(row.item_id, row.project_id, row.name, parse_funnel_definition(row.body), row.created,
                       row.modified)


def _bookmark(row: _Row) -> Bookmark:
    return Bookmark(row.item_id, row.project_id, row.name, parse_insights_params(row.body), row.created,
                    row.modified)


class _RowStore(Protocol):
    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]: ...

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None: ...

    def next_id(self, kind: str) -> int: ...


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
            row = _Row(self._rows.next_id(kind), project_id, name, body, now, now)
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

    def update_bookmark(
        self, project_id: int, bookmark_id: int, name: str, params: InsightsParams
    ) -> Bookmark | None:
        row = self._update("bookmark", project_id, bookmark_id, name, params.to_json())
        return _bookmark(row) if row else None

    def delete_bookmark(self, project_id: int, bookmark_id: int) -> bool:
        return self._delete("bookmark", project_id, bookmark_id)


# The two tables of m0004_saved, by kind; the SQL below is fixed text per kind.
_SELECT = {
    "funnel": "SELECT item_id, project_id, name, body, created_at, updated_at FROM saved_funnels FINAL "
    "WHERE deleted = 0 AND project_id = {project_id:UInt64} "
    "AND ({item_id:UInt64} = 0 OR item_id = {item_id:UInt64}) ORDER BY item_id",
    "bookmark": "SELECT item_id, project_id, name, body, created_at, updated_at FROM saved_reports FINAL "
    "WHERE deleted = 0 AND project_id = {project_id:UInt64} "
    "AND ({item_id:UInt64} = 0 OR item_id = {item_id:UInt64}) ORDER BY item_id",
}
_MAX_ID = {
    "funnel": "SELECT max(item_id) FROM saved_funnels",
    "bookmark": "SELECT max(item_id) FROM saved_reports",
}
_TABLE = {"funnel": "saved_funnels", "bookmark": "saved_reports"}
_COLUMNS = ["project_id", "item_id", "name", "body", "created_at", "updated_at", "deleted"]


class _WarehouseRows:
    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]:
        found = self.warehouse.query(_SELECT[kind], {"project_id": project_id, "item_id": item_id or 0})
        return [
            _Row(int(r[0]), int(r[1]), r[2], orjson.loads(r[3]), _utc(r[4]), _utc(r[5])) for r in found
        ]

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None:
        self.warehouse.insert(
            _TABLE[kind],
            _COLUMNS,
            [[row.project_id, row.item_id, row.name, orjson.dumps(row.body).decode(), row.created, row.modified,
              1 if deleted else 0]],
        )

    def next_id(self, kind: str) -> int:
        return int(self.warehouse.query(_MAX_ID[kind])[0][0] or 0) + 1


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class WarehouseSavedStore(_Typed):
    """Saved funnels and reports in the warehouse's metadata tables."""

    def __init__(self, warehouse: Warehouse) -> None:
        super().__init__(_WarehouseRows(warehouse))


@dataclass
class _MemoryRows:
    data: dict[tuple[str, int], tuple[_Row, bool]] = field(default_factory=dict)

    def rows(self, kind: str, project_id: int, item_id: int | None = None) -> list[_Row]:
        out = [
            row
            for (k, i), (row, deleted) in sorted(self.data.items())
            if k == kind and not deleted and row.project_id == project_id and (item_id is None or i == item_id)
        ]
        return out

    def write(self, kind: str, row: _Row, *, deleted: bool = False) -> None:
        self.data[(kind, row.item_id)] = (row, deleted)

    def next_id(self, kind: str) -> int:
        return max((i for k, i in self.data if k == kind), default=0) + 1


class MemorySavedStore(_Typed):
    """The in-memory twin of `WarehouseSavedStore` (unit tests)."""

    def __init__(self) -> None:
        super().__init__(_MemoryRows())
