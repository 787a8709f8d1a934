"""Independent reference ("oracle") for the /engage profile query (semantics.md §1.12, §4; semantics-2.md §13).

Shares no code with services/ or shared/; profile expressions go through tests/oracle/expr.py
(`parse_profile` / `profile_where_matches`), behaviour selectors through its event evaluator, events through
`_common.prepare` (the oracles' one dedupe: (event, time, distinct_id, $insert_id), last copy wins).

    engage(profiles, params, *, project_id, events=None, now_ms=None, page_snapshot=None, group_keys=None,
           cohorts=None, tz="UTC", raw_cohort=None) -> dict | EngageError

`profiles` is `profiles.apply(...).profiles` (ProfileKey -> Profile; a plain property dict is accepted as the
value too). `params` are the request members as strings. The answer is the whole JSON body except
`session_id`: {"page", "page_size", "results", "status": "ok", "total"}; a request the server must refuse
(HTTP 400) gives an EngageError whose `.message` names the offending member(s). Decisions (where §4 is silent):

- Empty members (`""` or None) count as absent (clients drop or blank unused members).
- Mutually exclusive, an EngageError naming both, checked in this order: `distinct_id` + `distinct_ids`,
  `where` + `selector` (its legacy alias), `behaviors` + `filter_by_cohort`, `filter_by_cohort` +
  `data_group_id` (no group cohorts, semantics-2 §13.6), `behaviors` + `data_group_id` (behaviours count a
  user's events; group behaviours are not supported).
- Collection: user profiles of `project_id`; with `data_group_id`, the group profiles of the group key that
  `group_keys[data_group_id]` names (ids compared as text, a numeric id normalised: "007" == "7" == 7); an
  unknown `data_group_id` is an error. `$distinct_id` in a result is the stored id text (the group id for
  groups). Other projects' and other group keys' profiles are never visible.
- `distinct_id` selects one id; `distinct_ids` is a JSON array of strings or integers (not booleans),
  compared as text; `[]` selects nothing; duplicates collapse. Bad JSON / wrong types are errors.
- `where` (alias `selector`) is a profile expression (expr.py, profile section): `properties["x"]` and
  `user["x"]` read the profile, `behaviors["name"]` its count; a profile is kept only when it is boolean true.
  A syntax/type error, or a `behaviors["x"]` whose `x` is not defined in `behaviors`, is an error.
- `output_properties`: a JSON array of strings; `$properties` keeps only those keys that the profile has
  (`[]` gives `{}`); without it, every property.
- Order: ascending `$distinct_id` by code point (= UTF-8 byte order). `total` = all matches, on every page.
- `page` is a 0-based integer (default 0); a page past the end has `results: []`. `page > 0` needs a
  `session_id` member (its value is not checked: the oracle has no sessions). `page_size` defaults to 1000;
  a larger value is capped at 1000 (the echoed `page_size` is the effective one); 0, negatives and
  non-integers are errors.
- Sessions: `page_snapshot`, when given, is the profile state as of the session's page 0; the answer is
  computed on it instead of `profiles` (any page), so pages of one session see one result set. `now_ms`
  likewise stands for the session's page-0 time.
- `behaviors`: JSON list of `{"name", "window", "event_selectors": [{"event", "selector"?}]}`, at most 50;
  `name` a non-empty string, unique; `window` is "<N>d" with N >= 1 (only days are accepted); every
  selector has a non-empty `event` and an optional `selector` (null/"" = none) in the EVENT expression
  language. Count of a profile = its deduplicated events (of `events`, the project's raw /import events)
  whose name and selector match ANY of the behaviour's event selectors (an event counts once even if it
  matches several), with a time in [local midnight of (today - N + 1 days), now] in the project time zone
  `tz` (semantics-2 §13.4: calendar days including today; events after now do not count). `now` =
  `as_of_timestamp` (epoch seconds, >= 1e10 read as ms; must be an integer) if given, else `now_ms`.
  Only profiles are candidates (ids without a profile never appear, §13.6). Behaviours that `where`
  does not read do not filter anything. Paging rule (interface): with `behaviors`, no `as_of_timestamp`,
  `page > 0` and `total > 1000` -> error "request for page in uncached query for params".
- `filter_by_cohort` (`{"id": n}` or a bare integer n): the members are `cohorts[n]` (the caller computes
  membership, e.g. with cohorts.py); an unknown id is an error "unknown cohort n". `{"raw_cohort": d}`:
  the members are `raw_cohort(d)`, a hook the caller gives (cohorts.engage_by_cohort does; it raises
  EngageError for an invalid definition); without the hook it raises NotImplementedError.
  With `include_all_users` (true/false/1/0, any case; default true) a member
  without a profile is returned with `"$properties": {}` and evaluated by `where` against `{}`; `false`
  drops such members. `distinct_id`/`distinct_ids` intersect with the members. `include_all_users` is
  ignored without `filter_by_cohort`; so is `as_of_timestamp` without `behaviors`.
- Unknown members are ignored.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from zoneinfo import ZoneInfo

from . import expr
from ._common import Event, day_start_ms, local, prepare

__all__ = ["MAX_PAGE_SIZE", "UNCACHED_PAGE_ERROR", "EngageError", "engage"]

MAX_PAGE_SIZE = 1000
UNCACHED_LIMIT = 1000
MAX_BEHAVIORS = 50
UNCACHED_PAGE_ERROR = "request for page in uncached query for params"

_EXCLUSIVE = (
    ("distinct_id", "distinct_ids"),
    ("where", "selector"),
    ("behaviors", "filter_by_cohort"),
    ("filter_by_cohort", "data_group_id"),
    ("behaviors", "data_group_id"),
)
_WINDOW = re.compile(r"([1-9][0-9]*)d")
_INTEGER = re.compile(r"[+-]?[0-9]+")


class EngageError(Exception):
    """A request /engage must refuse (HTTP 400); `message` names the member(s) at fault."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EngageError) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)


