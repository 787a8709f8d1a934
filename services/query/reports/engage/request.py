"""`EngageRequest`: the /engage members, read once and checked (pure; every error names its member).

The checks run in the order of the oracle (tests/oracle/engage.py), so that a request with
several faults is refused for the same one: mutually exclusive members, paging, `data_group_id`,
`distinct_id(s)`, `output_properties`, `behaviors` (and `as_of_timestamp`), `where`/`selector`,
`filter_by_cohort`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from footfall.services.query.params import Params
from footfall.shared.errors import ParamError
from footfall.shared.expr import ExprError, check_expr, parse_expr
from footfall.shared.expr.typed import Apply, Count, ListOf, TNode

__all__ = [
    "EXCLUSIVE",
    "MAX_BEHAVIORS",
    "MAX_DISTINCT_IDS",
    "MAX_PAGE_SIZE",
    "MAX_WINDOW_DAYS",
    "Behavior",
    "CohortFilter",
    "EngageRequest",
    "EventSelector",
    "Membership",
    "include_all_users",
    "parse_request",
]

MAX_PAGE_SIZE = 1000
MAX_DISTINCT_IDS = 2000
MAX_BEHAVIORS = 50
MAX_WINDOW_DAYS = 36_500
MAX_NAME = 255  # characters of a behaviour name
# Pairs of members a request may not combine, checked in this order.
EXCLUSIVE = (
    ("distinct_id", "distinct_ids"),
    ("where", "selector"),
    ("behaviors", "filter_by_cohort"),
    ("filter_by_cohort", "data_group_id"),  # no group cohorts (semantics-2 §13.6)
    ("behaviors", "data_group_id"),  # behaviours count a user's events
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_WINDOW = re.compile(r"([1-9][0-9]{0,5})d")
_INT64 = (-(2**63), 2**63 - 1)
_MILLIS_FROM = 10**10  # as_of_timestamp >= 1e10 is milliseconds (the /import `time` rule)
_LAST_MS = 10_413_792_000_000  # 2300-01-01: the end of DateTime64(3)'s useful range
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class EventSelector:
    event: str
    selector: str | None  # an event expression (checked in the event context), or None


@dataclass(frozen=True)
class Behavior:
    """`behaviors["name"]`: a user's events matching any selector in the last `days` local days."""

    name: str
    days: int
    selectors: tuple[EventSelector, ...]

    def entry(self) -> dict[str, Any]:
        """As a cohort behaviour (`footfall.shared.cohorts`): counted by the same evaluator."""
        selectors = [{"event": s.event, "selector": s.selector} for s in self.selectors]
        return {
            "count": {"event_selectors": selectors, "type": "absolute"},
            "window": {"unit": "day", "value": self.days},
        }


@dataclass(frozen=True)
class CohortFilter:
    """`filter_by_cohort` as sent: a saved cohort's id or a raw definition, not yet resolved."""

    cohort_id: int | None
    raw: Any  # the `raw_cohort` definition (when cohort_id is None)
    include_all_users: str | None  # as sent; read by `include_all_users()` once the cohort resolves


@dataclass(frozen=True)
class Membership:
    """A resolved `filter_by_cohort`: cohort `cohort_id` of `definitions` (the project's cohorts in
    their canonical form, and a raw definition under id 0) and whether members without a profile
    are kept."""

    cohort_id: int
    definitions: Mapping[int, Mapping[str, Any]]
    keep_all: bool


@dataclass(frozen=True)
class EngageRequest:
    page: int
    page_size: int  # effective: at most MAX_PAGE_SIZE
    session_id: str | None
    distinct_ids: tuple[str, ...] | None  # `distinct_id` is a one-element selection
    data_group_id: int | None
    where: TNode | None  # checked in the profile context
    output_properties: tuple[str, ...] | None
    behaviors: tuple[Behavior, ...] | None
    as_of: datetime | None  # as_of_timestamp (read only with behaviors)
    cohort: CohortFilter | None = None
    membership: Membership | None = None  # `cohort` resolved (page 0 only)

    @property
    def counted(self) -> tuple[Behavior, ...]:
        """The behaviours `where` reads (the others filter nothing and are not computed)."""
        used = set(_counts(self.where)) if self.where is not None else set()
        return tuple(b for b in self.behaviors or () if b.name in used)


