"""`/engage`: query user or group profiles (semantics.md §1.12, §4; semantics-2.md §13.4–13.6).

Members (every one optional; an empty value counts as absent):

* `distinct_id` (one id) or `distinct_ids` (a JSON array of strings or integers, compared
  as text; duplicates collapse; `[]` selects nothing; at most 2,000 ids).
* `where` (legacy alias `selector`): an expression over the profile (the expression
  language in its profile context, `footfall.shared.expr`): `properties["x"]` and
  `user["x"]` read the profile's properties, no key is special, `behaviors["name"]` is the
  count of a behaviour defined in `behaviors`; `event[...]` or an undefined behaviour is a
  400. A profile is kept only when the expression is boolean true.
* `output_properties`: a JSON array of names; `$properties` keeps those the profile has,
  in the array's order (`[]` gives `{}`).
* `data_group_id`: the group profiles of the group key whose id
  (`footfall.shared.profiles.groups.data_group_id`) it is; an id no group key of the
  project has is a 400. `$distinct_id` is then the group id.
* `behaviors`: at most 50 `{"name", "window": "<N>d", "event_selectors": [{"event",
  "selector"?}]}` (N from 1 to 36,500; names unique; `selector` an event expression). A
  behaviour counts a user's deduplicated events (`events FINAL`: the newest copy of a
  duplicate, once) whose name and selector match ANY of its selectors, with a time in
  [local midnight of (today - N + 1 days), now] in the project's time zone (calendar days
  including today; events after now never count). `now` is `as_of_timestamp` (epoch
  seconds, or milliseconds from 1e10 on) or the request time. Behaviours that `where`
  does not read filter nothing (and are not computed). Only profiles are returned.
* `filter_by_cohort`: `{"id": n}` or `n`, a saved cohort of the project (another project's,
  or a deleted one, is a 400 "unknown cohort n"), or `{"raw_cohort": definition}`, an unsaved
  definition (`footfall.shared.cohorts.definitions`, references to saved cohorts allowed; an
  invalid one is a 400 naming the member at fault). The candidates are the cohort's members
  at the request time (`footfall.shared.cohorts.membership`), intersected with
  `distinct_id(s)`; `where` applies to them. `include_all_users` (true/false/1/0, any case;
  default true): members without a user profile are returned with `$properties` `{}` (and
  `where` reads `{}` for them); false drops them.
* Paging: `page` (0-based, default 0), `page_size` (default 1000; a larger value is capped
  at 1000 and the answer echoes the effective size; 0, negatives and non-integers are a
  400), `session_id` (required when `page` > 0).

Mutually exclusive, a 400 naming both: `distinct_id`/`distinct_ids`, `where`/`selector`,
`behaviors`/`filter_by_cohort`, `filter_by_cohort`/`data_group_id` (no group cohorts),
`behaviors`/`data_group_id` (behaviours count users' events). The checks run in the
order of the oracle (tests/oracle/engage.py), so a request with several faults is
refused for the same one.

Answer: `{page, page_size, results, session_id, status: "ok", total}`; results
`{"$distinct_id", "$properties"}` ascending by `$distinct_id` in byte (= code point)
order; `total` is the full number of matches on every page; a page past the end has
`results: []`.

Paging sessions (`session.py`). Page 0 fixes the membership and order of its session; the
session's later pages are addressable in any order (mixpanel-utils fetches pages 1..n
concurrently from `total`), by any process, and never shift. When the result has more
than one page, page 0 writes the ordered member list into the warehouse
(`engage_sessions`, one `INSERT … SELECT`, never through Python) and every page, page 0
included, is read from it. Decisions where the interface is silent:

* Values are current: each page reads its profiles' properties when it is read, so a
  profile changed since page 0 shows its new properties, and stays in the session even if
  it no longer matches `where` (the oracle's `page_snapshot` would show the page-0 values;
  the interface asks for the current ones). A profile deleted since page 0 is left out of
  its page (deleted profiles are never returned), so that page holds fewer results; the
  other positions do not move. A profile created since is not in the session.
* Later pages take membership and collection from the session; their other members are
  checked as on page 0 but select nothing new (`output_properties` applies per page).
* Sessions last 24 hours; an unknown, malformed or expired `session_id` on a later page is
  a 400 that says so. A single-page result found by the probe stores nothing: its id carries its total, and
  its later pages are empty (a later page that a smaller `page_size` would fill is a 400
  asking for page 0 again).
* With `behaviors`, no `as_of_timestamp`, `page` > 0 and `total` > 1000: the documented
  400 "request for page in uncached query for params".

Cost: without behaviour counts or a cohort, page 0 first probes for one page plus one
member, reading `profiles` in its key order and stopping there, so a large result costs
little here and a small one is answered by this one scan (nothing stored); only a result of
more than one page is then ranked into the snapshot (one more scan). If profiles change so
that the probe and the snapshot disagree, page 0 tries again; after three tries it is a 503
to retry. With behaviour counts in `where`, or a cohort, every member has to be computed
anyway: page 0 ranks them into a snapshot in one statement whatever their number and reads
its page from it like a later page (so even a one-page result gets a snapshot session). A
cohort member without a profile stays in its session and shows `{}` on the later pages that
keep such members (`include_all_users` as the later page's request says).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.params import Params
from footfall.services.query.reports import _common
from footfall.services.query.reports.engage import query
from footfall.services.query.reports.engage.request import EngageRequest, Membership, include_all_users, parse_request
from footfall.services.query.reports.engage.session import (
    Session,
    parse_session,
    session_clock,
    single_page_session,
    snapshot_session,
    unknown,
)
from footfall.services.query.reports.engage.shape import answer, result
from footfall.shared.cohorts import CohortDefinitionError, WarehouseCohortStore, parse_raw_definition
from footfall.shared.errors import ParamError, UnavailableError
from footfall.shared.profiles.groups import data_group_id

__all__ = ["UNCACHED_LIMIT", "UNCACHED_PAGE_ERROR", "EngageRequest", "continues_session", "engage", "parse_request"]

UNCACHED_LIMIT = 1000
UNCACHED_PAGE_ERROR = "request for page in uncached query for params"
_ATTEMPTS = 3  # page 0 retries when profiles change between its probe and its snapshot
RAW_COHORT = 0  # the id a `raw_cohort` definition goes by (saved cohorts' ids start at 1)


async def _collection(ctx: QueryContext, req: EngageRequest) -> str:
    """The group key of the profiles asked for: '' (users) or the one `data_group_id` names."""
    if req.data_group_id is None:
        return ""
    for (group_key,) in await query.group_keys(ctx.project_id).run(ctx):
        if data_group_id(group_key) == req.data_group_id:
            return str(group_key)
    raise ParamError(f"Error in data_group_id: unknown data_group_id {req.data_group_id}")


async def _session_page(
    ctx: QueryContext,
    req: EngageRequest,
    session_id: str,
    group_key: str,
    total: int,
    probed: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One page of a snapshot with its profiles' current properties (`probed`: properties
    page 0's probe has just read, used when they are exactly this page's members)."""
    start = req.page * req.page_size
    if start >= total:
        return answer(req, session_id, total, [])
    page = await query.session_page(ctx.project_id, session_id, start, start + req.page_size).run(ctx)
    members = [str(pid) for _, pid in page]
    if probed is not None and list(probed) == members:
        props = probed
    else:
        props = dict(await query.current(ctx.project_id, group_key, members).run(ctx)) if members else {}
    if req.cohort is not None and include_all_users(req.cohort.include_all_users):
        # Cohort members need no profile: one without (or with one deleted since) has `{}`.
        results = [result(pid, props.get(pid, "{}"), req.output_properties) for pid in members]
    else:
        results = [result(pid, props[pid], req.output_properties) for pid in members if pid in props]
    return answer(req, session_id, total, results)


