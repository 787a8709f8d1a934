"""`/engage` against the oracle (tests/oracle/engage.py) on generated profiles and events.

Profiles: per project a few thousand states written straight into `profiles` (the update
ingestion fills it in production): user profiles for every user of the project's events
plus about a thousand more, and group profiles of two group keys ("company", "team"),
with strings, numbers, numbers as strings, lists, booleans, nulls, nested objects,
unicode keys, values and ids, some deleted. About a third of the profiles have an older
version inserted first (with other properties, some deleted and revived, some alive and
deleted since); merges are stopped, so only `FINAL` gives the current states. Events come
from `tests.factories.make_dataset` through the real `/import` (`report_env.serving`).

Every answer must equal the oracle's (all fields but `session_id`), page by page, the
later pages fetched out of order with page 0's `session_id`; refused requests are 400s
where the oracle refuses them too. Decisions where the service departs from the oracle
(documented in services/query/reports/engage): later pages show the CURRENT properties of
the session's members (the oracle's `page_snapshot` would show the page-0 state). Cohort
filters are checked against the cohort oracle in tests/integration/cohorts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from footfall.services.query import app as query_app
from footfall.services.query.reports import engage as engage_report
from footfall.services.query.reports.engage import session as engage_session
from footfall.services.query.settings import QuerySettings
from footfall.shared.auth import Authenticator
from footfall.shared.metadata import MetadataRepository
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.factories import EVENT_NAMES, Dataset, make_dataset
from tests.integration.query.report_env import ReportEnv, diff, secret_of, serving
from tests.oracle.engage import UNCACHED_PAGE_ERROR, EngageError, engage

pytestmark = pytest.mark.warehouse

SEED = 20240507
ZONES = {21: "UTC", 22: "Asia/Tokyo", 23: "America/Los_Angeles", 24: "Europe/Berlin"}
PROJECTS = (21, 22, 23)  # 24 belongs to the session test, which changes its profiles
GROUP_KEYS = ("company", "team")
COLUMNS = ["project_id", "group_key", "profile_id", "properties", "deleted", "version"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Key = tuple[int, str | None, str]


def group_id(key: str) -> int:
    """The data_group_id of a group key, as the brief defines it (written here independently)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


# -- profile states ------------------------------------------------------------------------------------
CITIES = ["Zürich", "São Paulo", "東京", "Kraków", "New York", "Mumbai", "Albuquerque"]
TAGS = ["vip", "beta", "new", "🎉", "churn-risk"]


def _properties(rng: random.Random, n: int) -> dict[str, Any]:
    """A profile's properties: a random subset of realistic keys, in a random order."""
    pool: list[tuple[str, Any]] = [
        ("$email", f"user{n}@{rng.choice(['x.io', 'example.com', 'müller.de'])}"),
        ("$name", rng.choice(["Ann", "bob", "Émile", "Zoë", "李雷", "M", "mallory"]) + f" {n % 97}"),
        ("plan", rng.choice(["free", "free", "pro", "enterprise", None, "Pro"])),
        ("age", rng.choice([rng.randint(16, 80), rng.randint(16, 80), str(rng.randint(16, 80)), None])),
        ("score", rng.choice([round(rng.uniform(-5, 100), 3), 0, -0.5, 1e21])),
        ("amount", rng.choice([rng.randint(0, 99), f"{rng.randint(0, 99)}", f"{rng.uniform(0, 99):.2f}", "n/a"])),
        ("tags", rng.sample(TAGS, rng.randint(0, 3))),
        ("is_trial", rng.choice([True, False, "true", None])),
        ("$last_seen", f"2024-0{rng.randint(2, 4)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:00:00"),
        ("$city", rng.choice(CITIES)),
        ("ключ", rng.choice(["значение", "другое", "🎉 party"])),
        ("time", rng.choice([1700000000 + rng.randint(-(10**7), 10**7), "yesterday"])),
        ("nested", {"level": rng.randint(1, 3), "flags": [rng.random() < 0.5]}),
        ("ids", rng.sample([1, 2, 3, 5, 8], rng.randint(0, 3))),
    ]
    rng.shuffle(pool)
    return dict(pool[: rng.randint(0, len(pool))])