def _counts(node: TNode) -> Iterator[str]:
    stack = [node]
    while stack:
        match stack.pop():
            case Count(name):
                yield name
            case Apply(_, args):
                stack.extend(args)
            case ListOf(items):
                stack.extend(items)


# -- members ----------------------------------------------------------------------------------------
def _check_exclusive(p: Params) -> None:
    for a, b in EXCLUSIVE:
        if p.get(a) is not None and p.get(b) is not None:
            raise ParamError(f"{a} and {b} are mutually exclusive")


def _integer(p: Params, name: str) -> int | None:
    raw = p.get(name)
    if raw is None:
        return None
    if not _INTEGER.fullmatch(raw.strip()):
        raise ParamError(f"Error in {name}: {raw[:40]!r} is not an integer")
    return int(raw)


def _paging(p: Params) -> tuple[int, int, str | None]:
    page = _integer(p, "page")
    page = 0 if page is None else page
    if page < 0:
        raise ParamError("Error in page: must be at least 0")
    session_id = p.get("session_id")
    if page > 0 and session_id is None:
        raise ParamError("Error in session_id: required when page > 0 (it is in the answer to page 0)")
    size = _integer(p, "page_size")
    size = MAX_PAGE_SIZE if size is None else size
    if size < 1:
        raise ParamError("Error in page_size: must be at least 1")
    return page, min(size, MAX_PAGE_SIZE), session_id


def _json(p: Params, name: str) -> Any:
    raw = p.get(name)
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ParamError(f"Error in {name}: not valid JSON") from None


def _json_array(p: Params, name: str) -> list[Any] | None:
    value = _json(p, name)
    if value is not None and not isinstance(value, list):
        raise ParamError(f"Error in {name}: must be a JSON array")
    return value


def _data_group_id(p: Params) -> int | None:
    value = _integer(p, "data_group_id")
    if value is not None and not _INT64[0] <= value <= _INT64[1]:
        raise ParamError(f"Error in data_group_id: unknown data_group_id {value}")
    return value


def _distinct_ids(p: Params) -> tuple[str, ...] | None:
    one = p.get("distinct_id")
    if one is not None:
        return (one,)
    many = _json_array(p, "distinct_ids")
    if many is None:
        return None
    if len(many) > MAX_DISTINCT_IDS:
        raise ParamError(f"Error in distinct_ids: at most {MAX_DISTINCT_IDS} ids per request, got {len(many)}")
    for value in many:
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ParamError("Error in distinct_ids: must be a JSON array of strings or integers")
    return tuple(dict.fromkeys(str(v) for v in many))


def _output_properties(p: Params) -> tuple[str, ...] | None:
    names = _json_array(p, "output_properties")
    if names is not None and not all(isinstance(n, str) for n in names):
        raise ParamError("Error in output_properties: must be a JSON array of property names")
    return None if names is None else tuple(names)


# -- behaviours ---------------------------------------------------------------------------------------
def _event_selector(item: Any) -> EventSelector:
    if not isinstance(item, dict) or not isinstance(item.get("event"), str) or not item["event"]:
        raise ParamError("Error in behaviors: every event selector needs a non-empty 'event'")
    text = item.get("selector")
    if text is not None and not isinstance(text, str):
        raise ParamError("Error in behaviors: an event selector's 'selector' must be a string")
    if not text:
        return EventSelector(item["event"], None)
    try:
        check_expr(parse_expr(text))
    except ExprError as exc:
        raise ParamError(f"Error in behaviors: selector of event {item['event'][:80]!r}: {exc.message}") from None
    return EventSelector(item["event"], text)


