"""Cohort membership, computed on read by the warehouse (semantics-2 §13.4–13.5). Pure: `Sql`
plus bound values; every table is read through a scoped source.

One statement evaluates any number of a project's cohorts over one row per member of the
universe U (`universe_rows`):

    U (ids with an event in `known_ids` ∪ ids with a live profile)
      LEFT JOIN the live user profiles (properties; '' for an id without one)
      LEFT JOIN grouped scans of `events FINAL`: per id, every behaviour's count
                (`_Compiler.counts_scan`: which scans, and which rows each reads)

and one UInt8 column per dynamic cohort (`c<id>`), its selector compiled to SQL: a behaviour
leaf compares a count, a profile leaf is the expression `user["name"] <op> operand` of the
expression language in its profile context (cast by the leaf's `type`), a string selector is
compiled as it is, and a cohort leaf reads the referenced cohort's column of the same row
(`not in`: its negation — U minus the members) or, for a static cohort, the bound list.
Referenced cohorts are compiled once each, in reference order, and read by alias.

Decisions (those of the reference, tests/oracle/cohorts.py, unless noted):

* Behaviour counts are exact under unmerged duplicates (`FINAL`: the newest copy counts once
  and its properties decide a selector); `days` counts distinct local days. Several event
  selectors of one behaviour are OR-ed (an event matching two counts once).
* Windows are calendar days of the project's time zone ending at `now`, today included:
  `day` N from local midnight of today - N + 1, `week` N of today - 7N + 1, `month` N of the
  day after today - N months (clamped at month ends); `from_date`/`to_date` local days.
  Events after `now` never count.
* A profile leaf on a missing property: `==` and ordered comparisons false, `!=` true,
  `in` false, `not in` true, `defined` false (a JSON null is defined). A cast that does not
  apply (`number("abc")`) leaves the value undefined; a boolean cast of a missing value
  stays undefined (so `== false` is not true for an id without the property).
* Dynamic members always lie in U; a static cohort is exactly its list, also outside U
  (`count` of a static cohort is the length of its list).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, LiteralString
from zoneinfo import ZoneInfo

from footfall.shared.expr import check_expr, compile_where, parse_expr, reads_properties_text
from footfall.shared.schema.catalog import EVENTS, KNOWN_IDS, PROFILES
from footfall.shared.sql import Params, Scope, Sql, join, number, source, sql
from footfall.shared.timerange import local_midnight_utc

__all__ = [
    "MAX_REFERENCE_DEPTH",
    "CohortNotFoundError",
    "behaviour_counts_sql",
    "cohort_columns",
    "counts_sql",
    "members_sql",
    "window_start",
]

MAX_REFERENCE_DEPTH = 10
_UTC_MS = "DateTime64(3, 'UTC')"
_FLOOR = date(1970, 1, 2)  # no window reaches before the epoch's first whole day
_EPOCH = datetime(1970, 1, 1, tzinfo=ZoneInfo("UTC"))
_COUNT_TEMPLATES: dict[str, LiteralString] = {
    "==": "({} = {})",
    "!=": "({} != {})",
    ">": "({} > {})",
    ">=": "({} >= {})",
    "<": "({} < {})",
    "<=": "({} <= {})",
}
# Whether `0 <op> operand` holds (a count comparison at an id without counted events).
_ZERO_HOLDS: dict[str, Callable[[int], bool]] = {
    "==": lambda n: n == 0,
    "!=": lambda n: n != 0,
    ">": lambda n: n < 0,
    ">=": lambda n: n <= 0,
    "<": lambda n: n > 0,
    "<=": lambda n: n >= 0,
}
_CASTS = {"number": "number", "boolean": "boolean", "datetime": "datetime"}


# Evaluation of compiled expressions (footfall.shared.expr, whose values never raise, so both
# are safe). Eagerly (every branch at once) over the universe when several cohorts are
# evaluated: ClickHouse's lazy branches recompute shared JSON reads per branch (20 cohorts with
# profile leaves on 100k profiles and 10M events: 3.7 s lazily, 2.1 s eagerly). Lazily for one
# cohort (its profile leaves then run only for the ids its behaviour conditions let through:
# 325 ms against 385 ms). Statements that embed `members_sql` choose for themselves (the
# /engage snapshot ends with EAGER).
EAGER = sql("SETTINGS short_circuit_function_evaluation = 'disable'")


class CohortNotFoundError(KeyError):
    """A referenced cohort is not a cohort of the project."""


@dataclass(frozen=True)
class _Behaviour:
    index: int  # 1-based position in the shared counts array
    selectors: tuple[tuple[str, Any], ...]  # (event, selector: None | expression text | event tree)
    days: bool  # count distinct local days
    start: datetime | None  # None: no lower bound
    end: datetime  # exclusive


def window_start(today: date, unit: str, n: int) -> date | None:
    """The first local day of a `window` of `n` `unit`s ending `today` (None: unbounded)."""
    try:
        if unit == "day":
            first = today - timedelta(days=n - 1)
        elif unit == "week":
            first = today - timedelta(days=7 * n - 1)
        else:
            months = today.year * 12 + today.month - 1 - n
            year, month = divmod(months, 12)
            last_day = (date(year + (month + 1) // 12, (month + 1) % 12 + 1, 1) - timedelta(days=1)).day
            first = date(year, month + 1, min(today.day, last_day)) + timedelta(days=1)
    except (OverflowError, ValueError):
        return None
    return first if first >= _FLOOR else None


def _time_range(behaviour: Mapping[str, Any], now: datetime, tz: str) -> tuple[datetime | None, datetime]:
    """[start, end) of a behaviour's events (start None: unbounded); never after `now`."""
    end = now + timedelta(milliseconds=1)
    window = behaviour.get("window")
    if window is not None:
        first = window_start(now.astimezone(ZoneInfo(tz)).date(), window["unit"], int(window["value"]))
        return (None if first is None else local_midnight_utc(first, tz)), end
    first_day, last_day = date.fromisoformat(behaviour["from_date"]), date.fromisoformat(behaviour["to_date"])
    start = local_midnight_utc(first_day, tz) if first_day >= _FLOOR else None
    if last_day < date.max:
        end = min(end, local_midnight_utc(last_day + timedelta(days=1), tz))
    return start, end


