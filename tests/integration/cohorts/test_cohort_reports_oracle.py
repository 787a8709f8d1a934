"""`/cohorts/list` and `/engage` with `filter_by_cohort` against the plain-Python reference
(`tests/oracle/cohorts.py`, whose /engage is tests/oracle/engage.py) on generated data: three
projects in three time zones, events through the real `/import` (duplicates, late and
out-of-order ones), profiles through `/engage`, ids without profiles and profiles without
events, random dynamic cohorts (references, negated ones too) and static ones, stored per
project through the cohort store. Answers must equal the reference's, field for field and page
by page (later pages fetched out of order with page 0's `session_id`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from footfall.shared.cohorts import CohortDefinitionError, WarehouseCohortStore, parse_cohort
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.factories import Dataset, make_dataset
from tests.integration.cohorts.data import load_profiles, random_cohort
from tests.integration.query.report_env import ReportEnv, secret_of, serving
from tests.oracle import cohorts as oracle
from tests.oracle._common import Event, prepare
from tests.oracle.engage import EngageError

pytestmark = pytest.mark.warehouse

SEED = 20241126
ZONES = {1: "Asia/Kolkata", 2: "America/Los_Angeles", 3: "UTC"}


@dataclass
class Loaded:
    env: ReportEnv
    dataset: Dataset
    profiles: dict[int, dict[str, dict[str, Any]]]
    cohorts: dict[int, oracle.Cohort]  # every project's, by id
    # The reference's events per project, deduplicated and normalised once (its own `prepare`)
    # rather than for each of the few hundred expected answers; again when events were added.
    prepared: dict[int, tuple[int, list[Event]]] = field(default_factory=dict)

    @property
    def now_ms(self) -> int:
        return int(self.dataset.now.timestamp() * 1000)

    def own(self, pid: int) -> list[int]:
        return sorted(cid for cid, c in self.cohorts.items() if c.project_id == pid)

    def expected_engage(self, pid: int, params: dict[str, str]) -> dict[str, Any] | EngageError:
        spec = self.dataset.projects[pid]
        state = {(pid, None, u): p for u, p in self.profiles[pid].items()}
        if self.prepared.get(pid, (-1, []))[0] != len(spec.events):
            self.prepared[pid] = (len(spec.events), prepare(spec.events))
        events = self.prepared[pid][1]
        return oracle.engage_by_cohort(
            state,
            params,
            project_id=pid,
            cohorts={cid: c for cid, c in self.cohorts.items() if c.project_id == pid},
            events=events,
            tz=spec.tz,
            now_ms=self.now_ms,
        )


def _store_cohorts(warehouse: ClickHouseWarehouse, dataset: Dataset, rng: random.Random) -> dict[int, oracle.Cohort]:
    """About ten cohorts per project, created in turn (each may reference the project's earlier
    ones); the reference parses the same bodies under the ids the store handed out."""
    store = WarehouseCohortStore(warehouse)
    made: dict[int, oracle.Cohort] = {}
    for pid in sorted(dataset.projects):
        ours: dict[int, Any] = {}
        theirs: dict[int, oracle.Cohort] = {}
        while len(ours) < 10:
            body = random_cohort(rng, sorted(ours))
            body["name"] = f"cohort {len(ours)} of {pid}"
            body["description"] = rng.choice(["", "generated"])
            body["is_visible"] = rng.choice([True, False, 1])
            try:
                definition = parse_cohort(body, existing=ours)
            except CohortDefinitionError as exc:
                expected = oracle.parse_cohort(body, existing=theirs, project_id=pid)
                assert isinstance(expected, oracle.CohortError), (body, exc)
                continue
            stored = store.create(pid, definition)
            ours[stored.id] = definition
            parsed = oracle.parse_cohort(
                body, existing=theirs, cohort_id=stored.id, project_id=pid, created=stored.created
            )
            assert isinstance(parsed, oracle.Cohort), (body, parsed)
            theirs[stored.id] = parsed
        made.update(theirs)
    return made


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[Loaded]:
    dataset = make_dataset(SEED, n_events=1500, zones=ZONES)
    rng = random.Random(SEED)
    with serving(warehouse, dataset) as env:
        profiles = load_profiles(env, dataset, rng)
        yield Loaded(env, dataset, profiles, _store_cohorts(warehouse, dataset, rng))


def _body(response: Any, label: str) -> dict[str, Any]:
    assert response.status_code == 200, f"{label}: {response.status_code} {response.text[:500]}"
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("prefix", ["/api/query", "/api/2.0"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_cohorts_list_matches_the_reference(loaded: Loaded, prefix: str, method: str) -> None:
    for pid, spec in loaded.dataset.projects.items():
        expected = oracle.cohorts_list(
            loaded.cohorts,
            events=spec.events,
            profiles=loaded.profiles[pid],
            tz=spec.tz,
            now_ms=loaded.now_ms,
            project_id=pid,
        )
        r = loaded.env.request(method, f"{prefix}/cohorts/list", auth=(secret_of(pid), ""))
        got = r.json()
        assert r.status_code == 200, r.text
        assert got == expected, pid
        assert [list(item) for item in got] == [list(item) for item in expected]  # the fields' order too
        assert any(item["count"] for item in got)  # the generated data gives non-empty cohorts


def _cases(loaded: Loaded, pid: int, rng: random.Random) -> Iterator[tuple[str, dict[str, str]]]:
    users = sorted(loaded.profiles[pid])
    for cid in loaded.own(pid):
        spec = rng.choice([json.dumps({"id": cid}), str(cid)])
        yield f"{cid}", {"filter_by_cohort": spec}
        yield f"{cid}-profiles-only", {"filter_by_cohort": spec, "include_all_users": rng.choice(["false", "0"])}
        yield f"{cid}-where", {"filter_by_cohort": spec, "where": rng.choice(WHERES)}
        picked = [*rng.sample(users, 6), "ghost-1", "nobody"]
        yield f"{cid}-ids", {"filter_by_cohort": spec, "distinct_ids": json.dumps(picked)}
        yield (
            f"{cid}-output",
            {"filter_by_cohort": spec, "output_properties": '["plan", "age"]', "include_all_users": "TRUE"},
        )


WHERES = [
    'properties["plan"] == "pro"',
    'not defined(properties["plan"])',
    'number(properties["age"]) > 20 or properties["city"] == "Zürich"',
    "true",
]


def _check(
    loaded: Loaded, pid: int, label: str, params: dict[str, str], page_size: int, rng: random.Random
) -> tuple[int, int]:
    """Page 0 and later pages against the reference: (pages, members without a profile shown)."""
    sized = {**params, "page_size": str(page_size)}
    expected = loaded.expected_engage(pid, sized)
    r = loaded.env.query(pid, "/engage", sized)
    if isinstance(expected, EngageError):
        assert r.status_code == 400, f"{label}: {r.status_code} {r.text[:300]}"
        assert str(expected) in r.json()["error"], (label, r.json()["error"], str(expected))
        return 0, 0
    first = _body(r, label)
    session = first.pop("session_id")
    assert first == expected, label
    pages = (expected["total"] + page_size - 1) // page_size
    shown = [r["$distinct_id"] for r in first["results"]]
    # Later pages in a random order: the last one, the empty one past it, and two others (every
    # page of every case made this the suite's slowest test, for no other kind of check).
    later_pages = {*rng.sample(range(1, pages + 1), min(2, pages)), *range(max(pages - 1, 1), pages + 1)}
    for page in rng.sample(sorted(later_pages), len(later_pages)):
        later = {**sized, "page": str(page), "session_id": session}
        want = loaded.expected_engage(pid, later)
        got = _body(loaded.env.query(pid, "/engage", later), f"{label} page {page}")
        assert got.pop("session_id") == session
        assert got == want, f"{label} page {page}"
        shown += [r["$distinct_id"] for r in got["results"]]
    return pages, sum(1 for i in shown if i not in loaded.profiles[pid])


@pytest.mark.slow
@pytest.mark.parametrize("pid", sorted(ZONES))  # one item per project, which xdist spreads
def test_engage_by_saved_cohort_matches_the_reference(loaded: Loaded, pid: int) -> None:
    rng = random.Random(SEED + 1 + pid)
    paged = without_profile = 0
    for label, params in _cases(loaded, pid, rng):
        size = rng.choice([7, 50, 1000])
        pages, shown = _check(loaded, pid, f"project {pid} cohort {label}", params, size, rng)
        paged += pages > 1
        without_profile += shown
    assert paged >= 4 and without_profile >= 10, (paged, without_profile)  # the data exercises both


def test_engage_by_raw_cohort_matches_the_reference(loaded: Loaded) -> None:
    rng = random.Random(SEED + 2)
    for pid in loaded.dataset.projects:
        own = loaded.own(pid)
        for i in range(8):
            raw = random_cohort(rng, own)
            raw.pop("name")
            params = {"filter_by_cohort": json.dumps({"raw_cohort": raw})}
            if i % 2:
                params["include_all_users"] = "false"
            _check(loaded, pid, f"project {pid} raw {i}: {raw}", params, 25, rng)


def test_cohort_errors(loaded: Loaded) -> None:
    other = loaded.own(2)[0]
    cases = [
        ({"filter_by_cohort": json.dumps({"id": other})}, f"Error in filter_by_cohort: unknown cohort {other}"),
        ({"filter_by_cohort": "99999"}, "Error in filter_by_cohort: unknown cohort 99999"),
        ({"filter_by_cohort": str(loaded.own(1)[0]), "include_all_users": "maybe"}, "Error in include_all_users"),
        ({"filter_by_cohort": '{"raw_cohort": {"selector": "user[", "behaviors": {}}}'}, "Error in filter_by_cohort"),
        ({"filter_by_cohort": '{"raw_cohort": {"distinct_ids": [true]}}'}, "Error in filter_by_cohort"),
        ({"filter_by_cohort": '"7"'}, "Error in filter_by_cohort"),
    ]
    for params, message in cases:
        assert isinstance(loaded.expected_engage(1, params), EngageError), params
        r = loaded.env.query(1, "/engage", params)
        assert r.status_code == 400 and message in r.json()["error"], (params, r.status_code, r.text[:300])


def test_count_follows_edits_at_once_and_is_reused_otherwise(loaded: Loaded) -> None:
    """A cached count is dropped when the cohort, or one it references, changes; the list stays
    right after each edit (a cohort created, edited and deleted in project 3)."""
    store = WarehouseCohortStore(loaded.env.warehouse)
    spec = loaded.dataset.projects[3]

    def listed() -> dict[int, int]:
        r = loaded.env.request("POST", "/api/query/cohorts/list", auth=(secret_of(3), ""))
        return {item["id"]: item["count"] for item in _body(r, "list")}

    def expected(cohorts: dict[int, oracle.Cohort]) -> dict[int, int]:
        rows = oracle.cohorts_list(
            cohorts, events=spec.events, profiles=loaded.profiles[3], tz=spec.tz, now_ms=loaded.now_ms, project_id=3
        )
        return {item["id"]: item["count"] for item in rows}

    own = {cid: c for cid, c in loaded.cohorts.items() if c.project_id == 3}
    assert listed() == expected(own)
    base_body = {"name": "plan", "selector": {"property": "user", "value": "plan", "operator": "defined"}}
    base = store.create(3, parse_cohort(base_body, existing={}))
    ref_body = {"name": "ref", "selector": {"property": "cohort", "value": base.id, "operator": "not in"}}
    existing = {c.id: c.definition for c in store.list(3)}
    ref = store.create(3, parse_cohort(ref_body, existing=existing))
    mine = dict(own)
    for cid, body in ((base.id, base_body), (ref.id, ref_body)):
        parsed = oracle.parse_cohort(body, existing=mine, cohort_id=cid, project_id=3)
        assert isinstance(parsed, oracle.Cohort)
        mine[cid] = parsed
    assert listed() == expected(mine)
    # Editing the referenced cohort changes both counts at once.
    edited_body = {"name": "plan", "selector": {"property": "user", "value": "plan", "operator": "not defined"}}
    existing = {c.id: c.definition for c in store.list(3)}
    store.update(3, base.id, parse_cohort(edited_body, existing=existing, cohort_id=base.id))
    edited = oracle.parse_cohort(edited_body, existing=mine, cohort_id=base.id, project_id=3)
    assert isinstance(edited, oracle.Cohort)
    mine[base.id] = edited
    assert listed() == expected(mine)
    store.delete(3, ref.id)
    store.delete(3, base.id)
    assert listed() == expected(own)


def test_tenant_scope_of_cohorts(loaded: Loaded) -> None:
    """A project sees only its own cohorts, in the list and as filters."""
    for pid in loaded.dataset.projects:
        r = loaded.env.request("GET", "/api/query/cohorts/list", auth=(secret_of(pid), ""))
        assert {item["project_id"] for item in _body(r, "list")} == {pid}
        assert [item["id"] for item in r.json()] == loaded.own(pid)


def test_paging_is_stable_while_new_events_arrive(loaded: Loaded) -> None:
    """Page 0 fixes a cohort session's members: events imported afterwards (which make new ids
    members, and existing ones leave) change a new page 0 but not the session's later pages.
    Runs last: it adds events to project 1 (the reference sees them too)."""
    from tests.integration.query.report_env import import_events

    pid, spec = 1, loaded.dataset.projects[1]
    store = WarehouseCohortStore(loaded.env.warehouse)
    body = {
        "name": "searched lately, few purchases",
        "behaviors": {
            "s": {
                "count": {"event_selector": {"event": "Search", "selector": None}},
                "window": {"unit": "month", "value": 6},
            },
            "p": {
                "count": {"event_selector": {"event": "Purchase", "selector": None}},
                "window": {"unit": "day", "value": 2},
            },
        },
        "selector": {
            "operator": "and",
            "children": [
                {"property": "behaviors", "value": "s", "operator": ">=", "operand": 1},
                {"property": "behaviors", "value": "p", "operator": "<", "operand": 2},
            ],
        },
    }
    stored = store.create(pid, parse_cohort(body, existing={c.id: c.definition for c in store.list(pid)}))
    parsed = oracle.parse_cohort(body, existing=loaded.cohorts, cohort_id=stored.id, project_id=pid)
    assert isinstance(parsed, oracle.Cohort)
    loaded.cohorts[stored.id] = parsed
    params = {"filter_by_cohort": str(stored.id), "page_size": "3"}
    before = loaded.expected_engage(pid, params)
    assert isinstance(before, dict) and before["total"] > 6, before
    first = _body(loaded.env.query(pid, "/engage", params), "page 0")
    session = first.pop("session_id")
    assert first == before

    members = sorted(
        r
        for r in oracle.members(
            stored.id,
            loaded.cohorts,
            events=spec.events,
            profiles=loaded.profiles[pid],
            tz=spec.tz,
            now_ms=loaded.now_ms,
        )
    )
    at = loaded.now_ms - 3_600_000
    late = (
        [  # two purchases make the first members leave; searches make new ids members
            {"event": "Purchase", "properties": {"distinct_id": m, "time": at - i, "$insert_id": f"late-p-{m}-{i}"}}
            for m in members[:3]
            for i in range(2)
        ]
        + [
            {"event": "Search", "properties": {"distinct_id": f"late-{i}", "time": at, "$insert_id": f"late-s-{i}"}}
            for i in range(5)
        ]
    )
    assert import_events(loaded.env, pid, late) == len(late)
    spec.events.extend(late)

    pages = (before["total"] + 2) // 3
    for page in sorted(range(1, pages + 1), key=lambda _: random.random()):
        later = {**params, "page": str(page), "session_id": session}
        want = oracle.engage_by_cohort(  # the members as of page 0: the reference before the new events
            {(pid, None, u): p for u, p in loaded.profiles[pid].items()},
            later,
            project_id=pid,
            cohorts={cid: c for cid, c in loaded.cohorts.items() if c.project_id == pid},
            events=spec.events[: -len(late)],
            tz=spec.tz,
            now_ms=loaded.now_ms,
        )
        got = _body(loaded.env.query(pid, "/engage", later), f"page {page}")
        assert got.pop("session_id") == session and got == want, page
    after = loaded.expected_engage(pid, params)
    assert isinstance(after, dict) and after["total"] == before["total"] + 5 - 3
    fresh = _body(loaded.env.query(pid, "/engage", params), "a new page 0")
    fresh.pop("session_id")
    assert fresh == after