def _behavior(item: Any) -> Behavior:
    if not isinstance(item, dict):
        raise ParamError("Error in behaviors: must be a JSON array of objects")
    name, window, selectors = item.get("name"), item.get("window"), item.get("event_selectors")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ParamError(f"Error in behaviors: every behaviour needs a 'name' of 1 to {MAX_NAME} characters")
    match = _WINDOW.fullmatch(window) if isinstance(window, str) else None
    if match is None or int(match.group(1)) > MAX_WINDOW_DAYS:
        raise ParamError(
            f"Error in behaviors: window of {name[:80]!r} must be '<N>d' with 1 <= N <= {MAX_WINDOW_DAYS}, "
            f"got {str(window)[:40]!r}"
        )
    if not isinstance(selectors, list) or not selectors:
        raise ParamError(f"Error in behaviors: {name[:80]!r} needs a non-empty 'event_selectors' list")
    return Behavior(name, int(match.group(1)), tuple(_event_selector(s) for s in selectors))


def _behaviors(p: Params) -> tuple[Behavior, ...] | None:
    items = _json_array(p, "behaviors")
    if items is None:
        return None
    if len(items) > MAX_BEHAVIORS:
        raise ParamError(f"Error in behaviors: at most {MAX_BEHAVIORS} behaviours per request, got {len(items)}")
    out = tuple(_behavior(item) for item in items)
    if len({b.name for b in out}) != len(out):
        raise ParamError("Error in behaviors: behaviour names must be unique")
    return out


def _as_of(p: Params) -> datetime | None:
    value = _integer(p, "as_of_timestamp")
    if value is None:
        return None
    ms = value if value >= _MILLIS_FROM else value * 1000
    if not 0 <= ms < _LAST_MS:
        raise ParamError("Error in as_of_timestamp: must be epoch seconds (or milliseconds) from 1970 to 2299")
    return _EPOCH + timedelta(milliseconds=ms)


def _where(p: Params, behaviors: tuple[Behavior, ...] | None) -> TNode | None:
    name = "where" if p.get("where") is not None else "selector"
    text = p.get(name)
    if text is None:
        return None
    try:
        return check_expr(parse_expr(text), context="profiles", behaviors=[b.name for b in behaviors or ()])
    except ExprError as exc:
        raise ParamError(f"Error in {name}: {exc.message}") from None


def _cohort(p: Params) -> CohortFilter | None:
    """`filter_by_cohort`: a saved cohort's id (`{"id": n}` or `n`) or `{"raw_cohort": definition}`.
    Whether the cohort exists, and the raw definition, are checked against the project's cohorts
    when the request runs (then `include_all_users`, the oracle's order)."""
    spec = _json(p, "filter_by_cohort")
    if spec is None:
        return None
    flag = p.get("include_all_users")
    if isinstance(spec, dict) and "raw_cohort" in spec:
        return CohortFilter(None, spec["raw_cohort"], flag)
    cohort_id = spec.get("id") if isinstance(spec, dict) else spec
    if isinstance(cohort_id, bool) or not isinstance(cohort_id, int):
        raise ParamError('Error in filter_by_cohort: must be {"id": <cohort id>} or a cohort id')
    return CohortFilter(cohort_id, None, flag)


def include_all_users(flag: str | None) -> bool:
    """`include_all_users` (true/false/1/0, any case; default true): whether cohort members
    without a profile are returned (with empty properties)."""
    if flag is None:
        return True
    lowered = flag.strip().lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ParamError(f"Error in include_all_users: {flag[:40]!r} is not true or false")
    return lowered in ("true", "1")


def parse_request(p: Params) -> EngageRequest:
    """Every member of the request, checked; a bad one is a 400 naming it."""
    _check_exclusive(p)
    page, page_size, session_id = _paging(p)
    data_group_id = _data_group_id(p)
    distinct_ids = _distinct_ids(p)
    output = _output_properties(p)
    behaviors = _behaviors(p)
    as_of = _as_of(p) if behaviors is not None else None
    where = _where(p, behaviors)
    cohort = _cohort(p)
    return EngageRequest(
        page, page_size, session_id, distinct_ids, data_group_id, where, output, behaviors, as_of, cohort
    )
