"""Hand-written cases pinning the cohort oracle (cohorts.py) to semantics-2.md §13 and its documented decisions.

Pure: no IO, no markers.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from .cohorts import (
    MAX_BEHAVIORS,
    MAX_DEPTH,
    MAX_NODES,
    Cohort,
    CohortError,
    apply_patch,
    check_delete,
    cohort_object,
    cohorts_list,
    count,
    created_text,
    engage_by_cohort,
    members,
    parse_cohort,
    parse_raw_cohort,
    user_profiles,
    window_start,
)
from .engage import EngageError
from .profiles import Profile

_ids = itertools.count()


# ------------------------------------------------------------------------------------------------ helpers
def ms(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, milli: int = 0, tz: str = "UTC") -> int:
    """Epoch ms of a wall-clock time in `tz` (fold 0)."""
    dt = datetime(y, mo, d, h, mi, s, milli * 1000, tzinfo=ZoneInfo(tz))
    return int(dt.timestamp() * 1000)


def ev(name: str, t: int, uid: str = "u1", iid: str | None = None, **props: object) -> dict:
    return {
        "event": name,
        "properties": {"time": t, "distinct_id": uid, "$insert_id": iid or f"i{next(_ids)}", **props},
    }


def beh(
    event: str = "Buy",
    window: tuple[str, int] | None = ("day", 30),
    *,
    selector: object = None,
    kind: str = "absolute",
    dates: tuple[str, str] | None = None,
) -> dict:
    out: dict = {"count": {"event_selector": {"event": event, "selector": selector}, "type": kind}}
    if window is not None:
        out["window"] = {"unit": window[0], "value": window[1]}
    if dates is not None:
        out["from_date"], out["to_date"] = dates
    return out


def leaf(key: str, op: str, n: int) -> dict:
    return {"property": "behaviors", "value": key, "operator": op, "operand": n}


_NO = object()


def user(name: str, op: str, operand: object = _NO, kind: str | None = None) -> dict:
    out: dict = {"property": "user", "value": name, "operator": op}
    if operand is not _NO:
        out["operand"] = operand
    if kind is not None:
        out["type"] = kind
    return out


def ref(cohort_id: int, op: str = "in") -> dict:
    return {"property": "cohort", "value": cohort_id, "operator": op}


def ok(body: dict, **kw: object) -> Cohort:
    out = parse_cohort({"name": "c", **body}, **kw)  # type: ignore[arg-type]
    assert isinstance(out, Cohort), out
    return out


def bad(body: object, *, member: str | None = None, contains: str = "", **kw: object) -> CohortError:
    out = parse_cohort(body if not isinstance(body, dict) or "name" in body else {"name": "c", **body}, **kw)  # type: ignore[arg-type]
    assert isinstance(out, CohortError), out
    if member is not None:
        assert out.member == member, out.message
        assert out.message.startswith(member), out.message
    assert contains in out.message, out.message
    return out


def one(
    selector: object,
    behaviors: dict | list | None = None,
    *,
    events: list | None = None,
    profiles: dict | None = None,
    tz: str = "UTC",
    now: int,
) -> set[str]:
    """Members of a single dynamic cohort (id 1)."""
    cohort = ok({"selector": selector, "behaviors": behaviors}, cohort_id=1)
    return members(1, {1: cohort}, events=events or [], profiles=profiles or {}, tz=tz, now_ms=now)


def did(n_op: str, n: int, behavior: dict, **kw: object) -> set[str]:
    return one(leaf("b", n_op, n), {"b": behavior}, **kw)  # type: ignore[arg-type]


NOW = ms(2024, 5, 10, 12)  # Friday 2024-05-10 12:00 UTC


# ------------------------------------------------------------------------------------------------ windows
def test_day_window_local_midnight_edges_utc():
    events = [
        ev("Buy", ms(2024, 5, 10), "today0"),
        ev("Buy", ms(2024, 5, 9, 23, 59, 59, 999), "yday_end"),
        ev("Buy", ms(2024, 5, 9), "yday0"),
        ev("Buy", ms(2024, 5, 8, 23, 59, 59, 999), "before"),
    ]
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=NOW) == {"today0"}
    assert did(">=", 1, beh(window=("day", 2)), events=events, now=NOW) == {"today0", "yday_end", "yday0"}


def test_events_after_now_do_not_count_but_are_in_the_universe():
    events = [ev("Buy", NOW, "at_now"), ev("Buy", NOW + 1, "after"), ev("Buy", ms(2024, 5, 10, 23), "tonight")]
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=NOW) == {"at_now"}
    assert did("==", 0, beh(window=("day", 1)), events=events, now=NOW) == {"after", "tonight"}
    # from/to dates that include the future stop at now as well
    assert did(">=", 1, beh(window=None, dates=("2024-05-10", "2024-05-11")), events=events, now=NOW) == {"at_now"}


def test_day_window_follows_the_project_time_zone():
    events = [ev("Buy", ms(2024, 5, 10, 1), "a")]  # 2024-05-09 21:00 in New York
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=NOW) == {"a"}
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=NOW, tz="America/New_York") == set()
    assert did(">=", 1, beh(window=("day", 2)), events=events, now=NOW, tz="America/New_York") == {"a"}


def test_day_window_across_spring_forward_berlin():
    tz = "Europe/Berlin"  # 2024-03-31 02:00 CET -> 03:00 CEST
    now = ms(2024, 4, 1, 10, tz=tz)  # 08:00Z
    events = [
        ev("Buy", ms(2024, 4, 1, 0, 30, tz=tz), "apr1"),  # 2024-03-31T22:30Z
        ev("Buy", ms(2024, 3, 31, 23, 59, 59, 999, tz=tz), "mar31_late"),  # 21:59:59.999Z
        ev("Buy", ms(2024, 3, 31, 0, 0, tz=tz), "mar31_0"),  # 2024-03-30T23:00Z
        ev("Buy", ms(2024, 3, 30, 23, 59, 59, 999, tz=tz), "mar30"),  # 22:59:59.999Z
    ]
    assert ms(2024, 4, 1, tz=tz) == ms(2024, 3, 31, 22)  # local midnight after the change is 22:00Z
    assert ms(2024, 3, 31, tz=tz) == ms(2024, 3, 30, 23)
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=now, tz=tz) == {"apr1"}
    assert did(">=", 1, beh(window=("day", 2)), events=events, now=now, tz=tz) == {"apr1", "mar31_late", "mar31_0"}
    # the 23-hour day itself, with now on it
    now = ms(2024, 3, 31, 12, tz=tz)
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=now, tz=tz) == {"mar31_0"}


def test_day_window_across_fall_back_new_york():
    tz = "America/New_York"  # 2024-11-03 02:00 EDT -> 01:00 EST
    now = ms(2024, 11, 4, 12, tz=tz)  # 17:00Z
    events = [
        ev("Buy", ms(2024, 11, 4, 5), "nov4_0"),  # 00:00 EST
        ev("Buy", ms(2024, 11, 4, 4, 59, 59, 999), "nov3_end"),  # 23:59:59.999 EST
        ev("Buy", ms(2024, 11, 3, 4), "nov3_0"),  # 00:00 EDT
        ev("Buy", ms(2024, 11, 3, 3, 59, 59, 999), "nov2"),  # 23:59:59.999 EDT
        ev("Buy", ms(2024, 11, 3, 6), "repeated_1am"),  # 01:00 EST (the second 1 a.m.)
    ]
    assert did(">=", 1, beh(window=("day", 1)), events=events, now=now, tz=tz) == {"nov4_0"}
    assert did(">=", 1, beh(window=("day", 2)), events=events, now=now, tz=tz) == {
        "nov4_0",
        "nov3_end",
        "nov3_0",
        "repeated_1am",
    }


def test_week_window():
    # today = Friday 2024-05-10; week 1 = 2024-05-04 .. today, week 2 = from 2024-04-27
    assert window_start(date(2024, 5, 10), "week", 1) == date(2024, 5, 4)
    assert window_start(date(2024, 5, 10), "week", 2) == date(2024, 4, 27)
    events = [ev("Buy", ms(2024, 5, 4), "in1"), ev("Buy", ms(2024, 5, 3, 23, 59, 59, 999), "out1")]
    events += [ev("Buy", ms(2024, 4, 27), "in2"), ev("Buy", ms(2024, 4, 26, 23, 59, 59, 999), "out2")]
    assert did(">=", 1, beh(window=("week", 1)), events=events, now=NOW) == {"in1"}
    assert did(">=", 1, beh(window=("week", 2)), events=events, now=NOW) == {"in1", "out1", "in2"}
    # the same instants in Berlin (UTC+2): the local week starts 2 hours earlier
    assert did(">=", 1, beh(window=("week", 1)), events=events, now=NOW, tz="Europe/Berlin") == {"in1", "out1"}


@pytest.mark.parametrize(
    ("today", "n", "start"),
    [
        (date(2024, 3, 31), 1, date(2024, 3, 1)),  # Feb 29 (clamped from 31) + 1
        (date(2024, 3, 30), 1, date(2024, 3, 1)),  # Feb 29 (clamped from 30) + 1
        (date(2024, 3, 29), 1, date(2024, 3, 1)),
        (date(2024, 3, 28), 1, date(2024, 2, 29)),
        (date(2023, 3, 31), 1, date(2023, 3, 1)),  # Feb 28 + 1
        (date(2024, 5, 31), 1, date(2024, 5, 1)),  # Apr 30 + 1
        (date(2024, 1, 15), 1, date(2023, 12, 16)),
        (date(2024, 1, 15), 2, date(2023, 11, 16)),
        (date(2024, 8, 31), 6, date(2024, 3, 1)),  # Feb 29 + 1
        (date(2024, 5, 10), 12, date(2023, 5, 11)),
    ],
)
def test_month_window_start_is_clamped(today: date, n: int, start: date):
    assert window_start(today, "month", n) == start


def test_month_window_membership_at_month_end():
    now = ms(2024, 3, 31, 9)
    events = [ev("Buy", ms(2024, 3, 1), "mar1"), ev("Buy", ms(2024, 2, 29, 23, 59, 59, 999), "feb29")]
    assert did(">=", 1, beh(window=("month", 1)), events=events, now=now) == {"mar1"}
    assert did(">=", 1, beh(window=("month", 2)), events=events, now=now) == {"mar1", "feb29"}
    # Berlin, across the spring-forward day: today Apr 30 -> Mar 30 + 1 = Mar 31, midnight CET = Mar 30 23:00Z
    tz = "Europe/Berlin"
    events = [ev("Buy", ms(2024, 3, 30, 23), "in"), ev("Buy", ms(2024, 3, 30, 22, 59, 59, 999), "out")]
    assert did(">=", 1, beh(window=("month", 1)), events=events, now=ms(2024, 4, 30, 9, tz=tz), tz=tz) == {"in"}


def test_huge_windows_have_no_lower_bound():
    assert window_start(date(2024, 5, 10), "day", 10**9) is None
    assert window_start(date(2024, 5, 10), "month", 10**6) is None
    assert window_start(date(2024, 5, 10), "week", 6500) is None  # before 1900
    events = [ev("Buy", ms(1971, 1, 2), "old")]
    assert did(">=", 1, beh(window=("day", 10**12)), events=events, now=NOW) == {"old"}


def test_from_to_dates_are_local_days():
    tz = "Europe/Berlin"
    b = beh(window=None, dates=("2024-03-30", "2024-03-31"))
    events = [
        ev("Buy", ms(2024, 3, 30, tz=tz), "first"),  # 2024-03-29T23:00Z
        ev("Buy", ms(2024, 3, 29, 23, 59, 59, 999, tz=tz), "before"),
        ev("Buy", ms(2024, 3, 31, 23, 59, 59, 999, tz=tz), "last"),  # 21:59:59.999Z (CEST)
        ev("Buy", ms(2024, 4, 1, tz=tz), "after"),  # 2024-03-31T22:00Z
    ]
    assert did(">=", 1, b, events=events, now=NOW, tz=tz) == {"first", "last"}
    assert did(">=", 1, b, events=events, now=NOW) == {"last", "after"}  # UTC days: "first" is on Mar 29


def test_days_type_counts_distinct_local_days():
    tz = "Europe/Berlin"
    events = [
        ev("Buy", ms(2024, 5, 8, 21), "u"),  # 23:00 May 8 local
        ev("Buy", ms(2024, 5, 8, 23), "u"),  # 01:00 May 9 local
        ev("Buy", ms(2024, 5, 9, 8), "u"),  # 10:00 May 9 local
        ev("Buy", ms(2024, 5, 9, 21, 30), "v"),  # 23:30 May 9 local
        ev("Buy", ms(2024, 5, 9, 22, 30), "v"),  # 00:30 May 10 local
    ]
    days = beh(window=("day", 7), kind="days")
    assert did("==", 2, days, events=events, now=NOW, tz=tz) == {"u", "v"}
    assert did("==", 3, beh(window=("day", 7)), events=events, now=NOW, tz=tz) == {"u"}
    # in UTC: u has May 8 and May 9, v only May 9
    assert did("==", 2, days, events=events, now=NOW) == {"u"}
    assert did("==", 1, days, events=events, now=NOW) == {"v"}


# --------------------------------------------------------------------------------------- event selection
def test_duplicates_count_once_and_the_latest_copy_decides_the_selector():
    t = ms(2024, 5, 9)
    sel = 'properties["amount"] > 50'
    events = [
        ev("Buy", t, "a", "x", amount=100),
        ev("Buy", t, "a", "x", amount=10),  # same identity, later copy: 10
        ev("Buy", t, "b", "x", amount=10),
        ev("Buy", t, "b", "x", amount=100),  # later copy: 100
        ev("Buy", t, "c", "x"),
        ev("Buy", t, "c", "x"),
        ev("Buy", t, "c", "y"),  # another insert id: a second event
    ]
    assert did(">=", 1, beh(selector=sel), events=events, now=NOW) == {"b"}
    assert did("==", 1, beh(), events=events, now=NOW) == {"a", "b"}
    assert did("==", 2, beh(), events=events, now=NOW) == {"c"}
    # prepared Events are accepted too (and deduplicated the same way)
    from ._common import prepare

    cohort = ok({"selector": leaf("b", ">=", 1), "behaviors": {"b": beh(selector=sel)}}, cohort_id=1)
    assert members(1, {1: cohort}, events=prepare(events), profiles={}, tz="UTC", now_ms=NOW) == {"b"}


def test_event_name_is_exact_and_selectors_use_event_fields():
    t = ms(2024, 5, 9, 10)
    events = [ev("Buy", t, "a", plan="pro"), ev("buy", t, "b"), ev("Buy ", t, "c"), ev("Buy", t, "d", plan="free")]
    assert did(">=", 1, beh(), events=events, now=NOW) == {"a", "d"}
    tree = {"operator": "and", "children": [{"property": "event", "value": "plan", "operator": "==", "operand": "pro"}]}
    assert did(">=", 1, beh(selector=tree), events=events, now=NOW) == {"a"}
    by_id = {"property": "event", "value": "distinct_id", "operator": "==", "operand": "d"}
    assert did(">=", 1, beh(selector=by_id), events=events, now=NOW) == {"d"}
    assert did(">=", 1, beh(selector='properties["distinct_id"] == "a"'), events=events, now=NOW) == {"a"}
    before = {
        "property": "event",
        "value": "time",
        "operator": "<",
        "operand": "2024-05-09T10:00:01Z",
        "type": "datetime",
    }
    assert did(">=", 1, beh(selector=before), events=events, now=NOW) == {"a", "d"}


def test_engage_list_form_behaviours_or_their_event_selectors():
    t = ms(2024, 5, 9)
    events = [
        ev("Buy", t, "a", amount=100),  # matches both selectors: counted once
        ev("Refund", t, "a"),
        ev("Buy", t, "b", amount=1),
        ev("Refund", t, "b"),
    ]
    listed = [
        {
            "name": "money",
            "window": "7d",
            "event_selectors": [
                {"event": "Buy", "selector": 'properties["amount"] > 50'},
                {"event": "Buy", "selector": 'defined(properties["amount"])'},
                {"event": "Refund"},
            ],
        }
    ]
    cohort = ok({"selector": 'behaviors["money"] >= 2', "behaviors": listed})
    assert cohort.definition()["behaviors"] == {
        "money": {
            "count": {
                "event_selectors": [
                    {"event": "Buy", "selector": 'properties["amount"] > 50'},
                    {"event": "Buy", "selector": 'defined(properties["amount"])'},
                    {"event": "Refund", "selector": None},
                ],
                "type": "absolute",
            },
            "window": {"unit": "day", "value": 7},
        }
    }
    assert one('behaviors["money"] == 2', listed, events=events, now=NOW) == {"a", "b"}
    # one selector: the canonical event_selector form exactly
    single = ok(
        {
            "selector": leaf("p", ">", 0),
            "behaviors": [{"name": "p", "window": "30d", "event_selectors": [{"event": "Buy"}]}],
        }
    )
    assert single.definition()["behaviors"] == {
        "p": {
            "count": {"event_selector": {"event": "Buy", "selector": None}, "type": "absolute"},
            "window": {"unit": "day", "value": 30},
        }
    }
    assert single == ok({"selector": leaf("p", ">", 0), "behaviors": {"p": beh(window=("day", 30))}})


# ----------------------------------------------------------------------------------------- profile leaves
PROFILES = {
    "pro": {"plan": "pro", "age": "42", "signup": "2024-01-05T00:00:00", "vip": "false", "tags": ["a", "b"]},
    "free": {"plan": "free", "age": 17, "email": "x@acme.com", "vip": True, "nothing": None},
    "empty": {},
}
NO_PROFILE_EVENTS = [ev("Visit", ms(2024, 5, 1), "ghost")]


def users(node: dict) -> set[str]:
    return one(node, events=NO_PROFILE_EVENTS, profiles=PROFILES, now=NOW)


def test_ids_without_a_profile_or_property():
    assert users(user("plan", "==", "pro")) == {"pro"}
    assert users(user("plan", "!=", "pro")) == {"free", "empty", "ghost"}
    assert users(user("plan", "defined")) == {"pro", "free"}
    assert users(user("plan", "not defined")) == {"empty", "ghost"}
    assert users(user("plan", ">", "a")) == {"pro", "free"}
    assert users(user("plan", "<", "zzz")) == {"pro", "free"}
    assert users(user("plan", "in", "r")) == {"pro", "free"}
    assert users(user("plan", "not in", "r")) == {"empty", "ghost"}
    # a boolean cast does NOT turn a missing property into false (== false stays false without the property)
    assert users(user("vip", "==", False, "boolean")) == {"pro"}
    assert users(user("vip", "!=", False, "boolean")) == {"free", "empty", "ghost"}
    # a JSON null is defined
    assert users(user("nothing", "defined")) == {"free"}
    assert users(user("nothing", "==", None)) == {"free"}


def test_typed_casts():
    assert users(user("age", ">", 40, "number")) == {"pro"}
    assert users(user("age", ">", "40", "number")) == {"pro"}  # the operand is cast too
    assert users(user("age", "<", 40, "number")) == {"free"}
    assert users(user("age", ">", 40)) == set()  # string type: "42" vs 40 is not ordered
    assert users(user("age", "==", 17)) == {"free"}  # as stored
    assert users(user("signup", ">", "2024-01-01", "datetime")) == {"pro"}
    assert users(user("signup", "<", 1704412800 + 1, "datetime")) == {"pro"}  # epoch seconds of 2024-01-05
    assert users(user("vip", "==", True, "boolean")) == {"free"}
    assert users(user("tags", "in", "a", "list")) == {"pro"}
    assert users(user("tags", "not in", "a", "list")) == {"free", "empty", "ghost"}
    assert users(user("email", "in", "acme")) == {"free"}
    assert users(user("tags", "==", ["a", "b"], "list")) == {"pro"}


def test_profiles_without_events_and_empty_distinct_ids():
    events = [ev("Buy", ms(2024, 5, 9), "buyer"), ev("Buy", ms(2024, 5, 9), "")]
    profiles = {"lurker": {"plan": "pro"}, "buyer": {}}
    assert did("==", 0, beh(), events=events, profiles=profiles, now=NOW) == {"lurker"}
    assert did(">=", 1, beh(), events=events, profiles=profiles, now=NOW) == {"buyer"}
    assert did(">=", 0, beh(), events=events, profiles=profiles, now=NOW) == {"buyer", "lurker"}


def test_profile_objects_are_accepted():
    profiles = {"a": Profile({"plan": "pro"}), "b": Profile({"plan": "free"})}
    assert one(user("plan", "==", "pro"), profiles=profiles, now=NOW) == {"a"}
    state = {(7, None, "a"): Profile({"x": 1}), (7, "company", "acme"): Profile({}), (8, None, "z"): Profile({})}
    assert user_profiles(state, 7) == {"a": {"x": 1}}


# ---------------------------------------------------------------------------------------- string selector
def test_string_selector_equals_the_tree():
    events = [ev("Buy", ms(2024, 5, 9), u) for u in ("pro", "pro", "pro", "free", "ghost")]
    behaviors = {"b": beh(window=("day", 7))}
    tree = {"operator": "and", "children": [leaf("b", ">=", 1), user("plan", "==", "pro")]}
    kw = {"events": events, "profiles": PROFILES, "now": NOW}
    assert one(tree, behaviors, **kw) == {"pro"}
    assert one('behaviors["b"] >= 1 and user["plan"] == "pro"', behaviors, **kw) == {"pro"}
    assert one('behaviors["b"] >= 1 and properties["plan"] == "pro"', behaviors, **kw) == {"pro"}
    assert one('behaviors["b"] == 0', behaviors, **kw) == {"empty"}
    assert one('not defined(user["plan"])', behaviors, **kw) == {"empty", "ghost"}
    assert one('behaviors["b"] == 3 or user["age"] == 17', behaviors, **kw) == {"pro", "free"}
    # stored verbatim
    text = 'behaviors["b"]>=1   and user["plan"]=="pro"'
    assert ok({"selector": text, "behaviors": behaviors}).definition()["selector"] == text


def test_string_selector_errors_name_the_member_and_position():
    e = bad({"selector": 'user["plan"] == '}, member="selector")
    assert e.position == 16 and e.message.endswith("(at position 16)")
    e = bad({"selector": 'user["plan"] = "x"'}, member="selector")
    assert e.position == 13
    e = bad({"selector": 'event["x"] == 1'}, member="selector")
    assert e.position == 0
    e = bad({"selector": 'user["a"] == 1 and behaviors["nope"] > 0'}, member="selector", contains="'nope'")
    assert e.position == 19
    bad({"selector": ""}, member="selector", contains="empty")
    bad({"selector": "1 and 2"}, member="selector")  # a static type error: no position
    e = bad({"selector": leaf("b", ">", 0), "behaviors": {"b": beh(selector='properties["a"] ==')}})
    assert e.member == "behaviors.b.count.event_selector.selector" and e.position == 18
    bad(
        {"selector": leaf("b", ">", 0), "behaviors": {"b": beh(selector='user["a"] == 1')}},
        member="behaviors.b.count.event_selector.selector",
    )


# ------------------------------------------------------------------------------------ references, static
def test_static_cohorts():
    c = ok({"distinct_ids": ["b", "a", "", "b", 7, "outside"]}, cohort_id=1)
    assert c.is_static and c.distinct_ids == ("7", "a", "b", "outside")
    assert c.definition() == {"distinct_ids": ["7", "a", "b", "outside"]}
    assert members(1, {1: c}, events=[], profiles={}, tz="UTC", now_ms=NOW) == {"7", "a", "b", "outside"}
    assert ok({"distinct_ids": []}).distinct_ids == ()
    bad({"distinct_ids": "a,b"}, member="distinct_ids")
    bad({"distinct_ids": ["a", True]}, member="distinct_ids[1]")
    bad({"distinct_ids": ["x" * 256]}, member="distinct_ids[0]")
    ok({"distinct_ids": ["x" * 255]})


def test_nested_and_negated_references():
    events = [ev("Visit", ms(2024, 5, 1), u) for u in ("a", "b", "c", "d")]
    profiles = {"a": {"plan": "pro"}, "b": {"plan": "pro"}, "e": {}}
    cohorts: dict[int, Cohort] = {}
    cohorts[1] = ok({"distinct_ids": ["a", "c", "x"]}, cohort_id=1)
    cohorts[2] = ok({"selector": ref(1)}, cohort_id=2, existing=cohorts)
    cohorts[3] = ok({"selector": ref(2, "not in")}, cohort_id=3, existing=cohorts)
    cohorts[4] = ok(
        {"selector": {"operator": "and", "children": [ref(3), user("plan", "==", "pro")]}},
        cohort_id=4,
        existing=cohorts,
    )
    cohorts[5] = ok({"selector": ref(1, "not in")}, cohort_id=5, existing=cohorts)
    cohorts[6] = ok({"selector": {"operator": "or", "children": [ref(4), ref(1)]}}, cohort_id=6, existing=cohorts)
    got = {i: members(i, cohorts, events=events, profiles=profiles, tz="UTC", now_ms=NOW) for i in cohorts}
    assert got == {
        1: {"a", "c", "x"},  # static: the list, ids outside U included
        2: {"a", "c"},  # dynamic: within U
        3: {"b", "d", "e"},
        4: {"b"},
        5: {"b", "d", "e"},  # U minus the static list
        6: {"a", "b", "c"},
    }
    assert count(3, cohorts, events=events, profiles=profiles, tz="UTC", now_ms=NOW) == 3
    unsaved = ok({"selector": {"operator": "and", "children": [ref(5), ref(2, "not in")]}}, existing=cohorts)
    assert members(unsaved, cohorts, events=events, profiles=profiles, tz="UTC", now_ms=NOW) == {"b", "d", "e"}


# ------------------------------------------------------------------------------------------ validation
def test_cohort_error_equality():
    e = bad({"selector": ref(9)})
    assert e == CohortError("selector.value: unknown cohort 9") and e.member == "selector.value"
    assert e.position is None


def test_metadata_validation():
    c = ok({"selector": user("a", "defined")})
    assert (c.description, c.is_visible) == ("", 1)
    bad({"selector": user("a", "defined"), "name": ""}, member="name")
    bad({"selector": user("a", "defined"), "name": "x" * 256}, member="name")
    assert ok({"selector": user("a", "defined"), "name": "x" * 255}).name == "x" * 255
    bad({"selector": user("a", "defined"), "name": 5}, member="name")
    assert isinstance(parse_cohort({"selector": user("a", "defined")}), CohortError)
    bad({"selector": user("a", "defined"), "description": "d" * 1001}, member="description")
    assert ok({"selector": user("a", "defined"), "description": "d" * 1000}).description == "d" * 1000
    for value, stored in ((True, 1), (False, 0), (0, 0), (1, 1), (None, 1)):
        assert ok({"selector": user("a", "defined"), "is_visible": value}).is_visible == stored
    for value in ("1", 2, "true", 1.0):
        bad({"selector": user("a", "defined"), "is_visible": value}, member="is_visible")
    bad({"selector": user("a", "defined"), "data_group_id": 3}, member="data_group_id")
    ok({"selector": user("a", "defined"), "data_group_id": None, "count": 99, "id": 5, "whatever": 1})
    bad(["not", "an", "object"], member="body")


def test_definition_shape():
    bad({}, member="selector", contains="definition is required")
    bad({"selector": user("a", "defined"), "distinct_ids": ["a"]}, member="distinct_ids")
    bad({"behaviors": {"b": beh()}}, member="selector", contains="required")
    bad({"selector": 5}, member="selector")
    bad({"distinct_ids": ["a"], "add_distinct_ids": ["b"]}, member="add_distinct_ids")
    assert ok({"selector": user("a", "defined"), "behaviors": None}).behaviors == {}


def test_selector_node_errors():
    bad({"selector": user("plan", "like", "x")}, member="selector.operator", contains="unknown operator")
    bad({"selector": {"operator": "xor", "children": [user("a", "defined")]}}, member="selector.operator")
    bad({"selector": {"operator": "and", "children": []}}, member="selector.children")
    bad({"selector": {"operator": "and"}}, member="selector.children")
    bad({"selector": {"operator": "or", "children": [user("a", "defined"), "x"]}}, member="selector.children[1]")
    bad(
        {"selector": {"property": "event", "value": "a", "operator": "defined"}},
        member="selector.property",
        contains="unknown node kind",
    )
    bad({"selector": {"property": "people", "value": "a", "operator": "defined"}}, member="selector.property")
    bad({"selector": user("plan", "==", "x", "text")}, member="selector.type")
    bad({"selector": user("", "defined")}, member="selector.value")
    bad({"selector": user("plan", "==")}, member="selector.operand", contains="required")
    bad({"selector": user("age", ">", "abc", "number")}, member="selector.operand")
    bad({"selector": user("age", ">", True, "number")}, member="selector.operand")
    bad({"selector": user("age", ">", float("inf"), "number")}, member="selector.operand")
    bad({"selector": user("vip", "==", "true", "boolean")}, member="selector.operand")
    bad({"selector": user("at", ">", "yesterday", "datetime")}, member="selector.operand")
    # behaviour leaves
    b = {"b": beh()}
    bad({"selector": leaf("nope", ">", 0), "behaviors": b}, member="selector.value", contains="not defined")
    bad({"selector": leaf("b", "in", 0), "behaviors": b}, member="selector.operator", contains="unknown operator")
    for operand in (-1, 1.5, True, "1", 3.0):
        bad({"selector": leaf("b", ">", operand), "behaviors": b}, member="selector.operand")
    # cohort leaves
    bad({"selector": ref(9)}, member="selector.value", contains="unknown cohort 9")
    bad({"selector": ref(1, "==")}, member="selector.operator", existing={1: ok({"distinct_ids": []}, cohort_id=1)})
    bad({"selector": ref("1")}, member="selector.value")
    other = {1: ok({"distinct_ids": []}, cohort_id=1, project_id=2)}
    bad({"selector": ref(1)}, member="selector.value", contains="unknown cohort 1", existing=other)
    # an event-selector tree only takes event leaves
    tree = {"operator": "and", "children": [user("plan", "==", "pro")]}
    bad(
        {"selector": leaf("b", ">", 0), "behaviors": {"b": beh(selector=tree)}},
        member="behaviors.b.count.event_selector.selector.children[0].property",
    )


def test_behaviour_entry_errors():
    def entry(b: object, key: str = "b") -> CohortError:
        return bad({"selector": user("a", "defined"), "behaviors": {key: b}})

    assert entry(beh(event="")).member == "behaviors.b.count.event_selector.event"
    assert entry(
        {"count": {"event_selector": {"selector": None}}, "window": {"unit": "day", "value": 1}}
    ).member.endswith(".event")
    assert entry(beh(window=("year", 1))).member == "behaviors.b.window.unit"
    for value in (0, -3, True, "30", 1.5):
        assert entry(beh(window=("day", value))).member == "behaviors.b.window.value"  # type: ignore[arg-type]
    assert entry(beh(window=None)).member == "behaviors.b.window"
    assert entry(beh(window=("day", 1), dates=("2024-01-01", "2024-01-02"))).member == "behaviors.b"
    assert entry(beh(window=None, dates=("2024-01-03", "2024-01-02"))).member == "behaviors.b.from_date"
    assert entry(beh(window=None, dates=("2024-02-30", "2024-03-01"))).member == "behaviors.b.from_date"
    assert entry(beh(window=None, dates=("2024-1-3", "2024-03-01"))).member == "behaviors.b.from_date"
    only_from = beh(window=None)
    only_from["from_date"] = "2024-01-01"
    assert entry(only_from).member == "behaviors.b.to_date"
    agg = beh()
    agg["count"]["aggregationOperator"] = "sum"
    assert "not supported" in entry(agg).message
    prop = beh()
    prop["count"]["property"] = {"name": "amount"}
    assert entry(prop).member == "behaviors.b.count.property"
    assert entry(beh(kind="day")).member == "behaviors.b.count.type"
    both = beh()
    both["count"]["event_selectors"] = [{"event": "x"}]
    assert entry(both).member == "behaviors.b.count.event_selector"
    assert entry(beh(), key="bad-key").member == "behaviors.bad-key"
    assert entry(beh(), key="k" * 65).member.startswith("behaviors.k")
    assert entry(beh(selector=5)).member == "behaviors.b.count.event_selector.selector"
    no_type = beh()
    del no_type["count"]["type"]
    assert ok({"selector": leaf("b", ">", 0), "behaviors": {"b": no_type}}).behaviors["b"].type == "absolute"
    ok({"selector": leaf("b", ">", 0), "behaviors": {"b": beh(window=None, dates=("2024-01-01", "2024-01-01"))}})


def test_list_form_errors():
    def listed(items: object) -> CohortError:
        return bad({"selector": user("a", "defined"), "behaviors": items})

    good = {"name": "b", "window": "30d", "event_selectors": [{"event": "Buy"}]}
    assert listed([{**good, "window": "30w"}]).member == "behaviors[0].window"
    assert listed([{**good, "window": "0d"}]).member == "behaviors[0].window"
    assert listed([{**good, "window": 30}]).member == "behaviors[0].window"
    assert listed([good, {**good, "window": "1d"}]).member == "behaviors[1].name"  # duplicate
    assert listed([{**good, "name": ""}]).member == "behaviors[0].name"
    assert listed([{**good, "event_selectors": []}]).member == "behaviors[0].event_selectors"
    assert listed([{**good, "event_selectors": [{"event": ""}]}]).member == "behaviors[0].event_selectors[0].event"
    assert listed("b").member == "behaviors"


def test_limits():
    many = {f"b{i}": beh() for i in range(MAX_BEHAVIORS)}
    ok({"selector": leaf("b0", ">", 0), "behaviors": many})
    bad(
        {"selector": leaf("b0", ">", 0), "behaviors": {**many, "extra": beh()}},
        member="behaviors",
        contains="at most 50",
    )
    listed = [{"name": f"b{i}", "window": "1d", "event_selectors": [{"event": "x"}]} for i in range(MAX_BEHAVIORS + 1)]
    bad({"selector": leaf("b0", ">", 0), "behaviors": listed}, member="behaviors")

    def flat(n_leaves: int) -> dict:
        return {"operator": "or", "children": [user(f"p{i}", "defined") for i in range(n_leaves)]}

    ok({"selector": flat(MAX_NODES - 1)})  # 199 leaves + 1 combinator
    bad({"selector": flat(MAX_NODES)}, member="selector", contains="at most 200")
    deep: dict = user("p", "defined")
    for _ in range(MAX_NODES):
        deep = {"operator": "and", "children": [deep]}
    bad({"selector": deep}, member="selector", contains="at most 200")
    # event-selector trees count towards the same 200
    event_tree = {
        "operator": "or",
        "children": [{"property": "event", "value": f"p{i}", "operator": "defined"} for i in range(99)],
    }
    behaviors = {"b": beh(selector=event_tree)}  # 100 nodes
    ok(
        {
            "selector": {"operator": "and", "children": [leaf("b", ">", 0), *flat(98)["children"]]},
            "behaviors": behaviors,
        }
    )
    bad(
        {
            "selector": {"operator": "and", "children": [leaf("b", ">", 0), *flat(99)["children"]]},
            "behaviors": behaviors,
        },
        member="selector",
    )


def chain(n: int) -> dict[int, Cohort]:
    """Cohorts 1..n, each k > 1 referencing k - 1 (cohort k has reference depth k - 1)."""
    out: dict[int, Cohort] = {1: ok({"selector": user("a", "defined")}, cohort_id=1)}
    for k in range(2, n + 1):
        out[k] = ok({"selector": ref(k - 1)}, cohort_id=k, existing=out)
    return out


def test_reference_depth():
    cohorts = chain(MAX_DEPTH + 1)  # cohort 11 has depth 10
    bad({"selector": ref(MAX_DEPTH + 1)}, cohort_id=99, existing=cohorts, member="selector", contains="nest 11 deep")
    # an update that makes a referencing cohort too deep is refused too
    cohorts[50] = ok({"selector": user("b", "defined")}, cohort_id=50)
    e = apply_patch(cohorts[1], {"selector": ref(50)}, existing=cohorts)
    assert isinstance(e, CohortError) and "cohort 11's references nest 11 deep" in e.message
    # ...but fine where the chain is shorter
    assert isinstance(
        apply_patch(cohorts[1], {"selector": ref(50)}, existing={k: c for k, c in cohorts.items() if k != 11}), Cohort
    )


def test_reference_cycles():
    cohorts = chain(3)
    e = apply_patch(cohorts[1], {"selector": ref(3)}, existing=cohorts)
    assert isinstance(e, CohortError) and "cycle" in e.message
    e = apply_patch(cohorts[1], {"selector": ref(1, "not in")}, existing=cohorts)
    assert isinstance(e, CohortError) and "cycle" in e.message and e.member == "selector.value"
    bad({"selector": ref(7)}, cohort_id=7, existing={7: cohorts[1]}, contains="cycle")


# ------------------------------------------------------------------------------------- canonical, patch
def test_canonical_round_trip():
    cohorts = chain(2)
    bodies = [
        {
            "selector": {
                "operator": "and",
                "children": [
                    leaf("b", ">=", 3),
                    {**user("plan", "==", "pro"), "extra": 1},
                    {**user("plan", "defined"), "operand": "ignored", "type": "number"},
                    ref(2, "not in"),
                ],
            },
            "behaviors": {
                "b": beh(selector='number(properties["amount"]) > 50'),
                "c": beh(window=None, dates=("2024-01-01", "2024-02-01"), kind="days"),
                "d": beh(selector={"property": "event", "value": "x", "operator": "in", "operand": "y"}),
            },
        },
        {"selector": 'user["plan"] == "pro"'},
        {"distinct_ids": ["z", "a"]},
    ]
    for body in bodies:
        c = ok(
            {**body, "description": "d", "is_visible": False},
            existing=cohorts,
            cohort_id=9,
            created="2024-05-10 12:00:00",
        )
        again = ok(c.body(), existing=cohorts, cohort_id=9, created="2024-05-10 12:00:00")
        assert again == c
    leaves = ok(bodies[0], existing=cohorts).definition()["selector"]["children"]
    assert leaves[1] == {"property": "user", "value": "plan", "operator": "==", "operand": "pro", "type": "string"}
    assert leaves[2] == {"property": "user", "value": "plan", "operator": "defined", "type": "number"}


def test_apply_patch():
    dyn = ok({"selector": leaf("b", ">", 0), "behaviors": {"b": beh()}}, cohort_id=3, created="2024-01-01 00:00:00")
    renamed = apply_patch(dyn, {"name": "new", "description": None, "count": 5})
    assert isinstance(renamed, Cohort) and renamed.name == "new" and renamed.selector == dyn.selector
    assert renamed.id == 3 and renamed.created == "2024-01-01 00:00:00"
    # a new selector keeps the behaviours; a new behaviours set must still define what the selector reads
    resel = apply_patch(dyn, {"selector": 'behaviors["b"] > 2'})
    assert isinstance(resel, Cohort) and resel.behaviors == dyn.behaviors
    assert isinstance(apply_patch(dyn, {"behaviors": {"c": beh()}}), CohortError)
    # add/remove need a static cohort
    e = apply_patch(dyn, {"add_distinct_ids": ["a"]})
    assert isinstance(e, CohortError) and e.member == "add_distinct_ids"
    st = apply_patch(
        dyn, {"distinct_ids": ["a", "b"], "add_distinct_ids": ["c", "d"], "remove_distinct_ids": ["d", "zz"]}
    )
    assert isinstance(st, Cohort) and st.distinct_ids == ("a", "b", "c")
    st2 = apply_patch(st, {"add_distinct_ids": ["e", ""], "remove_distinct_ids": ["a"]})
    assert isinstance(st2, Cohort) and st2.distinct_ids == ("b", "c", "e")
    assert isinstance(apply_patch(st, {"remove_distinct_ids": [True]}), CohortError)
    # static -> dynamic
    back = apply_patch(st, {"selector": user("plan", "defined")})
    assert isinstance(back, Cohort) and not back.is_static and back.behaviors == {}
    assert isinstance(apply_patch(st, {"behaviors": {"b": beh()}}), CohortError)
    assert isinstance(apply_patch(st, {"selector": user("a", "defined"), "distinct_ids": []}), CohortError)
    assert isinstance(apply_patch(st, {"name": ""}), CohortError)
    assert isinstance(apply_patch(st, {"data_group_id": 1}), CohortError)


def test_check_delete():
    cohorts = chain(3)
    e = check_delete([1], cohorts)
    assert isinstance(e, CohortError) and "referenced by cohort(s) 2" in e.message
    assert check_delete([3], cohorts) is None
    assert check_delete([1, 2, 3], cohorts) is None
    assert isinstance(check_delete([1, 2], cohorts), CohortError)


# --------------------------------------------------------------------------------- list, object, /engage
def test_cohorts_list_and_object():
    events = [ev("Buy", ms(2024, 5, 9), u) for u in ("a", "b")]
    cohorts = {
        5: ok(
            {"selector": leaf("b", ">", 0), "behaviors": {"b": beh()}, "is_visible": 0},
            cohort_id=5,
            created="2024-05-01 10:00:00",
        ),
        2: ok({"distinct_ids": ["x", "y", "z"], "description": "s"}, cohort_id=2, created="2024-04-01 10:00:00"),
        9: ok({"distinct_ids": ["q"]}, cohort_id=9, project_id=4),
    }
    listed = cohorts_list(cohorts, events=events, profiles={"c": {}}, tz="UTC", now_ms=NOW, project_id=1)
    assert listed == [
        {
            "count": 3,
            "is_visible": 1,
            "description": "s",
            "created": "2024-04-01 10:00:00",
            "project_id": 1,
            "id": 2,
            "name": "c",
        },
        {
            "count": 2,
            "is_visible": 0,
            "description": "",
            "created": "2024-05-01 10:00:00",
            "project_id": 1,
            "id": 5,
            "name": "c",
        },
    ]
    assert [list(x) for x in listed] == [
        ["count", "is_visible", "description", "created", "project_id", "id", "name"]
    ] * 2
    assert [x["id"] for x in cohorts_list(cohorts, events=events, profiles={}, tz="UTC", now_ms=NOW)] == [2, 5, 9]
    obj = cohort_object(cohorts[2], 3)
    assert obj["is_static"] is True and obj["distinct_ids"] == ["x", "y", "z"] and obj["data_group_id"] is None
    assert "distinct_ids" not in cohort_object(cohorts[2], 3, in_list=True)
    dyn = cohort_object(cohorts[5], 2, in_list=True)
    assert dyn["is_static"] is False and dyn["selector"] == leaf("b", ">", 0) and dyn["count"] == 2
    assert created_text(ms(2024, 5, 10, 12, 34, 56, 789)) == "2024-05-10 12:34:56"


def test_engage_by_cohort():
    p = 7
    profiles = {
        (p, None, "a"): Profile({"plan": "pro"}),
        (p, None, "b"): Profile({"plan": "free"}),
        (8, None, "c"): Profile({}),
    }
    events = [ev("Buy", ms(2024, 5, 9), u) for u in ("a", "ghost", "ghost")]
    cohorts = {
        1: ok({"selector": leaf("b", ">=", 1), "behaviors": {"b": beh()}}, cohort_id=1, project_id=p),
        2: ok({"distinct_ids": ["b", "nobody"]}, cohort_id=2, project_id=p),
        3: ok({"distinct_ids": ["c"]}, cohort_id=3, project_id=8),
    }

    def q(params: dict, **kw: object) -> dict | EngageError:
        return engage_by_cohort(
            profiles, params, project_id=p, cohorts=cohorts, events=events, tz="UTC", now_ms=NOW, **kw
        )  # type: ignore[arg-type]

    def ids(body: object) -> list[str]:
        assert isinstance(body, dict), body
        return [r["$distinct_id"] for r in body["results"]]

    body = q({"filter_by_cohort": '{"id": 1}'})
    assert isinstance(body, dict) and body["total"] == 2
    assert body["results"] == [
        {"$distinct_id": "a", "$properties": {"plan": "pro"}},
        {"$distinct_id": "ghost", "$properties": {}},
    ]
    assert ids(q({"filter_by_cohort": "1", "include_all_users": "false"})) == ["a"]
    assert ids(q({"filter_by_cohort": '{"id": 2}'})) == ["b", "nobody"]
    assert ids(q({"filter_by_cohort": '{"id": 2}', "where": 'properties["plan"] == "free"'})) == ["b"]
    assert q({"filter_by_cohort": '{"id": 3}'}) == EngageError("unknown cohort 3")  # another project's
    assert q({"filter_by_cohort": '{"id": 4}'}) == EngageError("unknown cohort 4")
    raw = json.dumps({"raw_cohort": {"selector": {"operator": "or", "children": [ref(2), user("plan", "==", "pro")]}}})
    assert ids(q({"filter_by_cohort": raw})) == ["a", "b"]  # dynamic: within U ("nobody" is not)
    assert ids(q({"filter_by_cohort": '{"raw_cohort": {"distinct_ids": ["zz", "a"]}}'})) == ["a", "zz"]
    bad_raw = q(
        {"filter_by_cohort": '{"raw_cohort": {"selector": {"property": "cohort", "value": 3, "operator": "in"}}}'}
    )
    assert isinstance(bad_raw, EngageError) and "unknown cohort 3" in bad_raw.message
    assert isinstance(q({"filter_by_cohort": '{"id": 1}', "behaviors": "[]"}), EngageError)
    # membership on the session's page-0 profile state
    snapshot = {(p, None, "b"): Profile({"plan": "pro"})}
    raw_pro = '{"raw_cohort": {"selector": {"property": "user", "value": "plan", "operator": "==", "operand": "pro"}}}'
    assert ids(q({"filter_by_cohort": raw_pro}, page_snapshot=snapshot)) == ["b"]


def test_parse_raw_cohort_ignores_metadata():
    c = parse_raw_cohort({"selector": user("a", "defined"), "name": ""})
    assert isinstance(c, Cohort) and c.name == ""
    assert isinstance(parse_raw_cohort({"distinct_ids": ["a"], "data_group_id": 2}), CohortError)
    assert isinstance(parse_raw_cohort(5), CohortError)


def test_wall_clock_helper():
    # sanity: the helper's wall-clock conversion
    assert ms(2024, 3, 31, 3, tz="Europe/Berlin") == int(datetime(2024, 3, 31, 1, tzinfo=UTC).timestamp() * 1000)
