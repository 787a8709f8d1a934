"""The /engage queries (pure: `Sql` plus bound values). Tables are read only through scoped sources.

* `members`: the profiles of one collection (`group_key`) that the request selects, as
  `(profile_id, properties)` rows: `profiles FINAL` (the newest version; deleted ones
  dropped after the merge) with the key conditions (group key, listed ids) in PREWHERE,
  and `where` compiled in the profile context. With behaviours that `where` reads, the
  per-user counts are joined from the cohort behaviour evaluator
  (`footfall.shared.cohorts.membership.behaviour_counts_sql`: one grouped scan of
  `events FINAL` over the widest window, exact under unmerged duplicates). With a cohort,
  the members come from `membership.members_sql`.
* `probe`: the first page of members and one more (an ordered read that stops early):
  whether the result fits on one page, and if so the whole answer.
* `snapshot`: one `INSERT … SELECT` of the members' ranks into `engage_sessions`, which
  writes nothing unless there are more than `more_than` members.
* `session_size`, `session_page`, `current`: a snapshot's size, one page of its members,
  and their current properties (two statements, so that every read shows in a plan: an
  `IN (subquery)` set is built outside the plan's index analysis).
* `group_keys`: the project's group keys (for `data_group_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from footfall.services.query.reports._common import Binds, Query
from footfall.services.query.reports.engage.request import EngageRequest
from footfall.shared.cohorts.membership import behaviour_counts_sql, members_sql
from footfall.shared.expr import compile_where
from footfall.shared.schema.catalog import ENGAGE_SESSIONS, PROFILES
from footfall.shared.sql import Scope, Sql, join, number, source, sql
from footfall.shared.sql.ident import insert_into

__all__ = [
    "current",
    "group_keys",
    "members",
    "probe",
    "session_page",
    "session_size",
    "snapshot",
]

_UTC_MS = "DateTime64(3, 'UTC')"
_SNAPSHOT_COLUMNS = ("project_id", "session_id", "group_key", "position", "profile_id", "created_at")
# Statements that evaluate `where` evaluate every branch of the compiled expression
# (`short_circuit_function_evaluation = 'disable'`): no component of a compiled value can
# raise (footfall.shared.expr.values), so this is safe, and ClickHouse's lazy branches
# recompute the shared sub-expressions (the JSON reads) per branch: on 1M profiles a
# `datetime(...)` comparison took 8.4 s lazily and 0.7 s eagerly, `number(...) * 2 > 50`
# 4.5 s and 1.1 s, a string equality 362 and 268 ms (results identical on every conformance
# case and on fuzzed expressions).
_EAGER = sql("SETTINGS short_circuit_function_evaluation = 'disable'")
# Ranking needs every member anyway: reading `profiles FINAL` in key order (for the window's
# ORDER BY) would only serialise the scan; in parallel streams it takes about half the time.
_PARALLEL = sql(
    "SETTINGS short_circuit_function_evaluation = 'disable', "
    "optimize_read_in_order = 0, optimize_read_in_window_order = 0"
)


def _profiles(project_id: int, group_key: str, ids: Sql | None, where: Sql | None, binds: Binds) -> Sql:
    """`profiles FINAL` of one collection: key conditions before the merge, the rest after it."""
    keys = sql("group_key = {}", binds.add(group_key, "String"))
    if ids is not None:
        keys = sql("{} AND profile_id IN {}", keys, ids)
    after = sql("deleted = 0") if where is None else sql("deleted = 0 AND ({})", where)
    return source(PROFILES, Scope(project_id), binds, final=True, keys=keys, where=after)


def _listed(ids: Sequence[str] | None, binds: Binds) -> Sql | None:
    return None if ids is None else binds.add(list(ids), "Array(String)")


def _cohort_members(req: EngageRequest, project_id: int, now: datetime, tz: str, binds: Binds) -> Sql:
    """The members of the request's cohort that it selects: with `include_all_users` members
    without a profile too (their properties `{}`, which `where` reads like any profile's)."""
    membership = req.membership
    if membership is None:
        raise AssertionError("invariant: a resolved cohort")
    conditions = [] if membership.keep_all else [sql("has_profile")]
    if req.distinct_ids is not None:
        conditions.append(sql("profile_id IN {}", binds.add(list(req.distinct_ids), "Array(String)")))
    if req.where is not None:
        conditions.append(compile_where(req.where, binds, properties_of=PROFILES))
    cohort = members_sql(membership.cohort_id, membership.definitions, project_id, tz, now, binds)
    return sql(
        "SELECT {} AS project_id, '' AS group_key, profile_id, properties FROM ("
        "SELECT distinct_id AS profile_id, if(has_profile, properties, {}) AS properties, has_profile FROM ({})) "
        "WHERE {}",
        binds.add(project_id, "UInt64"),
        binds.add("{}", "String"),
        cohort,
        join(" AND ", conditions) if conditions else sql("1"),
    )


def members(req: EngageRequest, project_id: int, group_key: str, now: datetime, tz: str, binds: Binds) -> Sql:
    """`SELECT project_id, group_key, profile_id, properties` of every profile the request
    selects (the key columns too, so that an ordered read can follow the table's order)."""
    if req.membership is not None:
        return _cohort_members(req, project_id, now, tz, binds)
    ids = _listed(req.distinct_ids, binds)
    counted = req.counted
    if not counted:
        where = compile_where(req.where, binds, properties_of=PROFILES) if req.where is not None else None
        return sql(
            "SELECT project_id, group_key, profile_id, properties FROM {}",
            _profiles(project_id, group_key, ids, where, binds),
        )
    if req.where is None:
        raise AssertionError("invariant: counted behaviours come from a where")
    counts = {b.name: sql("arrayElement(behaviour_counts, {})", number(i + 1)) for i, b in enumerate(counted)}
    where = compile_where(req.where, binds, properties_of=PROFILES, counts=counts)
    return sql(
        "SELECT pr.project_id AS project_id, pr.group_key AS group_key, pr.profile_id AS profile_id, "
        "pr.properties AS properties FROM (SELECT project_id, group_key, profile_id, properties FROM {}) AS pr "
        "LEFT JOIN ({}) AS bh ON pr.profile_id = bh.counted_id WHERE {}",
        _profiles(project_id, group_key, ids, None, binds),
        behaviour_counts_sql([b.entry() for b in counted], project_id, tz, now, binds, req.distinct_ids),
        where,
    )


def snapshot(
    req: EngageRequest,
    project_id: int,
    group_key: str,
    now: datetime,
    tz: str,
    session_id: str,
    created: datetime,
    *,
    more_than: int,
) -> Query:
    """Rank the members by profile id into `engage_sessions`, only when there are more than
    `more_than` of them (one statement: the count and the ranks come from the same scan)."""
    b = Binds()
    text = sql(
        "{} SELECT {}, {}, {}, toUInt32(position), profile_id, {} FROM ("
        "SELECT profile_id, row_number() OVER (ORDER BY profile_id) - 1 AS position, "
        "count() OVER () AS matched FROM ({})) WHERE matched > {} {}",
        insert_into(ENGAGE_SESSIONS, _SNAPSHOT_COLUMNS),
        b.add(project_id, "UInt64"),
        b.add(session_id, "String"),
        b.add(group_key, "String"),
        b.add(created, _UTC_MS),
        members(req, project_id, group_key, now, tz, b),
        b.add(more_than, "UInt32"),
        _PARALLEL,
    )
    return Query(text, b)


def _session(project_id: int, session_id: str, binds: Binds, positions: tuple[int, int] | None = None) -> Sql:
    keys = sql("session_id = {}", binds.add(session_id, "String"))
    if positions is not None:
        start, end = positions
        keys = sql(
            "{} AND position >= {} AND position < {}", keys, binds.add(start, "UInt32"), binds.add(end, "UInt32")
        )
    return source(ENGAGE_SESSIONS, Scope(project_id), binds, keys=keys)


def session_size(project_id: int, session_id: str) -> Query:
    """(members, collection) of a snapshot; 0 members when there is none under that id."""
    b = Binds()
    return Query(sql("SELECT count(), any(group_key) FROM {}", _session(project_id, session_id, b)), b)


def session_page(project_id: int, session_id: str, start: int, end: int) -> Query:
    """Positions [start, end) of a snapshot: `(position, profile_id)` rows in order."""
    b = Binds()
    text = sql(
        "SELECT position, profile_id FROM {} ORDER BY position", _session(project_id, session_id, b, (start, end))
    )
    return Query(text, b)


def current(project_id: int, group_key: str, ids: Sequence[str]) -> Query:
    """The current properties of the listed profiles (at most a page of them; deleted ones absent)."""
    b = Binds()
    text = sql(
        "SELECT profile_id, properties FROM {}",
        _profiles(project_id, group_key, b.add(list(ids), "Array(String)"), None, b),
    )
    return Query(text, b)


def probe(req: EngageRequest, project_id: int, group_key: str, now: datetime, tz: str) -> Query:
    """The first page of members and one more, if there is one: `(profile_id, properties)` in
    profile-id order. Ordered by the table's whole sorting key (the project and the group key
    are fixed), so ClickHouse reads `profiles` in order and stops once it has them: cheap when
    the result is large, one scan when it fits on a page."""
    b = Binds()
    text = sql(
        "SELECT profile_id, properties FROM ({}) ORDER BY project_id, group_key, profile_id LIMIT {} {}",
        members(req, project_id, group_key, now, tz, b),
        b.add(req.page_size + 1, "UInt32"),
        _EAGER,
    )
    return Query(text, b)


def group_keys(project_id: int) -> Query:
    """The group keys that the project's group profiles use."""
    b = Binds()
    keys = sql("group_key != ''")
    return Query(sql("SELECT DISTINCT group_key FROM {}", source(PROFILES, Scope(project_id), b, keys=keys)), b)