async def _membership(ctx: QueryContext, req: EngageRequest) -> Membership | None:
    """`filter_by_cohort` resolved against the project's cohorts: an unknown cohort, or an
    invalid raw definition, is a 400; then `include_all_users` is read."""
    if req.cohort is None:
        return None
    listed = await ctx.warehouse.run(WarehouseCohortStore(ctx.warehouse).list, ctx.project_id)
    saved = {c.id: c.definition for c in listed}
    definitions: dict[int, Mapping[str, Any]] = {cid: d.canonical() for cid, d in saved.items()}
    if req.cohort.cohort_id is None:
        try:
            raw = parse_raw_definition(req.cohort.raw, existing=saved)
        except CohortDefinitionError as exc:
            raise ParamError(f"Error in filter_by_cohort: {exc.message}") from None
        definitions[RAW_COHORT] = raw.canonical()
        cohort_id = RAW_COHORT
    elif req.cohort.cohort_id in definitions:
        cohort_id = req.cohort.cohort_id
    else:
        raise ParamError(f"Error in filter_by_cohort: unknown cohort {req.cohort.cohort_id}")
    return Membership(cohort_id, definitions, include_all_users(req.cohort.include_all_users))


async def _page_zero(ctx: QueryContext, req: EngageRequest) -> dict[str, Any]:
    now = req.as_of or _common.utc_now()
    group_key = await _collection(ctx, req)
    if req.distinct_ids == ():
        return answer(req, single_page_session(session_clock(), 0).session_id, 0, [])
    membership = await _membership(ctx, req)
    req = replace(req, membership=membership)
    args = (req, ctx.project_id, group_key, now, ctx.timezone)
    if req.counted or membership is not None:
        # Every member has to be computed anyway (behaviour counts, cohort membership): one
        # statement ranks them into a snapshot, and page 0 is read from it like any page.
        session = snapshot_session(session_clock())
        await query.snapshot(*args, session.session_id, session.created, more_than=0).run(ctx)
        ((size, _),) = await query.session_size(ctx.project_id, session.session_id).run(ctx)
        if not size:
            return answer(req, single_page_session(session_clock(), 0).session_id, 0, [])
        return await _session_page(ctx, req, session.session_id, group_key, int(size))
    for _ in range(_ATTEMPTS):
        # The probe is an ordered read that stops early: a result that fits on a page is
        # answered by it; a larger one is then ranked into a snapshot.
        rows = await query.probe(*args).run(ctx)
        if len(rows) <= req.page_size:
            return _single_page(req, rows)
        probed = {str(pid): str(props) for pid, props in rows[: req.page_size]}
        session = snapshot_session(session_clock())
        await query.snapshot(*args, session.session_id, session.created, more_than=req.page_size).run(ctx)
        ((size, _),) = await query.session_size(ctx.project_id, session.session_id).run(ctx)
        if size:
            return await _session_page(ctx, req, session.session_id, group_key, int(size), probed)
        # The probe and the snapshot statement disagree: profiles were written in between.
    raise UnavailableError("the profiles changed while the query ran; retry")