@dataclass
class Profiles:
    """Oracle state (live profiles) and the warehouse rows (older versions, then current states)."""

    live: dict[Key, dict[str, Any]] = field(default_factory=dict)
    old_rows: list[list[Any]] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)

    def add(self, rng: random.Random, pid: int, group_key: str, profile_id: str, n: int) -> None:
        props = _properties(rng, n)
        deleted = rng.random() < 0.07
        if rng.random() < 0.35:  # an older version: other properties, sometimes deleted then
            old = _properties(rng, n + 1)
            self.old_rows.append([pid, group_key, profile_id, json.dumps(old), int(rng.random() < 0.3), 1])
        text = json.dumps(props, ensure_ascii=rng.random() < 0.5)
        self.rows.append([pid, group_key, profile_id, text, int(deleted), 2])
        if not deleted:
            self.live[(pid, group_key or None, profile_id)] = props


SPECIAL_IDS = ["10", "9", "Dave", "dave", "Ünïcødé-1", "用户-2", "a b", "z", "😀", "x" * 255, "acme"]


def make_profiles(seed: int, dataset: Dataset) -> Profiles:
    rng = random.Random(seed)
    out = Profiles()
    for pid in sorted(dataset.projects):
        users = {str(e["properties"]["distinct_id"])[:255] for e in dataset.projects[pid].events}
        users.discard("")
        users |= {f"p{i:05d}" for i in range(1050)} | set(SPECIAL_IDS)
        for n, uid in enumerate(sorted(users)):
            out.add(rng, pid, "", uid, n)
        for n, gid in enumerate([f"c{i:03d}" for i in range(120)] + ["acme", "Ωmega", "10"]):
            out.add(rng, pid, "company", gid, n)
        for n, gid in enumerate([f"t{i:02d}" for i in range(60)] + ["acme"]):
            out.add(rng, pid, "team", gid, n)
    return out


def load_profiles(warehouse: ClickHouseWarehouse, profiles: Profiles) -> None:
    warehouse.command("SYSTEM STOP MERGES profiles")
    warehouse.insert("profiles", COLUMNS, profiles.old_rows)
    warehouse.insert("profiles", COLUMNS, profiles.rows)


@dataclass
class Loaded:
    env: ReportEnv
    dataset: Dataset
    profiles: Profiles

    @property
    def now_ms(self) -> int:
        return (self.dataset.now - EPOCH) // timedelta(milliseconds=1)

    def oracle(self, pid: int, params: dict[str, str], **kw: Any) -> dict[str, Any] | EngageError:
        spec = self.dataset.projects[pid]
        return engage(
            self.profiles.live,
            params,
            project_id=pid,
            events=spec.events,
            now_ms=self.now_ms,
            group_keys={group_id(k): k for k in GROUP_KEYS},
            cohorts={},
            tz=spec.tz,
            **kw,
        )

    def get(self, pid: int, params: dict[str, str], *, prefix: str = "/api/query") -> httpx.Response:
        return self.env.query(pid, "/engage", params, prefix=prefix)


@pytest.fixture(scope="module")
def loaded(warehouse: ClickHouseWarehouse) -> Iterator[Loaded]:
    dataset = make_dataset(SEED, n_events=1200, zones=ZONES)
    profiles = make_profiles(SEED, dataset)
    with serving(warehouse, dataset) as env:
        load_profiles(warehouse, profiles)
        yield Loaded(env, dataset, profiles)
    warehouse.command("SYSTEM START MERGES profiles")


# -- comparison --------------------------------------------------------------------------------------------
def _body(r: httpx.Response, context: str) -> dict[str, Any]:
    assert r.status_code == 200, f"{context}: {r.status_code} {r.text[:1000]}"
    body = r.json()
    assert isinstance(body.get("session_id"), str) and body["session_id"], context
    return body


