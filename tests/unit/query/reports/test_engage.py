"""Pure parts of /engage: request parsing (every member's errors name it), paging sessions,
group key ids, and the builders (bound values only, the project guard in every read)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from footfall.services.query.params import Params
from footfall.services.query.reports.engage import parse_request, query
from footfall.services.query.reports.engage.request import MAX_DISTINCT_IDS, EngageRequest
from footfall.services.query.reports.engage.session import (
    SESSION_HOURS,
    parse_session,
    single_page_session,
    snapshot_session,
)
from footfall.services.query.reports.engage.shape import result
from footfall.shared.errors import ParamError
from footfall.shared.profiles.groups import data_group_id
from footfall.shared.sql import render

NOW = datetime(2024, 3, 5, 12, 0, tzinfo=UTC)
MARKER = "Zq7Marker"  # request text that must never reach the SQL


def req(**params: str) -> EngageRequest:
    return parse_request(Params(params))


def refused(**params: str) -> str:
    with pytest.raises(ParamError) as exc:
        req(**params)
    assert exc.value.status == 400
    return exc.value.message


def behaviors(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


ONE = {"name": "buys", "window": "30d", "event_selectors": [{"event": "Purchase"}]}


# -- defaults and members --------------------------------------------------------------------------
def test_defaults() -> None:
    r = req()
    assert (r.page, r.page_size, r.session_id, r.distinct_ids, r.where, r.behaviors) == (
        0,
        1000,
        None,
        None,
        None,
        None,
    )
    assert r.output_properties is None and r.data_group_id is None and r.as_of is None
    assert req(where="", distinct_id="", distinct_ids='["a"]').distinct_ids == ("a",)  # empty = absent


def test_distinct_ids_are_text_deduplicated_and_bounded() -> None:
    assert req(distinct_ids='["b", 10, "b", "a"]').distinct_ids == ("b", "10", "a")
    assert req(distinct_ids="[]").distinct_ids == ()
    assert req(distinct_id="x y").distinct_ids == ("x y",)
    assert len(req(distinct_ids=json.dumps([str(i) for i in range(MAX_DISTINCT_IDS)])).distinct_ids or ()) == 2000
    message = refused(distinct_ids=json.dumps([str(i) for i in range(MAX_DISTINCT_IDS + 1)]))
    assert "distinct_ids" in message and "2000" in message


@pytest.mark.parametrize(
    ("params", "member"),
    [
        ({"distinct_ids": "[alice"}, "distinct_ids"),
        ({"distinct_ids": '"alice"'}, "distinct_ids"),
        ({"distinct_ids": "[true]"}, "distinct_ids"),
        ({"distinct_ids": "[1.5]"}, "distinct_ids"),
        ({"output_properties": "[1]"}, "output_properties"),
        ({"output_properties": "{"}, "output_properties"),
        ({"behaviors": "[{"}, "behaviors"),
        ({"behaviors": '{"name": "b"}'}, "behaviors"),
        ({"filter_by_cohort": "{id: 1}"}, "filter_by_cohort"),
        ({"filter_by_cohort": '"seven"'}, "filter_by_cohort"),
        ({"data_group_id": "company"}, "data_group_id"),
        ({"data_group_id": str(2**63)}, "data_group_id"),
    ],
    ids=[
        "ids-bad-json",
        "ids-not-array",
        "ids-boolean",
        "ids-float",
        "output-not-names",
        "output-bad-json",
        "behaviors-bad-json",
        "behaviors-not-array",
        "cohort-bad-json",
        "cohort-not-id",
        "group-not-integer",
        "group-out-of-range",
    ],
)
def test_bad_members_are_400_naming_them(params: dict[str, str], member: str) -> None:
    assert f"Error in {member}" in refused(**params)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("distinct_id", "distinct_ids"),
        ("where", "selector"),
        ("behaviors", "filter_by_cohort"),
        ("filter_by_cohort", "data_group_id"),
        ("behaviors", "data_group_id"),
    ],
    ids=lambda x: x,
)
def test_mutually_exclusive_members_name_both(a: str, b: str) -> None:
    values = {
        "distinct_id": "alice",
        "distinct_ids": '["bob"]',
        "where": "true",
        "selector": "true",
        "behaviors": behaviors(ONE),
        "filter_by_cohort": '{"id": 1}',
        "data_group_id": "5",
    }
    message = refused(**{a: values[a], b: values[b]})
    assert message == f"{a} and {b} are mutually exclusive"


# -- paging ----------------------------------------------------------------------------------------
def test_page_size_default_cap_and_bounds() -> None:
    assert req(page_size="250").page_size == 250
    assert req(page_size="1000").page_size == 1000
    assert req(page_size="5000").page_size == 1000  # capped; the answer echoes the effective size
    for bad in ("0", "-3", "ten", "1.5"):
        assert "Error in page_size" in refused(page_size=bad)


def test_page_needs_a_session_and_is_a_non_negative_integer() -> None:
    assert "Error in session_id" in refused(page="1")
    assert "Error in page" in refused(page="-1", session_id="s")
    assert "Error in page" in refused(page="x", session_id="s")
    assert req(page="3", session_id="s").page == 3
    assert req(page="0").session_id is None


# -- where (the profile context) ---------------------------------------------------------------------
def test_where_reads_the_profile() -> None:
    assert req(where='user["plan"] == "pro"').where is not None
    assert req(selector='properties["time"] > 5').where is not None  # a profile property, not an event time


@pytest.mark.parametrize(
    ("params", "start"),
    [
        ({"where": 'event["x"] == 1'}, "Error in where: invalid expression at position 0: event[...] is not"),
        ({"selector": 'event["$time"] > 1'}, "Error in selector: invalid expression"),
        ({"where": 'behaviors["b"] > 0'}, 'Error in where: invalid expression at position 0: behaviors["b"] is not'),
        ({"where": 'properties["plan"] =='}, "Error in where: syntax error at position"),
        ({"where": "1 and true"}, "Error in where: invalid expression"),
    ],
    ids=["event-accessor", "event-accessor-selector", "undefined-behavior", "syntax", "and-on-number"],
)
def test_bad_where_is_400_naming_the_member(params: dict[str, str], start: str) -> None:
    assert refused(**params).startswith(start)


def test_where_reads_only_defined_behaviors_and_counts_only_those_it_reads() -> None:
    two = behaviors(ONE, {**ONE, "name": "views", "event_selectors": [{"event": "View"}]})
    r = req(behaviors=two, where='behaviors["views"] >= 2 and properties["plan"] == "pro"')
    assert [b.name for b in r.behaviors or ()] == ["buys", "views"]
    assert [b.name for b in r.counted] == ["views"]
    assert req(behaviors=two).counted == ()


# -- behaviors ---------------------------------------------------------------------------------------
def _one(**kw: Any) -> dict[str, Any]:
    return {**ONE, **kw}


BAD_BEHAVIORS = {
    "not-objects": ["x"],
    "no-unit": [_one(window="30")],
    "zero": [_one(window="0d")],
    "weeks": [_one(window="2w")],
    "too-long": [_one(window="36501d")],
    "no-selectors": [_one(event_selectors=[])],
    "no-name": [_one(name="")],
    "no-event": [_one(event_selectors=[{"selector": "true"}])],
    "bad-selector": [_one(event_selectors=[{"event": "E", "selector": "=="}])],
    "profile-accessor-in-selector": [_one(event_selectors=[{"event": "E", "selector": 'user["x"] == 1'}])],
    "selector-not-string": [_one(event_selectors=[{"event": "E", "selector": 3}])],
    "duplicate-name": [_one(), _one(window="2d")],
    "too-many": [_one(name=f"b{i}") for i in range(51)],
}


@pytest.mark.parametrize("items", list(BAD_BEHAVIORS.values()), ids=list(BAD_BEHAVIORS))
def test_bad_behaviors_are_400(items: list[Any]) -> None:
    assert refused(behaviors=json.dumps(items)).startswith("Error in behaviors")


def test_behaviors_parse() -> None:
    r = req(
        behaviors=behaviors(
            _one(window="7d", event_selectors=[{"event": "Purchase", "selector": 'number(properties["p"]) > 1'}]),
            *[_one(name=f"b{i}", event_selectors=[{"event": "E", "selector": None}]) for i in range(49)],
        )
    )
    first = (r.behaviors or ())[0]
    assert (first.name, first.days, first.selectors[0].event) == ("buys", 7, "Purchase")
    assert first.selectors[0].selector is not None and (r.behaviors or ())[1].selectors[0].selector is None


def test_as_of_timestamp_seconds_or_milliseconds_only_with_behaviors() -> None:
    stamp = int(NOW.timestamp())
    assert req(behaviors=behaviors(ONE), as_of_timestamp=str(stamp)).as_of == NOW
    assert req(behaviors=behaviors(ONE), as_of_timestamp=str(stamp * 1000 + 5)).as_of == NOW + timedelta(milliseconds=5)
    assert req(as_of_timestamp="garbage").as_of is None  # ignored without behaviors
    assert "Error in as_of_timestamp" in refused(behaviors=behaviors(ONE), as_of_timestamp="soon")
    assert "Error in as_of_timestamp" in refused(behaviors=behaviors(ONE), as_of_timestamp="-5")


# -- cohorts -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ['{"id": 5}', "5"], ids=["object", "bare"])
def test_a_cohort_id_is_read_as_object_or_bare_integer(spec: str) -> None:
    cohort = req(filter_by_cohort=spec, include_all_users="FALSE").cohort
    assert cohort is not None and (cohort.cohort_id, cohort.raw, cohort.include_all_users) == (5, None, "FALSE")


def test_a_raw_cohort_is_kept_for_resolution() -> None:
    cohort = req(filter_by_cohort='{"raw_cohort": {"distinct_ids": ["a"]}}').cohort
    assert cohort is not None and (cohort.cohort_id, cohort.raw) == (None, {"distinct_ids": ["a"]})


@pytest.mark.parametrize("spec", ['"5"', "true", '{"id": "5"}', '{"id": true}', "[5]", "{}"])
def test_a_malformed_cohort_filter_is_refused(spec: str) -> None:
    assert refused(filter_by_cohort=spec) == 'Error in filter_by_cohort: must be {"id": <cohort id>} or a cohort id'


def test_include_all_users_flag() -> None:
    from footfall.services.query.reports.engage.request import include_all_users

    assert [include_all_users(v) for v in (None, "true", " TRUE ", "1", "false", "0", "False")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(ParamError, match="Error in include_all_users"):
        include_all_users("maybe")
    assert req(include_all_users="maybe").cohort is None  # ignored without filter_by_cohort


def test_checks_run_in_the_oracles_order() -> None:
    # exclusive members first, then paging, ..., the cohort last
    assert "mutually exclusive" in refused(distinct_id="a", distinct_ids="[", page="x")
    assert "Error in page_size" in refused(page_size="0", distinct_ids="[")
    assert "Error in distinct_ids" in refused(distinct_ids="[", where="event[1]")
    assert "Error in where" in refused(where='event["x"]', filter_by_cohort="3")


# -- sessions ----------------------------------------------------------------------------------------
def test_session_ids_round_trip() -> None:
    snap = snapshot_session(NOW)
    assert re.fullmatch(r"\d+-S[0-9a-f]{20}", snap.session_id)
    assert parse_session(snap.session_id, NOW + timedelta(hours=1)) == snap
    single = single_page_session(NOW, 7)
    back = parse_session(single.session_id, NOW)
    assert (back.snapshot, back.total, back.created) == (False, 7, NOW)
    assert snapshot_session(NOW).session_id != snap.session_id


@pytest.mark.parametrize(
    "make",
    [
        lambda: "1234567890-EXAMPL",
        lambda: "",
        lambda: snapshot_session(NOW).session_id + "x",
        lambda: snapshot_session(NOW - timedelta(hours=SESSION_HOURS, seconds=1)).session_id,
        lambda: snapshot_session(NOW + timedelta(hours=1)).session_id,
    ],
    ids=["mixpanel-shaped", "empty", "trailing", "expired", "future"],
)
def test_unknown_or_expired_sessions_are_400(make: Any) -> None:
    with pytest.raises(ParamError) as exc:
        parse_session(make(), NOW)
    assert "unknown or expired session" in exc.value.message


# -- group key ids -------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["company", "team", "", "ключ 🎉"])
def test_data_group_id_is_a_signed_blake2b_prefix(key: str) -> None:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    expected = int.from_bytes(digest, "big") - (1 << 64 if digest[0] >= 0x80 else 0)
    assert data_group_id(key) == expected and -(2**63) <= expected < 2**63


# -- shape -----------------------------------------------------------------------------------------------
def test_results_keep_stored_order_and_output_properties_order() -> None:
    text = '{"b": 1, "a": [1, "x"], "c": null, "n": {"k": 1.5}}'
    assert list(result("u", text, None)["$properties"]) == ["b", "a", "c", "n"]
    assert result("u", text, ("n", "missing", "b")) == {"$distinct_id": "u", "$properties": {"n": {"k": 1.5}, "b": 1}}
    assert result("u", text, ())["$properties"] == {}
    assert result("u", "not json", None)["$properties"] == {}
    big = 123456789012345678901234567890  # beyond 64 bits: stays exact
    assert result("u", f'{{"big": {big}}}', None)["$properties"]["big"] == big


# -- builders ------------------------------------------------------------------------------------------
def _texts(r: EngageRequest) -> list[tuple[str, dict[str, Any]]]:
    queries = [
        query.probe(r, 7, "", NOW, "Asia/Tokyo"),
        query.snapshot(r, 7, "", NOW, "Asia/Tokyo", "123-Sabc", NOW, more_than=1000),
        query.session_size(7, "123-Sabc"),
        query.session_page(7, "123-Sabc", 10, 20),
        query.current(7, "company", [MARKER, "b"]),
        query.group_keys(7),
    ]
    return [(render(q.sql), q.binds.values) for q in queries]


def _check_bound_and_guarded(texts: list[tuple[str, dict[str, Any]]]) -> None:
    for text, values in texts:
        assert MARKER not in text
        reads = len(re.findall(r"\b(?:FROM|JOIN)\s+(?:profiles|events|engage_sessions|known_ids)\b", text))
        guards = len(re.findall(r"project_id = \{p\d+:UInt64\}", text))
        assert reads == guards, text
        for placeholder in re.findall(r"\{(p\d+):[^}]+\}", text):
            assert placeholder in values


def test_cohort_builders_bind_every_value_and_guard_every_read() -> None:
    from dataclasses import replace

    from footfall.services.query.reports.engage.request import Membership

    marker = json.dumps(MARKER)
    dynamic = {
        "name": MARKER,
        "is_static": False,
        "selector": {
            "operator": "and",
            "children": [
                {"property": "behaviors", "value": "b", "operator": ">", "operand": 1},
                {"property": "user", "value": MARKER, "operator": "==", "operand": MARKER, "type": "string"},
                {"property": "cohort", "value": 3, "operator": "not in"},
            ],
        },
        "behaviors": {
            "b": {
                "count": {"event_selector": {"event": MARKER, "selector": f"properties[{marker}] == {marker}"}},
                "window": {"unit": "day", "value": 7},
            }
        },
    }
    static = {"name": "s", "is_static": True, "distinct_ids": [MARKER]}
    for cohort_id in (2, 3):
        r = replace(
            req(where=f"properties[{marker}] == {marker}", distinct_ids=json.dumps([MARKER]), filter_by_cohort="2"),
            membership=Membership(cohort_id, {2: dynamic, 3: static}, keep_all=cohort_id == 2),
        )
        texts = _texts(r)
        _check_bound_and_guarded(texts)
        assert "known_ids" in texts[1][0] if cohort_id == 2 else "has_profile" in texts[1][0]


def test_builders_bind_every_value_and_guard_every_read() -> None:
    marker = json.dumps(MARKER)
    r = req(
        where=f'properties[{marker}] == {marker} and behaviors["b"] > 1',
        distinct_ids=json.dumps([MARKER, "x"]),
        output_properties=json.dumps([MARKER]),
        behaviors=behaviors(
            {
                "name": "b",
                "window": "3d",
                "event_selectors": [{"event": MARKER, "selector": f"properties[{marker}] == {marker}"}],
            }
        ),
    )
    _check_bound_and_guarded(_texts(r))
    first, snap = _texts(r)[:2]
    assert "events FINAL PREWHERE" in first[0] and "profiles FINAL PREWHERE" in first[0]
    assert snap[0].startswith("INSERT INTO engage_sessions (project_id, session_id, group_key, position, profile_id")


@pytest.mark.parametrize(
    ("days", "tz", "start"),
    [
        # now 2024-03-05T12:00Z: in Tokyo (21:00) today is 03-05; in Los Angeles (04:00) it is 03-05 too
        (1, "Asia/Tokyo", datetime(2024, 3, 4, 15, tzinfo=UTC)),
        (2, "America/Los_Angeles", datetime(2024, 3, 4, 8, tzinfo=UTC)),
        (36_500, "UTC", None),  # reaches before the epoch: no lower bound
    ],
)
def test_behaviors_count_local_calendar_days_with_the_cohort_evaluator(days: int, tz: str, start: Any) -> None:
    item = {"name": "buys", "window": f"{days}d", "event_selectors": [{"event": "Purchase", "selector": "true"}]}
    r = req(behaviors=behaviors(item), where='behaviors["buys"] > 0')
    assert r.counted[0].entry() == {
        "count": {"event_selectors": [{"event": "Purchase", "selector": "true"}], "type": "absolute"},
        "window": {"unit": "day", "value": days},
    }
    values = query.probe(r, 7, "", NOW, tz).binds.values.values()
    bounds = {v for v in values if isinstance(v, datetime)}  # the scan's range and the behaviour's
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert bounds == {start or epoch, NOW + timedelta(milliseconds=1)}


def test_unread_behaviors_read_no_events() -> None:
    r = req(behaviors=behaviors(ONE), where='properties["plan"] == "pro"')
    assert "events" not in render(query.probe(r, 7, "", NOW, "UTC").sql)


# -- the page-0 flow (a scripted warehouse: which statements run, in which order) ---------------------
class ScriptedWarehouse:
    """Answers each statement by its first words from a script; records what ran."""

    def __init__(self, script: dict[str, list[list[tuple[Any, ...]]]]) -> None:
        self.script = script
        self.ran: list[str] = []

    def query(self, text: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        kind = next(k for k in self.script if text.startswith(k))
        self.ran.append(kind)
        answers = self.script[kind]
        return answers.pop(0) if len(answers) > 1 else answers[0]

    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


PROBE = "SELECT profile_id, properties FROM (SELECT "
INSERT = "INSERT INTO engage_sessions"
SIZE = "SELECT count(), any(group_key)"
SLICE = "SELECT position, profile_id"
CURRENT = "SELECT profile_id, properties FROM profiles"


def run_engage(warehouse: ScriptedWarehouse, **params: str) -> dict[str, Any]:
    import asyncio

    from footfall.services.query.endpoints import QueryContext
    from footfall.services.query.reports.engage import engage
    from footfall.shared.auth import Principal
    from footfall.shared.metadata import Project

    ctx = QueryContext(Principal(Project(7, "p", "UTC"), "secret"), Params(params), warehouse, None)  # type: ignore[arg-type]
    return asyncio.run(engage(ctx))


def rows(n: int) -> list[tuple[Any, ...]]:
    return [(f"u{i:03d}", json.dumps({"i": i})) for i in range(n)]


def test_a_result_that_fits_on_a_page_is_one_probe_and_no_write() -> None:
    wh = ScriptedWarehouse({PROBE: [rows(3)]})
    body = run_engage(wh, where="true", page_size="3")
    assert wh.ran == [PROBE] and body["total"] == 3 and len(body["results"]) == 3
    assert re.fullmatch(r"\d+-P3-[0-9a-f]{12}", body["session_id"])


def test_a_larger_result_is_snapshotted_and_page_0_read_from_the_snapshot() -> None:
    ranked = [(0, "u000"), (1, "u001"), (2, "u002")]
    wh = ScriptedWarehouse({PROBE: [rows(4)], INSERT: [[]], SIZE: [[(10, "")]], SLICE: [ranked]})
    body = run_engage(wh, where="true", page_size="3")
    assert wh.ran == [PROBE, INSERT, SIZE, SLICE]  # the probe read these very members: no second read
    assert body["total"] == 10 and [r["$properties"]["i"] for r in body["results"]] == [0, 1, 2]
    assert re.fullmatch(r"\d+-S[0-9a-f]{20}", body["session_id"])
    # Other members in the snapshot than the probe saw (written in between): their current properties.
    moved = [(0, "u000"), (1, "u001"), (2, "u005")]
    wh = ScriptedWarehouse({PROBE: [rows(4)], INSERT: [[]], SIZE: [[(10, "")]], SLICE: [moved], CURRENT: [rows(2)]})
    body = run_engage(wh, where="true", page_size="3")
    assert wh.ran == [PROBE, INSERT, SIZE, SLICE, CURRENT]
    assert [r["$distinct_id"] for r in body["results"]] == ["u000", "u001"]  # u005 deleted since


def test_behaviour_counts_are_ranked_once_and_every_page_read_from_the_snapshot() -> None:
    ranked = [(0, "u000"), (1, "u001")]
    wh = ScriptedWarehouse({INSERT: [[]], SIZE: [[(2, "")]], SLICE: [ranked], CURRENT: [rows(2)]})
    body = run_engage(wh, behaviors=behaviors(ONE), where='behaviors["buys"] > 0', page_size="5")
    assert wh.ran == [INSERT, SIZE, SLICE, CURRENT] and body["total"] == 2  # no probe: one counting scan
    assert re.fullmatch(r"\d+-S[0-9a-f]{20}", body["session_id"])
    wh = ScriptedWarehouse({INSERT: [[]], SIZE: [[(0, "")]]})
    body = run_engage(wh, behaviors=behaviors(ONE), where='behaviors["buys"] > 0', page_size="5")
    assert wh.ran == [INSERT, SIZE] and body["total"] == 0 and body["results"] == []


def test_probe_and_snapshot_disagreeing_retries_then_503() -> None:
    from footfall.shared.errors import UnavailableError

    wh = ScriptedWarehouse({PROBE: [rows(4), rows(2)], INSERT: [[]], SIZE: [[(0, "")]]})
    assert run_engage(wh, where="true", page_size="3")["total"] == 2  # the second try agrees
    assert wh.ran == [PROBE, INSERT, SIZE, PROBE]
    always = ScriptedWarehouse({PROBE: [rows(4)], INSERT: [[]], SIZE: [[(0, "")]]})
    with pytest.raises(UnavailableError):
        run_engage(always, where="true", page_size="3")
    assert always.ran.count(INSERT) == 3