def _single_page(req: EngageRequest, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The whole result fits on page 0: answered from the probe, nothing stored."""
    session_id = single_page_session(session_clock(), len(rows)).session_id
    return answer(req, session_id, len(rows), [result(pid, props, req.output_properties) for pid, props in rows])


async def _later_page(ctx: QueryContext, req: EngageRequest, session: Session) -> dict[str, Any]:
    group_key = ""
    if session.snapshot:
        ((size, group_key),) = await query.session_size(ctx.project_id, session.session_id).run(ctx)
        if not size:
            raise unknown(session.session_id)
        total = int(size)
    else:
        total = session.total or 0
    if req.behaviors is not None and req.as_of is None and total > UNCACHED_LIMIT:
        raise ParamError(UNCACHED_PAGE_ERROR)
    if not session.snapshot and req.page * req.page_size < total:
        raise ParamError(
            f"Error in page: session {session.session_id!r} holds a single page of {total} profiles; "
            "ask for page 0 again with this page_size"
        )
    return await _session_page(ctx, req, session.session_id, str(group_key), total)


def continues_session(params: Params) -> bool:
    """A later page of a session (`page` > 0 with a `session_id`): free of the hourly budget."""
    page = params.get("page")
    return params.get("session_id") is not None and page is not None and page.isdigit() and int(page) > 0


async def engage(ctx: QueryContext) -> dict[str, Any]:
    req = parse_request(ctx.params)
    if req.page == 0:
        return await _page_zero(ctx, req)
    if req.session_id is None:
        raise AssertionError("invariant: parse_request requires session_id when page > 0")
    return await _later_page(ctx, req, parse_session(req.session_id, session_clock()))