def _same(ours: dict[str, Any], expected: dict[str, Any], context: str) -> None:
    ours = {k: v for k, v in ours.items() if k != "session_id"}
    problems = diff(ours, expected)
    assert not problems, f"{context}:\n" + "\n".join(problems[:20])


def check_walk(state: Loaded, pid: int, params: dict[str, str], *, rng_seed: int = 0) -> dict[str, Any]:
    """Page 0, then every later page (and one past the end) out of order, each against the oracle."""
    context = f"/engage {params} (project {pid})"
    expected = state.oracle(pid, params)
    assert not isinstance(expected, EngageError), f"{context}: oracle refuses: {expected.message}"
    first = _body(state.get(pid, params), context)
    _same(first, expected, context)
    pages = list(range(1, math.ceil(first["total"] / first["page_size"]) + 1))
    random.Random(rng_seed).shuffle(pages)
    for page in pages:
        later = {**params, "page": str(page), "session_id": first["session_id"]}
        want = state.oracle(pid, later)
        r = state.get(pid, later, prefix="/api/2.0")
        if isinstance(want, EngageError):
            assert r.status_code == 400, f"{context} page {page}: {r.status_code} {r.text[:300]}"
            assert r.json()["error"] == want.message == UNCACHED_PAGE_ERROR
            continue
        body = _body(r, f"{context} page {page}")
        assert body["session_id"] == first["session_id"]
        _same(body, want, f"{context} page {page}")
    return first


# -- cases -----------------------------------------------------------------------------------------------------
def _behaviors(*items: tuple[str, str, list[dict[str, Any]]]) -> str:
    return json.dumps([{"name": n, "window": w, "event_selectors": s} for n, w, s in items])