def _selectors(count: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    listed = count.get("event_selectors") or [count["event_selector"]]
    return tuple((s["event"], s.get("selector")) for s in listed)


def _literal(value: Any) -> str:
    """A value as an expression-language literal (JSON: strings, numbers, booleans, null, lists)."""
    return json.dumps(value, ensure_ascii=False)


def _leaf_text(accessor: str, leaf: Mapping[str, Any]) -> str:
    """The expression of a profile (`user`) or event (`properties`) leaf."""
    prop = f"{accessor}[{_literal(leaf['value'])}]"
    operator, kind = leaf["operator"], leaf.get("type") or "string"
    if operator == "defined":
        return f"defined({prop})"
    if operator == "not defined":
        return f"not defined({prop})"
    cast = _CASTS.get(kind)
    value = f"{cast}({prop})" if cast else prop
    operand = _literal(leaf.get("operand"))
    operand = f"{cast}({operand})" if cast else operand
    if operator == "in":
        return f"(defined({prop}) and {operand} in {value})"
    if operator == "not in":
        return f"not (defined({prop}) and {operand} in {value})"
    if operator == "!=":
        return f"(not defined({prop}) or {value} != {operand})"
    return f"(defined({prop}) and {value} {operator} {operand})"


def _event_tree_text(node: Mapping[str, Any]) -> str:
    if "children" in node:
        glue = f" {node['operator']} "
        return "(" + glue.join(_event_tree_text(child) for child in node["children"]) + ")"
    return _leaf_text("properties", node)


class _Compiler:
    """The behaviours and cohort columns of one membership statement."""

    def __init__(self, cohorts: Mapping[int, Mapping[str, Any]], now: datetime, tz: str, binds: Params) -> None:
        self.cohorts = cohorts
        self.now = now
        self.tz = tz
        self.binds = binds
        self.behaviours: list[_Behaviour] = []
        self.columns: dict[int, Sql] = {}  # cohort id -> its compiled condition, in dependency order
        # behaviour index -> (a condition on plain counts, the plain behaviours it reads): whose events to scan
        self.needs: dict[int, tuple[Sql, frozenset[_Behaviour]]] = {}
        self._open: list[int] = []

    def cohort(self, cohort_id: int) -> Sql:
        """The name of the column holding membership of dynamic cohort `cohort_id`."""
        if cohort_id not in self.columns:
            if cohort_id in self._open or len(self._open) > MAX_REFERENCE_DEPTH:
                raise ValueError(f"cohort {cohort_id} is part of a reference cycle or too deep a chain")
            definition = self.cohorts.get(cohort_id)
            if definition is None:
                raise CohortNotFoundError(cohort_id)
            self._open.append(cohort_id)
            try:
                keys: dict[str, Sql] = {}
                entries: dict[str, _Behaviour] = {}
                for key, b in (definition.get("behaviors") or {}).items():
                    keys[key] = self.behaviour(b)
                    entries[key] = self.behaviours[-1]
                self.columns[cohort_id] = self._selector(definition["selector"], keys)
                self._restrict(definition["selector"], keys, entries)
            finally:
                self._open.pop()
        return _column(cohort_id)

    def _restrict(self, selector: Any, keys: Mapping[str, Sql], entries: Mapping[str, _Behaviour]) -> None:
        """Note the condition on the cohort's plain behaviours (those without event selectors)
        that every member meets (`_need`), for its behaviours with event selectors: their scans
        then read the events of the ids that meet it only. Not when ids without any counted
        event may meet it (those are not in the plain scan), nor when it is always true, nor
        for selectors that read hot property columns only (`footfall.shared.schema.hot`):
        those columns are cheap to read whole, and a second scan of the plain behaviours for
        the ids costs more than it saves (measured on the cohort benchmark)."""
        need, at_zero = self._need(selector, keys, entries)
        if need is None or at_zero:
            return
        read = frozenset(entry for entry in entries.values() if _plain(entry))
        for entry in entries.values():
            if _reads_properties(entry):
                self.needs[entry.index] = (need, read)

    def _need(self, node: Any, keys: Mapping[str, Sql], entries: Mapping[str, _Behaviour]) -> tuple[Sql | None, bool]:
        """A necessary condition of selector `node` on plain behaviour counts alone (None: none
        known, i.e. true) and whether it holds when every count is 0. A member meets it whatever
        the other leaves (profile properties, references, behaviours with event selectors,
        expression text) are: those leaves count as true."""
        if isinstance(node, str):
            return None, True
        if "children" in node:
            parts = [self._need(child, keys, entries) for child in node["children"]]
            if node["operator"] == "and":
                known = [need for need, _ in parts if need is not None]
                at_zero = all(zero for _, zero in parts)
                return (sql("({})", join(" AND ", known)) if known else None), at_zero
            if any(need is None for need, _ in parts):
                return None, True
            return sql("({})", join(" OR ", [need for need, _ in parts if need is not None])), any(
                zero for _, zero in parts
            )
        if node["property"] != "behaviors" or not _plain(entries[node["value"]]):
            return None, True
        operator, operand = node["operator"], int(node["operand"])
        template = _COUNT_TEMPLATES[operator]
        return sql(template, keys[node["value"]], self.binds.add(operand, "Int64")), _ZERO_HOLDS[operator](operand)

    def behaviour(self, behaviour: Mapping[str, Any]) -> Sql:
        """Count `behaviour` (a canonical entry) in the shared scan: its count's expression."""
        start, end = _time_range(behaviour, self.now, self.tz)
        count = behaviour["count"]
        entry = _Behaviour(len(self.behaviours) + 1, _selectors(count), count.get("type") == "days", start, end)
        self.behaviours.append(entry)
        return sql("arrayElement(behaviour_counts, {})", number(entry.index))

    def _selector(self, node: Any, keys: Mapping[str, Sql]) -> Sql:
        if isinstance(node, str):
            typed = check_expr(parse_expr(node), context="profiles", behaviors=keys)
            return compile_where(typed, self.binds, properties_of=PROFILES, counts=keys)
        if "children" in node:
            parts = [self._selector(child, keys) for child in node["children"]]
            return sql("({})", join(" AND ", parts) if node["operator"] == "and" else join(" OR ", parts))
        kind = node["property"]
        if kind == "behaviors":
            template = _COUNT_TEMPLATES[node["operator"]]
            return sql(template, keys[node["value"]], self.binds.add(int(node["operand"]), "Int64"))
        if kind == "user":
            typed = check_expr(parse_expr(_leaf_text("user", node)), context="profiles")
            return compile_where(typed, self.binds, properties_of=PROFILES)
        inside = self._member_of(int(node["value"]))
        return inside if node["operator"] == "in" else sql("NOT {}", inside)

    def _member_of(self, cohort_id: int) -> Sql:
        definition = self.cohorts.get(cohort_id)
        if definition is None:
            raise CohortNotFoundError(cohort_id)
        if definition.get("is_static") or definition.get("distinct_ids") is not None:
            listed = self.binds.add(list(definition.get("distinct_ids") or []), "Array(String)")
            return sql("has({}, distinct_id)", listed)
        return self.cohort(cohort_id)

    def counts_scan(self, project_id: int, ids: Sequence[str] | None = None) -> Sql:
        """Per id with any counted event (of `ids` when given): `behaviour_counts`, one count
        per behaviour.

        Reading `properties` dominates a scan (decompressing it costs several times what the
        counting does), so only the events an event selector looks at read it: behaviours
        without selectors share one scan that never touches `properties`; those with selectors
        are scanned per set of event names, so `properties` is read for those events' rows
        alone. Each scan yields the whole count array (0 for the behaviours of other scans), and
        the scans' arrays are summed per id.

        A behaviour with event selectors whose cohort needs a condition on its plain behaviours
        (`_restrict`; e.g. `buys >= 2 AND (chrome >= 1 OR plan == "pro")`) is scanned for the
        ids that meet it only (found by a scan of the plain behaviours the condition reads): its
        count is exact for them and 0 for the others, for which the cohort's condition is false
        whatever it is."""
        plain = [b for b in self.behaviours if _plain(b)]
        # (scanned for the ids that meet their needs only?, event names) -> behaviours
        groups: dict[tuple[bool, tuple[str, ...]], list[_Behaviour]] = {(False, ()): plain} if plain else {}
        for b in self.behaviours:
            if b not in plain:
                key = (bool(plain) and b.index in self.needs, tuple(sorted({event for event, _ in b.selectors})))
                groups.setdefault(key, []).append(b)
        scans = []
        for (restricted, _), members in groups.items():
            wanted: Sql | None = None
            if restricted:
                needs = [self.needs[b.index] for b in members]
                read = sorted({b for _, behaviours in needs for b in behaviours}, key=lambda b: b.index)
                wanted = sql(
                    "distinct_id IN (SELECT counted_id FROM ({}) WHERE ({}))",
                    self._scan(project_id, read, ids),
                    join(" OR ", [need for need, _ in needs]),
                )
            scans.append(self._scan(project_id, members, ids, wanted))
        if len(scans) == 1:
            return scans[0]
        return sql(
            "SELECT counted_id, sumForEach(behaviour_counts) AS behaviour_counts FROM ({}) GROUP BY counted_id",
            join(" UNION ALL ", scans),
        )

    def _scan(
        self, project_id: int, members: Sequence[_Behaviour], ids: Sequence[str] | None, wanted: Sql | None = None
    ) -> Sql:
        """One grouped scan of the events `members` count: the whole count array per id (of the
        ids `wanted` selects, when given)."""
        starts = [b.start for b in members]
        earliest = _EPOCH if any(s is None for s in starts) else min(s for s in starts if s is not None)
        latest = max(b.end for b in members)
        keys = sql("({}) AND distinct_id != ''", self._rows(members))
        if ids is not None:
            keys = sql("{} AND distinct_id IN {}", keys, self.binds.add(list(ids), "Array(String)"))
        if wanted is not None:
            keys = sql("{} AND {}", keys, wanted)
        columns = [self._count_column(b) if b in members else sql("toUInt64(0)") for b in self.behaviours]
        return sql(
            "SELECT distinct_id AS counted_id, [{}] AS behaviour_counts FROM {} GROUP BY distinct_id",
            join(", ", columns),
            source(EVENTS, Scope(project_id, earliest, latest), self.binds, final=True, keys=keys),
        )

    def _rows(self, members: Sequence[_Behaviour]) -> Sql:
        """The rows `members` may count, as key conditions (before the FINAL merge: every copy
        of a duplicate has the same event and time): their event names in their windows, per
        window. A behaviour of a few days on one event no longer reads that event's rows over
        the widest window of the scan."""
        windows: dict[tuple[datetime | None, datetime], set[str]] = {}
        for b in members:
            windows.setdefault((b.start, b.end), set()).update(event for event, _ in b.selectors)
        parts = []
        for (start, end), names in windows.items():
            when = sql("time < {}", self.binds.add(end, _UTC_MS))
            if start is not None:
                when = sql("time >= {} AND {}", self.binds.add(start, _UTC_MS), when)
            parts.append(sql("({} AND {})", _names(sorted(names), self.binds), when))
        return sql("({})", join(" OR ", parts))

    def _count_column(self, b: _Behaviour) -> Sql:
        matches = []
        for event, selector in b.selectors:
            cond = sql("event = {}", self.binds.add(event, "String"))
            if selector is not None:
                text = selector if isinstance(selector, str) else _event_tree_text(selector)
                cond = sql("({} AND {})", cond, compile_where(check_expr(parse_expr(text)), self.binds))
            matches.append(cond)
        when = sql("time < {}", self.binds.add(b.end, _UTC_MS))
        if b.start is not None:
            when = sql("time >= {} AND {}", self.binds.add(b.start, _UTC_MS), when)
        hit = sql("({} AND ({}))", when, join(" OR ", matches))
        if b.days:
            return sql("toUInt64(uniqExactIf(toDate(time, {}), {}))", self.binds.add(self.tz, "String"), hit)
        return sql("countIf({})", hit)


def _plain(b: _Behaviour) -> bool:
    """A behaviour without event selectors (counted without reading `properties`)."""
    return all(selector is None for _, selector in b.selectors)


def _reads_properties(b: _Behaviour) -> bool:
    """Whether a behaviour's event selectors read the `properties` text (JSON parsed per row,
    the cost that dominates a scan) rather than hot columns alone (plain behaviours: no)."""
    for _, selector in b.selectors:
        if selector is not None:
            text = selector if isinstance(selector, str) else _event_tree_text(selector)
            if reads_properties_text(check_expr(parse_expr(text))):
                return True
    return False


def _column(cohort_id: int) -> Sql:
    return sql("c{}", number(cohort_id))


def _names(names: Sequence[str], binds: Params) -> Sql:
    if not names:
        return sql("0")
    return sql("event IN {}", binds.add(list(names), "Array(String)"))


def _universe(project_id: int, binds: Params) -> Sql:
    """Every id with an event (`known_ids`) or a live user profile, once."""
    scope = Scope(project_id)
    return sql(
        "SELECT DISTINCT distinct_id FROM (SELECT distinct_id FROM {} UNION ALL "
        "SELECT profile_id AS distinct_id FROM {})",
        source(KNOWN_IDS, scope, binds),
        source(PROFILES, scope, binds, final=True, keys=sql("group_key = ''"), where=sql("deleted = 0")),
    )


def behaviour_counts_sql(
    behaviours: Sequence[Mapping[str, Any]],
    project_id: int,
    tz: str,
    now: datetime,
    binds: Params,
    ids: Sequence[str] | None = None,
) -> Sql:
    """`SELECT counted_id, behaviour_counts`: per id with a counted event (of `ids` when given)
    the counts of `behaviours` (canonical entries, at least one), in order. The evaluator of
    cohort behaviours, for /engage `behaviors` as well."""
    if not behaviours:
        raise ValueError("at least one behaviour")
    compiler = _Compiler({}, now, tz, binds)
    for behaviour in behaviours:
        compiler.behaviour(behaviour)
    return compiler.counts_scan(project_id, ids)


def cohort_columns(
    cohort_ids: Sequence[int],
    cohorts: Mapping[int, Mapping[str, Any]],
    project_id: int,
    tz: str,
    now: datetime,
    binds: Params,
) -> Sql:
    """`SELECT distinct_id, properties, has_profile, c<id>…` over U: one row per universe member,
    its profile properties ('' without a profile) and one UInt8 membership column per dynamic cohort of
    `cohort_ids` (and per cohort they reference). Static cohorts get no column."""
    compiler = _Compiler(cohorts, now, tz, binds)
    for cohort_id in cohort_ids:
        definition = cohorts.get(cohort_id)
        if definition is None:
            raise CohortNotFoundError(cohort_id)
        if not (definition.get("is_static") or definition.get("distinct_ids") is not None):
            compiler.cohort(cohort_id)
    columns = [sql("{} AS {}", condition, _column(cid)) for cid, condition in compiler.columns.items()]
    profiles = source(
        PROFILES, Scope(project_id), binds, final=True, keys=sql("group_key = ''"), where=sql("deleted = 0")
    )
    counts = (
        sql("LEFT JOIN ({}) AS bh ON bh.counted_id = u.distinct_id", compiler.counts_scan(project_id))
        if compiler.behaviours
        else sql("")
    )
    behaviour_counts = sql("bh.behaviour_counts AS behaviour_counts, ") if compiler.behaviours else sql("")
    return sql(
        "SELECT u.distinct_id AS distinct_id, pr.properties AS properties, pr.profile_id != '' AS has_profile, {}{} "
        "FROM ({}) AS u LEFT JOIN (SELECT profile_id, properties FROM {}) AS pr ON pr.profile_id = u.distinct_id {}",
        behaviour_counts,
        join(", ", columns) if columns else sql("1 AS _none"),
        _universe(project_id, binds),
        profiles,
        counts,
    )


def counts_sql(
    cohort_ids: Sequence[int],
    cohorts: Mapping[int, Mapping[str, Any]],
    project_id: int,
    tz: str,
    now: datetime,
    binds: Params,
) -> Sql:
    """One row: the member count of each dynamic cohort of `cohort_ids`, in that order (one scan
    for all of them). Static cohorts are counted by their list, not here."""
    dynamic = [
        cid for cid in cohort_ids if not (cohorts[cid].get("is_static") or cohorts[cid].get("distinct_ids") is not None)
    ]
    if not dynamic:
        return sql("SELECT 0")
    table = cohort_columns(dynamic, cohorts, project_id, tz, now, binds)
    counts = join(", ", [sql("countIf({})", _column(cid)) for cid in dynamic])
    # One cohort: lazily, so its profile leaves run only for ids its behaviour conditions let
    # through; several: eagerly (their shared JSON reads once). See EAGER.
    return sql("SELECT {} FROM ({}) {}", counts, table, EAGER if len(dynamic) > 1 else sql(""))


def members_sql(
    cohort_id: int, cohorts: Mapping[int, Mapping[str, Any]], project_id: int, tz: str, now: datetime, binds: Params
) -> Sql:
    """`SELECT distinct_id, properties, has_profile` of the members of one cohort (properties ''
    for a member without a profile). A static cohort's members come from its list."""
    definition = cohorts.get(cohort_id)
    if definition is None:
        raise CohortNotFoundError(cohort_id)
    if definition.get("is_static") or definition.get("distinct_ids") is not None:
        profiles = source(
            PROFILES, Scope(project_id), binds, final=True, keys=sql("group_key = ''"), where=sql("deleted = 0")
        )
        return sql(
            "SELECT m.distinct_id AS distinct_id, pr.properties AS properties, pr.profile_id != '' AS has_profile FROM "
            "(SELECT arrayJoin({}) AS distinct_id) AS m LEFT JOIN (SELECT profile_id, properties FROM {}) AS pr "
            "ON pr.profile_id = m.distinct_id",
            binds.add(list(definition.get("distinct_ids") or []), "Array(String)"),
            profiles,
        )
    table = cohort_columns([cohort_id], cohorts, project_id, tz, now, binds)
    return sql("SELECT distinct_id, properties, has_profile FROM ({}) WHERE {}", table, _column(cohort_id))
