"""Saved funnel and saved report definitions: frozen types and their validation (see the package docstring)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from footfall.shared.errors import ParamError

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
    "SavedFunnel",
    "parse_bookmark",
    "parse_funnel",
    "parse_funnel_definition",
    "parse_insights_params",
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


class DefinitionError(ParamError):
    """An invalid saved definition (400). `field` names the offending member (`steps[1].selector`)."""

    def __init__(self, message: str, field: str | None = None, position: int | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
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
        if not (self.from_date is not None and self.to_date is not None):
            raise AssertionError("invariant: self.from_date is not None and self.to_date is not None")
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
            if not (self.from_date is not None and self.to_date is not None):
                raise AssertionError("invariant: self.from_date is not None and self.to_date is not None")
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


_PARAM_MEMBERS = {
    "type",
    "events",
    "unit",
    "type_of_count",
    "where",
    "on",
    "limit",
    "from_date",
    "to_date",
    "last_days",
}


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