CASES: dict[str, dict[str, str]] = {
    "all": {},
    "all-page-size-250": {"page_size": "250"},
    "where-plan": {"where": 'properties["plan"] == "pro"'},
    "selector-alias": {"selector": '(("@x.io" in properties["$email"]) and (defined (properties["$email"])))'},
    "user-accessor-range": {"where": 'user["age"] >= 30 and user["age"] < 50', "page_size": "17"},
    "not-defined": {"where": 'not defined(properties["plan"])'},
    "null": {"where": 'properties["plan"] == null'},
    "list-membership": {"where": '"vip" in properties["tags"] or 3 in properties["ids"]'},
    "booleans": {"where": 'properties["is_trial"] == true or boolean(properties["is_trial"]) == false'},
    "unicode": {"where": 'properties["ключ"] == "значение" and "ü" in properties["$city"]'},
    "datetime": {"where": 'properties["$last_seen"] >= datetime("2024-03-15T00:00:00")'},
    "number-cast": {"where": 'number(properties["amount"]) > 40.5', "page_size": "101"},
    "time-is-a-profile-property": {"where": 'properties["time"] > 1700000000'},
    "string-order": {"where": 'properties["$name"] < "M"'},
    "object": {"where": 'defined(properties["nested"]) and not (properties["nested"] == null)'},
    "arith": {"where": 'properties["score"] * 2 - 1 > 50 or properties["score"] % 2 == 0'},
    "output-properties": {"where": "true", "output_properties": '["$email", "tags", "missing", "ключ", "$email"]'},
    "output-empty": {"output_properties": "[]", "page_size": "400"},
    "distinct-id": {"distinct_id": "Dave"},
    "distinct-id-missing": {"distinct_id": "nobody"},
    "distinct-ids": {"distinct_ids": json.dumps(["p00017", "z", "😀", "nobody", "p00017", "10", 9, "a b"])},
    "distinct-ids-where": {"distinct_ids": json.dumps([f"p{i:05d}" for i in range(0, 300, 3)]), "where": "true"},
    "distinct-ids-empty": {"distinct_ids": "[]"},
    "group-company": {"data_group_id": str(group_id("company"))},
    "group-team-where": {"data_group_id": str(group_id("team")), "where": 'properties["plan"] != "free"'},
    "group-company-paged": {
        "data_group_id": str(group_id("company")),
        "page_size": "9",
        "output_properties": '["plan"]',
    },
    "group-distinct-id": {"data_group_id": str(group_id("team")), "distinct_id": "acme"},
    "behaviors-purchase": {
        "behaviors": _behaviors(("buys", "30d", [{"event": "Purchase"}])),
        "where": 'behaviors["buys"] >= 1',
    },
    "behaviors-selector": {
        "behaviors": _behaviors(("b", "7d", [{"event": "Purchase", "selector": 'number(properties["price"]) > 10'}])),
        "where": 'behaviors["b"] > 0 and properties["plan"] != "free"',
    },
    "behaviors-two-or-selectors": {
        "behaviors": _behaviors(
            ("opens", "14d", [{"event": "App Open"}, {"event": "App Open", "selector": None}]),
            ("views", "3d", [{"event": "View Item"}, {"event": "Add To Cart", "selector": ""}]),
        ),
        "where": 'behaviors["opens"] >= 3 or (behaviors["views"] > 0 and behaviors["views"] < 3)',
    },
    "behaviors-today": {
        "behaviors": _behaviors(("today", "1d", [{"event": "App Open"}, {"event": "View Item"}])),
        "where": 'behaviors["today"] > 0',
    },
    "behaviors-zero-paged": {
        "behaviors": _behaviors(("buys", "10d", [{"event": "Purchase"}])),
        "where": 'behaviors["buys"] == 0',
        "page_size": "300",
    },
    "behaviors-odd-counts": {  # parity: every unmerged or conflicting duplicate counted twice would flip it
        "behaviors": _behaviors(("n", "30d", [{"event": e} for e in EVENT_NAMES])),
        "where": 'behaviors["n"] % 2 == 1',
        "page_size": "700",
    },
    "behaviors-conflicting-copies": {  # the newest copy's properties decide
        "behaviors": _behaviors(
            ("priced", "40d", [{"event": e, "selector": 'defined(properties["price"])'} for e in EVENT_NAMES])
        ),
        "where": 'behaviors["priced"] == 1 or behaviors["priced"] == 2',
    },
    "behaviors-unread": {"behaviors": _behaviors(("b", "2d", [{"event": "Purchase"}])), "page_size": "500"},
    "behaviors-distinct-ids": {
        "behaviors": _behaviors(("opens", "30d", [{"event": "App Open"}])),
        "where": 'behaviors["opens"] * 2 > 3',
        "distinct_ids": json.dumps(["u0001", "u0002", "u0003", "u0010", "u0011", "p00001"]),
    },
}
# The same with `as_of_timestamp` (seconds, and milliseconds): pages past 1000 results are allowed.
AS_OF: dict[str, dict[str, str]] = {
    "as-of-10-days-ago": {
        "behaviors": _behaviors(("buys", "5d", [{"event": "Purchase"}]), ("x", "1d", [{"event": "Search"}])),
        "where": 'behaviors["buys"] > 0 or behaviors["x"] == 0',
        "page_size": "333",
    },
    "as-of-ms-unread": {"behaviors": _behaviors(("b", "2d", [{"event": "Purchase"}])), "page_size": "500"},
}


@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_engage_equals_oracle(loaded: Loaded, case: str, pid: int) -> None:
    check_walk(loaded, pid, CASES[case], rng_seed=zlib.crc32(case.encode()))


@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
@pytest.mark.parametrize("case", AS_OF, ids=list(AS_OF))
def test_engage_behaviors_as_of_timestamp(loaded: Loaded, case: str, pid: int) -> None:
    ten_days_ago = loaded.dataset.now - timedelta(days=10, hours=3)
    stamp = int(ten_days_ago.timestamp())
    params = {**AS_OF[case], "as_of_timestamp": str(stamp * 1000 + 7 if "ms" in case else stamp)}
    first = check_walk(loaded, pid, params)
    assert first["total"] > 0