@dataclass(frozen=True)
class _Behavior:
    name: str
    days: int
    selectors: tuple[tuple[str, str | None], ...]  # (event name, event expression or None)


# ------------------------------------------------------------------------------------------ parameters
def _member(params: Mapping[str, object], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text or None


def _integer(params: Mapping[str, object], name: str, default: int) -> int:
    text = _member(params, name)
    if text is None:
        return default
    if not _INTEGER.fullmatch(text.strip()):
        raise EngageError(f"{name} must be an integer, got {text!r}")
    return int(text)


def _json(params: Mapping[str, object], name: str) -> object:
    text = _member(params, name)
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        raise EngageError(f"{name} is not valid JSON: {text!r}") from None


def _json_list(params: Mapping[str, object], name: str) -> list | None:
    value = _json(params, name)
    if value is not None and not isinstance(value, list):
        raise EngageError(f"{name} must be a JSON array")
    return value


def _check_exclusive(params: Mapping[str, object]) -> None:
    for a, b in _EXCLUSIVE:
        if _member(params, a) is not None and _member(params, b) is not None:
            raise EngageError(f"{a} and {b} are mutually exclusive")


def _paging(params: Mapping[str, object]) -> tuple[int, int]:
    page = _integer(params, "page", 0)
    if page < 0:
        raise EngageError(f"page must be >= 0, got {page}")
    if page > 0 and _member(params, "session_id") is None:
        raise EngageError("session_id is required when page > 0")
    size = _integer(params, "page_size", MAX_PAGE_SIZE)
    if size < 1:
        raise EngageError(f"page_size must be >= 1, got {size}")
    return page, min(size, MAX_PAGE_SIZE)


def _id_text(value: object, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EngageError(f"{name} must hold strings or integers, got {value!r}")
    return str(value)


def _selected_ids(params: Mapping[str, object]) -> set[str] | None:
    one = _member(params, "distinct_id")
    if one is not None:
        return {one}
    many = _json_list(params, "distinct_ids")
    return None if many is None else {_id_text(v, "distinct_ids") for v in many}


def _output_properties(params: Mapping[str, object]) -> list[str] | None:
    names = _json_list(params, "output_properties")
    if names is not None and not all(isinstance(n, str) for n in names):
        raise EngageError("output_properties must be a JSON array of property names")
    return names


def _group_id_text(value: object) -> str:
    text = str(value).strip()
    return str(int(text)) if _INTEGER.fullmatch(text) else text


def _group_key(params: Mapping[str, object], group_keys: Mapping[object, str] | None) -> str | None:
    wanted = _member(params, "data_group_id")
    if wanted is None:
        return None
    known = {_group_id_text(k): v for k, v in (group_keys or {}).items()}
    key = known.get(_group_id_text(wanted))
    if key is None:
        raise EngageError(f"unknown data_group_id {wanted}")
    return key


def _flag(params: Mapping[str, object], name: str, default: bool) -> bool:
    text = _member(params, name)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false", "1", "0"):
        raise EngageError(f"{name} must be true or false, got {text!r}")
    return lowered in ("true", "1")


# ----------------------------------------------------------------------------------------- behaviours
def _event_selector(item: object) -> tuple[str, str | None]:
    if not isinstance(item, dict) or not isinstance(item.get("event"), str) or not item["event"]:
        raise EngageError("behaviors: every event selector needs a non-empty 'event'")
    selector = item.get("selector")
    if selector is not None and not isinstance(selector, str):
        raise EngageError("behaviors: an event selector's 'selector' must be a string")
    if selector:
        try:
            expr.parse(selector)
        except expr.ExprError as exc:
            raise EngageError(f"behaviors: bad selector {selector!r}: {exc}") from None
    return item["event"], selector or None


def _behavior(item: object) -> _Behavior:
    if not isinstance(item, dict):
        raise EngageError("behaviors must be a JSON array of objects")
    name, window, selectors = item.get("name"), item.get("window"), item.get("event_selectors")
    if not isinstance(name, str) or not name:
        raise EngageError("behaviors: every behaviour needs a non-empty 'name'")
    match = _WINDOW.fullmatch(window) if isinstance(window, str) else None
    if match is None:
        raise EngageError(f"behaviors: window of {name!r} must be '<N>d' with N >= 1, got {window!r}")
    if not isinstance(selectors, list) or not selectors:
        raise EngageError(f"behaviors: {name!r} needs a non-empty 'event_selectors' list")
    return _Behavior(name, int(match.group(1)), tuple(_event_selector(s) for s in selectors))


def _behaviors(params: Mapping[str, object]) -> list[_Behavior] | None:
    items = _json_list(params, "behaviors")
    if items is None:
        return None
    if len(items) > MAX_BEHAVIORS:
        raise EngageError(f"behaviors: at most {MAX_BEHAVIORS} behaviours")
    out = [_behavior(item) for item in items]
    names = [b.name for b in out]
    if len(set(names)) != len(names):
        raise EngageError("behaviors: names must be unique")
    return out


def _as_of_ms(params: Mapping[str, object], now_ms: int | None) -> int:
    text = _member(params, "as_of_timestamp")
    if text is None:
        if now_ms is None:
            raise ValueError("now_ms is required for a query with behaviors and no as_of_timestamp")
        return now_ms
    value = _integer(params, "as_of_timestamp", 0)
    return value if value >= 10**10 else value * 1000


def _event_matches(behavior: _Behavior, event: Event) -> bool:
    return any(event.name == name and expr.where_matches(selector, event) for name, selector in behavior.selectors)


def _behavior_counts(
    behaviors: list[_Behavior], events: Iterable[dict], ids: Iterable[str], now_ms: int, tz: str
) -> dict[str, dict[str, int]]:
    """Per id: behaviour name -> number of matching deduplicated events in the behaviour's window."""
    zone = ZoneInfo(tz)
    today = local(now_ms, zone).date()
    counts = {i: {b.name: 0 for b in behaviors} for i in ids}
    prepared = [e for e in prepare(events) if e.distinct_id in counts and e.time_ms <= now_ms]
    for behavior in behaviors:
        start = day_start_ms(today - timedelta(days=behavior.days - 1), zone)
        for event in prepared:
            if event.time_ms >= start and _event_matches(behavior, event):
                counts[event.distinct_id][behavior.name] += 1
    return counts


# -------------------------------------------------------------------------------------------- selection
def _where(params: Mapping[str, object], behaviors: list[_Behavior] | None) -> str | None:
    text = _member(params, "where") or _member(params, "selector")
    if text is None:
        return None
    try:
        used = expr.behavior_names(text)
    except expr.ExprError as exc:
        raise EngageError(f"where: {exc}") from None
    undefined = sorted(used - {b.name for b in behaviors or []})
    if undefined:
        raise EngageError(f"where: behaviors[{undefined[0]!r}] is not defined in behaviors")
    return text


def _properties_of(profile: object) -> dict:
    return profile.properties if hasattr(profile, "properties") else profile  # type: ignore[return-value]


def _collection(source: Mapping[tuple, object], project_id: int, group_key: str | None) -> dict[str, dict]:
    return {pid: _properties_of(p) for (proj, gk, pid), p in source.items() if proj == project_id and gk == group_key}


def _cohort_members(
    spec: object,
    cohorts: Mapping[int, Iterable[str]] | None,
    raw_cohort: Callable[[object], Iterable[str]] | None,
) -> Iterable[str]:
    if isinstance(spec, dict) and "raw_cohort" in spec:
        if raw_cohort is None:
            raise NotImplementedError("filter_by_cohort raw_cohort needs the raw_cohort hook (cohorts.py)")
        return raw_cohort(spec["raw_cohort"])
    cohort_id = spec.get("id") if isinstance(spec, dict) else spec
    if isinstance(cohort_id, bool) or not isinstance(cohort_id, int):
        raise EngageError('filter_by_cohort must be {"id": <cohort id>} or a cohort id')
    if cohorts is None or cohort_id not in cohorts:
        raise EngageError(f"unknown cohort {cohort_id}")
    return cohorts[cohort_id]


def _cohort_rows(
    params: Mapping[str, object],
    rows: dict[str, dict],
    cohorts: Mapping[int, Iterable[str]] | None,
    raw_cohort: Callable[[object], Iterable[str]] | None = None,
) -> dict[str, dict | None] | None:
    """Cohort members -> their properties (None without a profile); None when there is no filter_by_cohort."""
    spec = _json(params, "filter_by_cohort")
    if spec is None:
        return None
    members = {str(m) for m in _cohort_members(spec, cohorts, raw_cohort) if str(m)}
    keep_all = _flag(params, "include_all_users", True)
    return {m: rows.get(m) for m in members if keep_all or m in rows}


def _result(distinct_id: str, props: dict | None, output: list[str] | None) -> dict:
    props = props or {}
    shown = props if output is None else {k: props[k] for k in output if k in props}
    return {"$distinct_id": distinct_id, "$properties": copy.deepcopy(shown)}


def _answer(
    profiles: Mapping[tuple, object],
    params: Mapping[str, object],
    *,
    project_id: int,
    events: Iterable[dict] | None,
    now_ms: int | None,
    page_snapshot: Mapping[tuple, object] | None,
    group_keys: Mapping[object, str] | None,
    cohorts: Mapping[int, Iterable[str]] | None,
    tz: str,
    raw_cohort: Callable[[object], Iterable[str]] | None = None,
) -> dict:
    _check_exclusive(params)
    page, page_size = _paging(params)
    group_key = _group_key(params, group_keys)
    selected = _selected_ids(params)
    output = _output_properties(params)
    behaviors = _behaviors(params)
    where = _where(params, behaviors)
    rows = _collection(page_snapshot if page_snapshot is not None else profiles, project_id, group_key)
    members = _cohort_rows(params, rows, cohorts, raw_cohort)
    candidates: dict[str, dict | None] = dict(rows) if members is None else members
    if selected is not None:
        candidates = {i: p for i, p in candidates.items() if i in selected}
    counts: dict[str, dict[str, int]] = {}
    if behaviors is not None:
        counts = _behavior_counts(behaviors, events or [], candidates, _as_of_ms(params, now_ms), tz)
    matched = sorted(i for i, p in candidates.items() if expr.profile_where_matches(where, p or {}, counts.get(i)))
    if (
        behaviors is not None
        and _member(params, "as_of_timestamp") is None
        and page > 0
        and len(matched) > UNCACHED_LIMIT
    ):
        raise EngageError(UNCACHED_PAGE_ERROR)
    chunk = matched[page * page_size : (page + 1) * page_size]
    return {
        "page": page,
        "page_size": page_size,
        "results": [_result(i, candidates[i], output) for i in chunk],
        "status": "ok",
        "total": len(matched),
    }


def engage(
    profiles: Mapping[tuple, object],
    params: Mapping[str, object],
    *,
    project_id: int,
    events: Iterable[dict] | None = None,
    now_ms: int | None = None,
    page_snapshot: Mapping[tuple, object] | None = None,
    group_keys: Mapping[object, str] | None = None,
    cohorts: Mapping[int, Iterable[str]] | None = None,
    tz: str = "UTC",
    raw_cohort: Callable[[object], Iterable[str]] | None = None,
) -> dict | EngageError:
    """The /engage answer without `session_id`, or the EngageError the server must answer with a 400."""
    try:
        return _answer(
            profiles,
            params,
            project_id=project_id,
            events=events,
            now_ms=now_ms,
            page_snapshot=page_snapshot,
            group_keys=group_keys,
            cohorts=cohorts,
            tz=tz,
            raw_cohort=raw_cohort,
        )
    except EngageError as exc:
        return exc
