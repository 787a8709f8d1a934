"""Hand-written cases from the semantics notes (§2.1, §2.2, decisions.md), each checked
against numbers worked out by hand and against the oracle.

* §2.1: A→B→D→C→D→E converts through E; A→B→C→E stops after C.
* §2.1 window: A 1:00, A 1:30, B 1:45, C 2:15 with a 1-hour window converts to B only
  (a later A does not restart the clock).
* §2.1 grace: B 1.5 s before A counts as A→B; 2.5 s before does not.
* The window's end is inclusive; events after `to_date` complete a funnel.
* Retention: the birth event itself is not a return; another event at the same instant is.
* Empty distinct_id is not a user; a duplicate never serves two steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from footfall.services.query.reports import _common
from footfall.shared.saved import WarehouseSavedStore, parse_funnel
from tests.integration.query.report_env import ReportEnv, build_env, diff, import_events, release
from tests.oracle import frequency, funnels, retention

pytestmark = pytest.mark.warehouse

PID = 1
TZ = "UTC"
NOW = datetime(2024, 3, 20, tzinfo=UTC)
_seq = iter(range(1, 1_000_000))


def ev(name: str, user: str, at: str, **props: Any) -> dict[str, Any]:
    """An import event at `at` (UTC, `YYYY-MM-DD HH:MM:SS[.fff]`)."""
    t = datetime.fromisoformat(at).replace(tzinfo=UTC)
    return {
        "event": name,
        "properties": {
            "time": int(t.timestamp() * 1000),
            "distinct_id": user,
            "$insert_id": f"case-{next(_seq)}",
            **props,
        },
    }


DAY = "2024-03-05"
EVENTS = [
    # §2.1 loose order
    ev("A", "full", f"{DAY} 10:00:00"),
    ev("B", "full", f"{DAY} 10:01:00"),
    ev("D", "full", f"{DAY} 10:02:00"),
    ev("C", "full", f"{DAY} 10:03:00"),
    ev("D", "full", f"{DAY} 10:04:00"),
    ev("E", "full", f"{DAY} 10:05:00"),
    ev("A", "no-d", f"{DAY} 11:00:00"),
    ev("B", "no-d", f"{DAY} 11:01:00"),
    ev("C", "no-d", f"{DAY} 11:02:00"),
    ev("E", "no-d", f"{DAY} 11:03:00"),
    # §2.1 window (1 hour): converts to B only
    ev("A", "window", f"{DAY} 01:00:00"),
    ev("A", "window", f"{DAY} 01:30:00"),
    ev("B", "window", f"{DAY} 01:45:00"),
    ev("C", "window", f"{DAY} 02:15:00"),
    # grace: B 1.5 s before A converts, 2.5 s before does not
    ev("B", "grace-in", f"{DAY} 12:00:00"),
    ev("A", "grace-in", f"{DAY} 12:00:01.500"),
    ev("B", "grace-out", f"{DAY} 13:00:00"),
    ev("A", "grace-out", f"{DAY} 13:00:02.500"),
    # the window's end is inclusive (exactly 1 h after A)
    ev("A", "edge", f"{DAY} 14:00:00"),
    ev("B", "edge", f"{DAY} 15:00:00"),
    ev("C", "edge", f"{DAY} 15:00:00.001"),
    # entry on to_date, completion the next day
    ev("A", "late", "2024-03-06 23:30:00"),
    ev("B", "late", "2024-03-07 00:20:00"),
    # empty distinct_id is nobody
    ev("A", "", f"{DAY} 16:00:00"),
    ev("B", "", f"{DAY} 16:01:00"),
    # retention: born on the 5th; the birth itself is not a return, the same-instant event is
    ev("Sign Up", "ret", f"{DAY} 09:00:00"),
    ev("Open", "ret", f"{DAY} 09:00:00"),
    ev("Open", "ret", "2024-03-06 08:59:59"),
    ev("Open", "ret", "2024-03-06 09:00:00"),
    ev("Sign Up", "ret-self", f"{DAY} 09:00:00"),
]
# `on`: the entry among step-0 events at one millisecond is the first by name, then insert_id
# (bytewise: a prefix first), then the latest copy of a duplicate.
EVENTS += [
    ev("T", "tie", f"{DAY} 17:00:00", plan="longer", **{"$insert_id": "tie-ab"}),
    ev("T", "tie", f"{DAY} 17:00:00", plan="prefix", **{"$insert_id": "tie-a"}),
    ev("U", "tie", f"{DAY} 17:30:00"),
]
EVENTS += [  # by name first: "T" before "T2" although its insert_id sorts after
    ev("T2", "names", f"{DAY} 17:00:00", plan="second", **{"$insert_id": "names-a"}),
    ev("T", "names", f"{DAY} 17:00:00", plan="first", **{"$insert_id": "names-b"}),
]
EVENTS += [  # a birth tied in time: the first insert_id (bytewise, a prefix first) is the birth
    ev("Join", "birth-tie", f"{DAY} 08:00:00", plan="later", **{"$insert_id": "bt-ab"}),
    ev("Join", "birth-tie", f"{DAY} 08:00:00", plan="first", **{"$insert_id": "bt-a"}),
]
# the most steps a funnel has (32): one user through all of them, one who stops after step 20
# (each step's times are packed with the step's index in one array per user)
LONG = [f"S{k:02d}" for k in range(32)]
EVENTS += [ev(name, "long", f"{DAY} 19:{k:02d}:00", plan="all") for k, name in enumerate(LONG)]
EVENTS += [ev(name, "long-stop", f"{DAY} 20:{k:02d}:00", plan="some") for k, name in enumerate(LONG[:21])]
REDO = ev("T", "redo", f"{DAY} 17:00:00", plan="old")
REDONE = {**REDO, "properties": {**REDO["properties"], "plan": "new"}}
DUPLICATE = ev("View", "dup", f"{DAY} 18:00:00")
# imported twice (the second copies in a later request): one event each, the later copy wins
EVENTS += [DUPLICATE, REDO, dict(DUPLICATE), REDONE]
SECOND_COPIES = 2

FUNNELS = {
    "abcde": {"name": "abcde", "steps": [{"event": s} for s in "ABCDE"], "length": 1, "length_unit": "day"},
    "abc-1h": {"name": "abc-1h", "steps": [{"event": s} for s in "ABC"], "length": 1, "length_unit": "hour"},
    "ab": {"name": "ab", "steps": [{"event": "A"}, {"event": "B"}], "length": 1, "length_unit": "hour"},
    "tu": {
        "name": "tu",
        "steps": [{"event": "T", "custom_event": {"id": 7, "name": "Any T", "events": ["T", "T2"]}}, {"event": "U"}],
        "length": 1,
        "length_unit": "day",
    },
    "long": {"name": "long", "steps": [{"event": s} for s in LONG], "length": 1, "length_unit": "day"},
    "view-view": {
        "name": "view-view",
        "steps": [{"event": "View"}, {"event": "View"}],
        "length": 1,
        "length_unit": "day",
    },
}


@pytest.fixture(scope="module")
def env(warehouse) -> Iterator[tuple[ReportEnv, dict[str, int]]]:  # type: ignore[no-untyped-def]
    env = build_env(warehouse, {PID: TZ})
    env.warehouse.command("SYSTEM STOP MERGES events")
    import_events(env, PID, EVENTS[:-SECOND_COPIES])
    import_events(env, PID, EVENTS[-SECOND_COPIES:])  # the duplicates' second copies, in their own request
    store = WarehouseSavedStore(warehouse)
    ids = {}
    for key, definition in FUNNELS.items():
        name, parsed = parse_funnel(definition)
        ids[key] = store.create_funnel(PID, name, parsed).funnel_id
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_common, "utc_now", lambda: NOW)
        yield env, ids
    release(env)


def _funnel(env: tuple[ReportEnv, dict[str, int]], key: str, **params: str) -> dict[str, Any]:
    client, ids = env
    query = {"from_date": DAY, "to_date": DAY, **params}
    r = client.query(PID, "/funnels", {**query, "funnel_id": str(ids[key])})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert not diff(body, funnels.funnels(EVENTS, TZ, query, FUNNELS[key], NOW)), "differs from the oracle"
    return body


def _counts(body: dict[str, Any], day: str = DAY) -> list[int]:
    return [s["count"] for s in body["data"][day]["steps"]]


def test_loose_order_a_b_d_c_d_e(env: tuple[ReportEnv, dict[str, int]]) -> None:
    # entries (A): full, no-d, window, grace-in, grace-out, edge; "" is nobody. B: all but grace-out
    # (its B is 2.5 s before A). C: full, no-d, window (2:15 is within the day), edge. D after C and
    # then E: only full (A→B→D→C→D→E); no-d (A→B→C→E) stops after C.
    body = _funnel(env, "abcde")
    assert _counts(body) == [6, 5, 4, 1, 1]
    steps = body["data"][DAY]["steps"]
    assert (steps[3]["avg_time"], steps[4]["avg_time"], steps[4]["avg_time_from_start"]) == (60, 60, 300)
    assert body["data"][DAY]["analysis"] == {"completion": 1, "starting_amount": 6, "steps": 5, "worst": 3}


def test_window_from_the_first_step_event(env: tuple[ReportEnv, dict[str, int]]) -> None:
    body = _funnel(env, "abc-1h")
    # window: A 1:00 (not 1:30) starts the hour: B at 1:45 converts, C at 2:15 does not.
    # full/no-d reach C within minutes; edge: B exactly 1 h after A converts, C 1 ms later does not.
    assert _counts(body) == [6, 5, 2]
    window = list(body["data"][DAY]["steps"])
    assert window[1]["step_conv_ratio"] == 5 / 6 and window[2]["overall_conv_ratio"] == 2 / 6


def test_two_second_grace(env: tuple[ReportEnv, dict[str, int]]) -> None:
    body = _funnel(env, "ab")
    by_user = _counts(body)
    # A→B: full, no-d, window, edge, grace-in (B 1.5 s before A); grace-out's B is 2.5 s early.
    assert by_user == [6, 5]


def test_events_after_to_date_complete(env: tuple[ReportEnv, dict[str, int]]) -> None:
    body = _funnel(env, "ab", from_date="2024-03-06", to_date="2024-03-06")
    assert _counts(body, "2024-03-06") == [1, 1]


def test_duplicate_cannot_serve_two_steps(env: tuple[ReportEnv, dict[str, int]]) -> None:
    assert _counts(_funnel(env, "view-view")) == [1, 0]


def test_the_most_steps_a_funnel_has(env: tuple[ReportEnv, dict[str, int]]) -> None:
    assert _counts(_funnel(env, "long")) == [2] * 21 + [1] * 11
    segments = _funnel(env, "long", on='properties["plan"]')["data"][DAY]
    assert [s["count"] for s in segments["all"]] == [1] * 32
    assert [s["count"] for s in segments["some"]] == [1] * 21 + [0] * 11


def test_segment_of_an_entry_tied_in_time(env: tuple[ReportEnv, dict[str, int]]) -> None:
    body = _funnel(env, "tu", on='properties["plan"]')
    segments = {key: [s["count"] for s in steps] for key, steps in body["data"][DAY].items()}
    # tie: "tie-a" sorts before "tie-ab", so its plan is the entry's; names: T's; redo: the later copy's.
    assert segments == {"$overall": [3, 1], "prefix": [1, 1], "first": [1, 0], "new": [1, 0]}


def test_birth_event_is_not_a_return(env: tuple[ReportEnv, dict[str, int]]) -> None:
    client, _ = env
    params = {"from_date": DAY, "to_date": DAY, "born_event": "Sign Up", "interval_count": "2"}
    r = client.query(PID, "/retention", params)
    assert r.status_code == 200
    # ret: Open at the birth instant (bucket 0), 23:59:59 later (bucket 0), exactly 24 h later (bucket 1);
    # ret-self did nothing but the birth.
    assert r.json()[DAY] == {"counts": [1, 1, 0], "first": 2}
    assert not diff(r.json(), retention.retention(EVENTS, TZ, params, NOW))
    same = {**params, "event": "Sign Up"}
    r = client.query(PID, "/retention", same)
    assert r.json()[DAY] == {"counts": [0, 0, 0], "first": 2}
    assert not diff(r.json(), retention.retention(EVENTS, TZ, same, NOW))


def test_birth_tied_in_time_is_the_first_insert_id(env: tuple[ReportEnv, dict[str, int]]) -> None:
    client, _ = env
    on = 'properties["plan"]'
    params = {"from_date": DAY, "to_date": DAY, "born_event": "Join", "event": "Join", "interval_count": "1", "on": on}
    r = client.query(PID, "/retention", params)
    assert r.status_code == 200, r.text
    assert not diff(r.json(), retention.retention(EVENTS, TZ, params, NOW))
    # "bt-a" is the birth; the other Join at the same instant ("bt-ab", plan "later") its return
    day = r.json()[DAY]
    assert day["$overall"]["counts"] == [1, 0] and day["later"]["counts"] == [1, 0] and "first" not in day


def test_empty_distinct_id_and_duplicates_in_frequency(env: tuple[ReportEnv, dict[str, int]]) -> None:
    client, _ = env
    params = {"from_date": DAY, "to_date": DAY, "unit": "day", "addiction_unit": "hour"}
    r = client.query(PID, "/retention/addiction", params)
    assert r.status_code == 200
    assert not diff(r.json(), frequency.frequency(EVENTS, TZ, params, NOW))
    row = r.json()["data"][DAY]
    users = {
        e["properties"]["distinct_id"]
        for e in EVENTS
        if e["properties"]["time"] < 1709683200000
        and e["properties"]["time"] >= 1709596800000
        and e["properties"]["distinct_id"]
    }
    assert row[0] == len(users)  # everyone active on the day, "" excluded, "dup" once
    assert len(row) == 24