def test_the_data_exercises_what_the_cases_claim(loaded: Loaded) -> None:
    """Guards against a generator change making the comparisons vacuous."""
    for pid in PROJECTS:
        users = [k for k in loaded.profiles.live if k[0] == pid and k[1] is None]
        assert len(users) > 1000  # a default page is not everything: the walk has a second page
        for case in ("where-plan", "behaviors-purchase", "behaviors-today", "group-team-where", "distinct-ids"):
            body = loaded.oracle(pid, CASES[case])
            assert isinstance(body, dict) and body["total"] > 0, (pid, case)
    rows = loaded.env.warehouse.query("SELECT count() FROM profiles")[0][0]
    final = loaded.env.warehouse.query("SELECT count() FROM profiles FINAL")[0][0]
    assert rows > final  # older versions are unmerged


def test_engage_answers_on_both_prefixes_get_and_post(loaded: Loaded) -> None:
    params = {"where": 'properties["plan"] == "enterprise"', "output_properties": '["plan"]'}
    expected = loaded.oracle(21, params)
    assert isinstance(expected, dict)
    for path in ("/api/query/engage", "/api/2.0/engage/", "/api/2.0/engage"):
        r = loaded.env.request("POST", path, data=params, auth=(secret_of(21), ""))
        _same(_body(r, path), expected, f"POST {path}")


# -- refused requests ----------------------------------------------------------------------------------------------
ERRORS: dict[str, tuple[dict[str, str], str]] = {
    "exclusive-ids": ({"distinct_id": "a", "distinct_ids": '["b"]'}, "distinct_id and distinct_ids are mutually"),
    "exclusive-where-selector": ({"where": "true", "selector": "true"}, "where and selector are mutually exclusive"),
    "exclusive-behaviors-cohort": (
        {"behaviors": _behaviors(("b", "1d", [{"event": "E"}])), "filter_by_cohort": '{"id": 1}'},
        "behaviors and filter_by_cohort are mutually exclusive",
    ),
    "exclusive-cohort-group": (
        {"filter_by_cohort": "1", "data_group_id": str(group_id("team"))},
        "filter_by_cohort and data_group_id are mutually exclusive",
    ),
    "exclusive-behaviors-group": (
        {"behaviors": _behaviors(("b", "1d", [{"event": "E"}])), "data_group_id": str(group_id("team"))},
        "behaviors and data_group_id are mutually exclusive",
    ),
    "bad-json": ({"distinct_ids": '["a", '}, "Error in distinct_ids"),
    "ids-not-strings": ({"distinct_ids": "[true]"}, "Error in distinct_ids"),
    "page-without-session": ({"page": "1"}, "Error in session_id"),
    "negative-page": ({"page": "-1", "session_id": "s"}, "Error in page"),
    "page-size-zero": ({"page_size": "0"}, "Error in page_size"),
    "page-size-text": ({"page_size": "lots"}, "Error in page_size"),
    "unknown-cohort": ({"filter_by_cohort": '{"id": 5}'}, "Error in filter_by_cohort: unknown cohort 5"),
    "unknown-cohort-bare": ({"filter_by_cohort": "77"}, "unknown cohort 77"),
    "event-accessor": ({"where": 'event["plan"] == "pro"'}, "Error in where: invalid expression"),
    "undefined-behavior": ({"where": 'behaviors["nope"] > 1'}, "Error in where"),
    "syntax": ({"selector": 'properties["plan"] =='}, "Error in selector: syntax error"),
    "unknown-group": ({"data_group_id": "12345"}, "Error in data_group_id: unknown data_group_id 12345"),
    "bad-window": ({"behaviors": _behaviors(("b", "3w", [{"event": "E"}]))}, "Error in behaviors"),
    "too-many-behaviors": (
        {"behaviors": _behaviors(*[(f"b{i}", "1d", [{"event": "E"}]) for i in range(51)])},
        "Error in behaviors",
    ),
    "output-not-names": ({"output_properties": '["a", 1]'}, "Error in output_properties"),
}


@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
def test_engage_refuses_what_the_oracle_refuses(loaded: Loaded, case: str) -> None:
    params, message = ERRORS[case]
    expected = loaded.oracle(21, params)
    assert isinstance(expected, EngageError), f"the oracle accepts {params}: {expected}"
    r = loaded.get(21, params)
    assert r.status_code == 400, f"{params}: {r.status_code} {r.text[:300]}"
    body = r.json()
    assert set(body) == {"request", "error"} and body["request"].startswith("/api/query/engage?")
    assert message in body["error"], body["error"]


def test_too_many_distinct_ids_is_refused(loaded: Loaded) -> None:
    r = loaded.get(21, {"distinct_ids": json.dumps([f"p{i:05d}" for i in range(2001)])})
    assert r.status_code == 400 and "distinct_ids" in r.json()["error"] and "2000" in r.json()["error"]
    ok = {"distinct_ids": json.dumps([f"p{i:05d}" for i in range(2000)])}
    expected = loaded.oracle(21, ok)
    assert isinstance(expected, dict)
    r = loaded.env.request("POST", "/api/query/engage", data=ok, auth=(secret_of(21), ""))
    _same(_body(r, "2000 ids"), expected, "2000 ids")


def test_uncached_behaviors_pages(loaded: Loaded) -> None:
    """With behaviors and no as_of_timestamp, a later page of more than 1000 results is the documented 400."""
    params = {"behaviors": _behaviors(("b", "2d", [{"event": "Purchase"}])), "where": 'behaviors["b"] == 0'}
    first = _body(loaded.get(22, {**params, "page_size": "400"}), "page 0")
    assert first["total"] > 1000
    r = loaded.get(22, {**params, "page_size": "400", "page": "1", "session_id": first["session_id"]})
    assert r.status_code == 400 and r.json()["error"] == UNCACHED_PAGE_ERROR
    small = {**params, "where": 'behaviors["b"] == 0 and properties["plan"] == "pro"', "page_size": "50"}
    check_walk(loaded, 22, small)  # fewer than 1000: pages work without as_of_timestamp


# -- sessions ----------------------------------------------------------------------------------------------------
def test_unknown_and_expired_sessions(loaded: Loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    params = {"where": 'properties["plan"] == "free"', "page_size": "50"}
    for made_up in ("1234567890-EXAMPL", "1700000000000-S" + "0" * 20):
        r = loaded.get(21, {**params, "page": "1", "session_id": made_up})
        assert r.status_code == 400 and "unknown or expired session" in r.json()["error"]
    first = _body(loaded.get(21, params), "page 0")
    later = {**params, "page": "2", "session_id": first["session_id"]}
    assert loaded.get(21, later).status_code == 200
    assert loaded.get(22, later).status_code == 400  # another project's session is unknown here
    real = engage_session.session_clock()
    monkeypatch.setattr(engage_report, "session_clock", lambda: real + timedelta(hours=24, minutes=1))
    r = loaded.get(21, later)
    assert r.status_code == 400 and "unknown or expired session" in r.json()["error"]


def test_single_page_sessions(loaded: Loaded) -> None:
    params = {"distinct_ids": '["p00001", "p00002", "p00003"]', "page_size": "10"}
    first = _body(loaded.get(21, params), "page 0")
    assert first["total"] == 3
    body = _body(loaded.get(21, {**params, "page": "1", "session_id": first["session_id"]}), "page 1")
    assert body["results"] == [] and body["total"] == 3
    r = loaded.get(21, {**params, "page": "1", "page_size": "2", "session_id": first["session_id"]})
    assert r.status_code == 400 and "page 0 again" in r.json()["error"]


def _version(warehouse: ClickHouseWarehouse, rows: list[tuple[str, dict[str, Any] | None]], version: int) -> None:
    """New states of project 24's group "session" profiles (None: deleted)."""
    data = [[24, "session", pid, json.dumps(p or {}), int(p is None), version] for pid, p in rows]
    warehouse.insert("profiles", COLUMNS, data)


def test_later_pages_keep_membership_while_values_are_current(loaded: Loaded) -> None:
    """Page 0 fixes who is on which page; values are read when each page is read, a deleted
    member is left out of its page, and other `footfall query` processes serve the pages."""
    wh = loaded.env.warehouse
    before = {f"s{i:03d}": {"n": i, "label": "old"} for i in range(60)}
    _version(wh, list(before.items()), 1)
    params = {"data_group_id": str(group_id("session")), "where": 'properties["n"] < 50', "page_size": "10"}
    first = _body(loaded.get(24, params), "page 0")
    assert first["total"] == 50 and [r["$distinct_id"] for r in first["results"]][:2] == ["s000", "s001"]

    changed = {
        "s015": {"n": 1000, "label": "no longer matches"},
        "s031": {"n": 31, "label": "changed"},
        "s049": {"n": 49, "extra": ["x"]},
    }
    _version(wh, [*changed.items(), ("s022", None), ("a-new", {"n": 1}), ("s055", {"n": 5})], 2)
    after = {**before, **changed, "a-new": {"n": 1}, "s055": {"n": 5}}
    del after["s022"]

    # The other process: a second query service over the same warehouse, no shared memory.
    other = query_app.build_app(
        Authenticator(MetadataRepository(wh).load_directory()), wh, QuerySettings(rate_per_hour=0, concurrency=0)
    )
    transport = httpx.ASGITransport(app=other)

    async def fetch(page: int) -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://other.test") as client:
            later = {**params, "page": str(page), "session_id": first["session_id"]}
            return await client.get("/api/2.0/engage", params=later, auth=(secret_of(24), ""))

    snapshot_ids = sorted(k for k, v in before.items() if v["n"] < 50)
    for page in (4, 1, 3, 2, 5):
        body = _body(asyncio.run(fetch(page)), f"page {page}")
        members = snapshot_ids[page * 10 : (page + 1) * 10]
        expected = [{"$distinct_id": m, "$properties": after[m]} for m in members if m in after]
        assert body["results"] == expected, page
        assert (body["total"], body["page"], body["page_size"]) == (50, page, 10)
    assert "s022" not in json.dumps(asyncio.run(fetch(2)).json())

    fresh = _body(loaded.get(24, params), "a new page 0")
    assert fresh["session_id"] != first["session_id"]
    assert fresh["total"] == 50 and fresh["results"][0]["$distinct_id"] == "a-new"  # +a-new +s055 -s015 -s022


# -- the client that pages concurrently ------------------------------------------------------------------
@pytest.fixture
def http_base(loaded: Loaded) -> Iterator[str]:
    """The loaded app behind a real HTTP server (mixpanel-utils speaks urllib), in a thread."""
    import socket
    import threading

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(loaded.env.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    yield base
    server.should_exit = True
    thread.join(timeout=30)


@pytest.mark.parametrize(
    "params",
    [
        {"where": 'properties["plan"] != "free"', "page_size": "37", "output_properties": '["plan", "$email"]'},
        {"page_size": "100"},
        {"behaviors": _behaviors(("b", "3d", [{"event": "App Open"}])), "where": 'behaviors["b"] == 0'},
    ],
    ids=["where", "all", "behaviors"],
)
def test_mixpanel_utils_concurrent_paginator(loaded: Loaded, http_base: str, params: dict[str, str]) -> None:
    """mixpanel-utils' query_engage: page 0, then pages 1..n at once from `total` (4 threads)."""
    from mixpanel_utils import MixpanelUtils

    from tests.integration.query.report_env import SA_SECRET, SA_USER

    mu = MixpanelUtils(SA_SECRET, service_account_username=SA_USER, project_id=23, read_pool_size=4, max_retries=1)
    mu.formatted_api = http_base + "/api"
    sent = dict(params)
    results = mu.query_engage(sent, timezone_offset=0 if "behaviors" in params else None)
    expected: list[dict[str, Any]] = []
    for page in range(100):  # the oracle's pages of 1000, concatenated
        body = loaded.oracle(23, {**sent, "page_size": "1000", "page": str(page), "session_id": "s"})
        assert isinstance(body, dict), body
        expected += body["results"]
        if not body["results"]:
            break
    assert len(expected) > int(sent.get("page_size", "1000"))  # several pages, fetched concurrently
    problems = diff(results, expected)
    assert not problems, "\n".join(problems[:20])
