"""`/jql` against the plain-Python reference (tests/oracle/jql.py) on generated data, and the
sandbox's limits.

Two projects in zones with whole- and half-hour offsets; events from
`tests.factories.make_dataset` through the real `/import` (duplicates, missing and
list-valued properties, numbers as strings); user profiles written straight into
`profiles` (some users without a profile, some profiles without events, one deleted).
Each script is written twice: as JavaScript for the service and as a pipeline of oracle
functions; the whole answers must be equal (order too, except where the semantics leave
it open: then both are sorted). Pages are made small so that every source is read in
several chunks.
"""

from __future__ import annotations

import csv
import io
import json
import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from footfall.services.query.jql import JqlLimits
from footfall.services.query.jql import source as jql_source
from footfall.services.query.settings import QuerySettings
from tests.factories import Dataset, make_dataset
from tests.integration.query.report_env import ReportEnv, build_env, diff, load_dataset, release, secret_of
from tests.oracle import jql as o

pytestmark = pytest.mark.warehouse

SEED = 20261126
ZONES = {41: "America/Los_Angeles", 42: "Asia/Kolkata"}
Profiles = dict[str, tuple[dict, int]]
LIMITS = JqlLimits(timeout_seconds=3, memory_mb=64, max_output_bytes=200_000)


def _profiles(rng: random.Random, dataset: Dataset, pid: int) -> tuple[Profiles, list[list[Any]]]:
    users = sorted({str(e["properties"]["distinct_id"]) for e in dataset.projects[pid].events} - {""})
    ids = [u for u in users if rng.random() < 0.7] + [f"noevents-{i}" for i in range(15)]
    live: Profiles = {}
    rows = []
    for i, uid in enumerate(sorted(ids)):
        props = {"plan": rng.choice(["free", "pro", None]), "age": rng.choice([18, 33, 47, "52", None]), "i": i}
        ms = int(datetime(2024, 3, 1, tzinfo=UTC).timestamp() * 1000) + rng.randrange(0, 10**9)
        deleted = 1 if i == 3 else 0
        rows.append([pid, "", uid, orjson.dumps(props).decode(), deleted, 1, datetime.fromtimestamp(ms / 1000, UTC)])
        if not deleted:
            live[uid] = (props, ms)
    return live, rows


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset, dict[int, Profiles]]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=1200, zones=ZONES)
    rng = random.Random(SEED)
    settings = QuerySettings(rate_per_hour=0, concurrency=0, jql=LIMITS)
    env = build_env(warehouse, {pid: spec.tz for pid, spec in dataset.projects.items()}, settings)
    load_dataset(env, dataset)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jql_source, "PAGE", 97)  # several chunks per source
        mp.setattr(jql_source, "_WINDOW_ROWS", 150)  # several windows (and see test_small_windows)
        profiles = {}
        for pid in ZONES:
            live, rows = _profiles(rng, dataset, pid)
            profiles[pid] = live
            columns = ["project_id", "group_key", "profile_id", "properties", "deleted", "version", "last_time"]
            warehouse.insert("profiles", columns, rows)
        yield env, dataset, profiles
    release(env)


def jql(env: ReportEnv, pid: int, script: str, params: dict[str, Any] | None = None, **form: str) -> Any:
    data = {"script": script, **form}
    if params is not None:
        data["params"] = json.dumps(params)
    return env.request("POST", "/api/2.0/jql", data=data, auth=(secret_of(pid), ""))


def _sorted(items: list) -> list:
    return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))


# The join selectors of the `join-*-user-selectors` cases, as the oracle reads them.
USER_SELECTORS = [
    {"selector": 'user["plan"] == "pro" or (defined(properties["plan"]) and properties["plan"] == user["plan"])'},
    {"event": "Purchase", "selector": 'not defined(user["age"])'},
]
# A case: (script, oracle(events_of, people_of, params) -> expected, params, order_matters)
Case = tuple[str, Callable[..., Any], dict[str, Any], bool]
EV = "Events({from_date: params.from, to_date: params.to})"


def _tagged(props: dict[str, Any]) -> dict[str, Any]:
    tags = props.get("tags")
    return {**props, "tags": [*tags, "z"]} if isinstance(tags, list) else props


def _join_oracle(events_of: Callable[[Any], list], kind: str) -> Callable[[Any], list]:
    def oracle(c: Any) -> list:
        return [
            [
                t["distinct_id"],
                t["event"]["name"] if "event" in t else None,
                t["event"]["time"] if "event" in t else None,
                t["user"]["properties"]["plan"] if "user" in t else "none",
            ]
            for t in o.join(events_of(c), o.people(c["people"], c["tz"]), kind)
        ]

    return oracle


def _cases() -> dict[str, Case]:
    def events_of(ctx: Any, selectors: list | None = None) -> list:
        return o.events(ctx["raw"], ctx["tz"], ctx["from"], ctx["to"], selectors)

    return {
        "groupBy-name-count": (
            f"function main() {{ return {EV}.groupBy(['name'], mixpanel.reducer.count()); }}",
            lambda c: o.group_by(events_of(c), [o.path("name")], o.count()),
            {},
            True,
        ),
        # Counted by the warehouse (a first groupBy of property paths with count()), and the
        # same groups counted in the engine (a reducer list is not pushed down).
        "groupBy-properties-count-sql": (
            f"function main() {{ return {EV}.groupBy(['properties.plan', 'properties.price', 'distinct_id'],"
            " mixpanel.reducer.count()).filter(g => g.value > 1); }",
            lambda c: [
                g
                for g in o.group_by(
                    events_of(c),
                    [o.path("properties.plan"), o.path("properties.price"), o.path("distinct_id")],
                    o.count(),
                )
                if g["value"] > 1
            ],
            {},
            True,
        ),
        "groupBy-properties-count-engine": (
            f"function main() {{ return {EV}.groupBy(['properties.plan', 'properties.price'],"
            " [mixpanel.reducer.count()]); }",
            lambda c: o.group_by(events_of(c), [o.path("properties.plan"), o.path("properties.price")], [o.count()]),
            {},
            True,
        ),
        "groupBy-reducers-list-keys": (
            f"""function main() {{
  return {EV}.groupBy(['name', mixpanel.multiple_keys('properties.tags'), 'properties.plan'],
    [mixpanel.reducer.count(), mixpanel.reducer.sum('properties.price'), mixpanel.reducer.avg('properties.amount'),
     mixpanel.reducer.max('properties.price'), mixpanel.reducer.numeric_summary('properties.amount')]);
}}""",
            lambda c: o.group_by(
                events_of(c),
                [o.path("name"), o.Multiple(o.path("properties.tags")), o.path("properties.plan")],
                [
                    o.count(),
                    o.sum_(o.path("properties.price")),
                    o.avg(o.path("properties.amount")),
                    o.max_(o.path("properties.price")),
                    o.numeric_summary(o.path("properties.amount")),
                ],
            ),
            {},
            True,
        ),
        "selectors-filter-map": (
            """function main() {
  return Events({from_date: params.from, to_date: params.to, event_selectors: [
      {event: 'Purchase', selector: 'number(properties["price"]) > 10'}, {event: params.other}]})
    .filter(function (e) { return e.properties.browser !== 'Safari'; })
    .map(e => ({n: e.name, u: e.distinct_id, t: e.time}));
}""",
            lambda c: [
                {"n": e["name"], "u": e["distinct_id"], "t": e["time"]}
                for e in events_of(
                    c, [{"event": "Purchase", "selector": 'number(properties["price"]) > 10'}, {"event": c["other"]}]
                )
                if e["properties"].get("browser") != "Safari"
            ],
            {"other": "Signup"},
            False,
        ),
        "local-day-buckets": (
            f"function main() {{ return {EV}.groupBy([mixpanel.numeric_bucket('time', mixpanel.daily_time_buckets)],"
            " mixpanel.reducer.count()); }",
            lambda c: o.group_by(events_of(c), [o.numeric_bucket(o.path("time"), "day")], o.count()),
            {},
            True,
        ),
        "groupByUser-slice-count": (
            f"""function main() {{
  return {EV}.groupByUser(['properties.browser'], function (state, evs) {{
      state = state || {{n: 0, first: null}};
      _.each(evs, function (e) {{ state.n += 1; if (state.first === null) state.first = e.time; }});
      return state;
    }}).map(function (g) {{ return {{key: g.key, value: g.value.n * 1000 + (g.value.first % 997)}}; }})
    .groupBy([mixpanel.slice('key', 1)], mixpanel.reducer.sum('value'));
}}""",
            lambda c: o.group_by(
                [
                    {"key": g["key"], "value": len(g["value"]) * 1000 + g["value"][0]["time"] % 997}
                    for g in o.group_by_user(events_of(c), [o.path("properties.browser")], lambda evs: evs)
                ],
                [o.slice_key(o.path("key"), 1)],
                o.sum_(o.path("value")),
            ),
            {},
            True,
        ),
        "bucket-size-percentiles-sort": (
            f"""function main() {{
  return {EV}.groupBy([mixpanel.numeric_bucket('properties.amount', {{bucket_size: 500, offset: 100}})],
      mixpanel.reducer.numeric_percentiles('properties.amount', [10, 50, 90]))
    .sortDesc(function (g) {{ return g.key[0]; }});
}}""",
            lambda c: o.sort(
                o.group_by(
                    events_of(c),
                    [o.numeric_bucket(o.path("properties.amount"), {"bucket_size": 500, "offset": 100})],
                    o.numeric_percentiles(o.path("properties.amount"), [10, 50, 90]),
                ),
                lambda g: g["key"][0],
                descending=True,
            ),
            {},
            True,
        ),
        "people-selectors-groupBy": (
            """function main() {
  return People({user_selectors: [{selector: 'properties["plan"] == "pro"'}, {selector: 'number(user["age"]) > 40'}]})
    .groupBy(['properties.plan', 'properties.age'], mixpanel.reducer.count());
}""",
            lambda c: o.group_by(
                o.people(
                    c["people"],
                    c["tz"],
                    [{"selector": 'properties["plan"] == "pro"'}, {"selector": 'number(user["age"]) > 40'}],
                ),
                [o.path("properties.plan"), o.path("properties.age")],
                o.count(),
            ),
            {},
            True,
        ),
        **{
            f"join-{kind}": (
                f"""function main() {{
  return join({EV}, People(), {{type: '{kind}'}})
    .map(function (t) {{ return [t.distinct_id, t.event ? t.event.name : null, t.event ? t.event.time : null,
                                 t.user ? t.user.properties.plan : 'none']; }});
}}""",
                _join_oracle(events_of, kind),
                {},
                False,
            )
            for kind in ("full", "inner", "left", "right")
        },
        # Join selectors read the event and its user's live profile (`user[...]`; no profile:
        # undefined); users whose events are all left out still appear in full/right joins.
        **{
            f"join-{kind}-user-selectors": (
                f"""function main() {{
  return join({EV}, People(), {{type: '{kind}', selectors: [
      {{selector: 'user["plan"] == "pro" or (defined(properties["plan"]) and properties["plan"] == user["plan"])'}},
      {{event: 'Purchase', selector: 'not defined(user["age"])'}}]}})
    .map(function (t) {{ return [t.distinct_id, t.event ? t.event.name : null, t.event ? t.event.time : null,
                                 t.user ? t.user.properties.plan : 'none']; }});
}}""",
                lambda c, kind=kind: [
                    [
                        t["distinct_id"],
                        t["event"]["name"] if "event" in t else None,
                        t["event"]["time"] if "event" in t else None,
                        t["user"]["properties"]["plan"] if "user" in t else "none",
                    ]
                    for t in o.join(
                        o.join_events(c["raw"], c["tz"], c["from"], c["to"], USER_SELECTORS, c["people"]),
                        o.people(c["people"], c["tz"]),
                        kind,
                    )
                ],
                {},
                False,
            )
            for kind in ("full", "left", "inner")
        },
        # Event properties are parsed in the engine only when the script reaches beyond the
        # keys it spells out (`properties.plan`, `properties.tags`): both paths, one answer.
        "lazy-properties": (
            """function main() {
  return Events({from_date: params.from, to_date: params.to, event_selectors: [{event: 'Purchase'}]})
    .map(function (e) {
    var plan = e.properties.plan, tags = e.properties.tags, hp = 'plan' in e.properties;
    if (Array.isArray(tags)) tags.push('z');
    var p = e.properties;
    return {e: e, plan: plan, hp: hp, hb: 'browser' in p, n: Object.keys(p).length, dyn: p[params.key]};
  });
}""",
            lambda c: [
                {
                    "e": {**e, "properties": _tagged(e["properties"])},
                    **({"plan": e["properties"]["plan"]} if "plan" in e["properties"] else {}),
                    "hp": "plan" in e["properties"],
                    "hb": "browser" in e["properties"],
                    "n": len(e["properties"]),
                    **({"dyn": e["properties"]["amount"]} if "amount" in e["properties"] else {}),
                }
                for e in events_of(c, [{"event": "Purchase"}])
            ],
            {"key": "amount"},
            False,
        ),
        # Every `properties` the text spells is projected, so the first run gets no property
        # texts; the reducer reaches further (a computed name) and swallows what the runtime
        # throws there: the request still runs again with the texts (engine.NeedsProperties).
        "projection-miss-reruns": (
            f"""function main() {{
  return {EV}.groupBy(['name'], function (accs, events) {{
    var n = 0;
    accs.forEach(function (a) {{ n += a; }});
    events.forEach(function (e) {{
      try {{ n += Object.keys(e['prop' + 'erties']).length; }} catch (err) {{ n += 1000; }}
      if (e.properties.plan === 'pro') n += 100;
    }});
    return n;
  }});
}}""",
            lambda c: o.group_by(
                events_of(c),
                [o.path("name")],
                lambda evs: sum(len(e["properties"]) + 100 * (e["properties"].get("plan") == "pro") for e in evs),
            ),
            {},
            False,
        ),
        # First steps the warehouse computes (runtime.js `pushdown`); `amount` holds numeric
        # strings ("2100"), so its groups are left to the engine: the same answers either way.
        **{
            f"pushdown-{red}-{prop}": (
                f"function main() {{ return {EV}.groupBy(['name', 'properties.plan'],"
                f" mixpanel.reducer.{red}('properties.{prop}')); }}",
                lambda c, red=red, prop=prop: o.group_by(
                    events_of(c),
                    [o.path("name"), o.path("properties.plan")],
                    REDUCERS[red](o.path(f"properties.{prop}")),
                ),
                {},
                True,
            )
            for red, prop in (
                ("sum", "score"),
                ("avg", "ratio"),
                ("min", "score"),
                ("max", "is_trial"),
                ("sum", "amount"),
            )
        },
        "pushdown-reduce-avg": (
            f"function main() {{ return {EV}.reduce(mixpanel.reducer.avg('properties.score')); }}",
            lambda c: [o.avg(o.path("properties.score"))(events_of(c))],
            {},
            True,
        ),
        "pushdown-groupByUser-count": (
            f"function main() {{ return {EV}.groupByUser(['properties.plan'], mixpanel.reducer.count())"
            ".filter(g => g.value > 1); }",
            lambda c: [
                g
                for g in o.group_by_user(events_of(c), [o.path("properties.plan")], lambda evs: len(evs))
                if g["value"] > 1
            ],
            {},
            True,
        ),
        "reduce-list": (
            f"function main() {{ return {EV}.reduce([mixpanel.reducer.count(),"
            " mixpanel.reducer.min('properties.amount')]); }",
            lambda c: [[len(events_of(c)), o.min_(o.path("properties.amount"))(events_of(c))]],
            {},
            True,
        ),
    }


PUSHED = (("sum", "score"), ("avg", "ratio"), ("min", "score"), ("max", "is_trial"), ("sum", "amount"))
REDUCERS = {"sum": o.sum_, "avg": o.avg, "min": o.min_, "max": o.max_}
CASES = _cases()


@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_script_answers_equal_the_oracle(loaded, name: str) -> None:  # type: ignore[no-untyped-def]
    env, dataset, profiles = loaded
    script, oracle, extra, ordered = CASES[name]
    for pid, spec in sorted(dataset.projects.items()):
        params = {"from": spec.from_date, "to": spec.to_date, **extra}
        r = jql(env, pid, script, params)
        assert r.status_code == 200, f"{name} (project {pid}): {r.status_code} {r.text[:1000]}"
        ctx = {"raw": spec.events, "tz": spec.tz, "people": profiles[pid], **params}
        expected, ours = oracle(ctx), r.json()
        if not ordered:
            expected, ours = _sorted(expected), _sorted(ours)
        assert expected, f"{name}: the oracle's answer is empty: the case checks nothing"
        problems = diff(ours, expected)
        assert not problems, f"{name} (project {pid}, {spec.tz}):\n" + "\n".join(problems[:20])


def test_small_windows(loaded, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Windows of at most 30 rows: many statements, and the hours holding more (40, 50 events)
    read in several (by offset); every event once, in time order."""
    env, dataset, _ = loaded
    monkeypatch.setattr(jql_source, "_WINDOW_ROWS", 30)
    script = f"function main() {{ return {EV}.map(e => [e.time, e.name, e.distinct_id, e.properties.price]); }}"
    for pid, spec in sorted(dataset.projects.items()):
        r = jql(env, pid, script, {"from": spec.from_date, "to": spec.to_date})
        assert r.status_code == 200, r.text[:500]
        ours = r.json()
        expected = [
            [e["time"], e["name"], e["distinct_id"], e["properties"].get("price")]
            for e in o.events(spec.events, spec.tz, spec.from_date, spec.to_date)
        ]
        assert [row[0] for row in ours] == sorted(row[0] for row in ours)  # time order
        assert not diff(_sorted(ours), _sorted(expected))


def test_small_key_windows(loaded, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A grouping script reads along the sorting key (`key_windows`): windows of at most 12
    rows, so the larger (day, name) cells are read in pages; every event once."""
    env, dataset, _ = loaded
    monkeypatch.setattr(jql_source, "_WINDOW_ROWS", 12)
    script = (  # the filter keeps the grouping in the engine (no pushdown)
        f"function main() {{ return {EV}.filter(e => e.time > 0).groupBy(['name', 'distinct_id'],"
        " [mixpanel.reducer.count(), mixpanel.reducer.sum('properties.score')]); }"
    )
    for pid, spec in sorted(dataset.projects.items()):
        r = jql(env, pid, script, {"from": spec.from_date, "to": spec.to_date})
        assert r.status_code == 200, r.text[:500]
        events = o.events(spec.events, spec.tz, spec.from_date, spec.to_date)
        expected = o.group_by(
            events, [o.path("name"), o.path("distinct_id")], [lambda evs: len(evs), o.sum_(o.path("properties.score"))]
        )
        assert expected and not diff(r.json(), expected)


def test_a_script_reads_only_its_own_project(loaded) -> None:  # type: ignore[no-untyped-def]
    env, dataset, profiles = loaded
    script = f"function main() {{ return join({EV}, People()).map(t => t.distinct_id); }}"
    answers = {}
    for pid, spec in dataset.projects.items():
        r = jql(env, pid, script, {"from": "2000-01-01", "to": "2100-01-01"})
        assert r.status_code == 200, r.text
        answers[pid] = set(r.json())
        own = {str(e["properties"]["distinct_id"]) for e in spec.events} | set(profiles[pid])
        assert answers[pid] <= own
    for pid, spec in dataset.projects.items():
        others = {
            str(e["properties"]["distinct_id"])
            for p, o_spec in dataset.projects.items()
            if p != pid
            for e in o_spec.events
        }
        foreign = others - {str(e["properties"]["distinct_id"]) for e in spec.events} - set(profiles[pid])
        assert foreign and not answers[pid] & foreign


BAD: dict[str, tuple[str, int, str]] = {
    "missing-script": ("", 400, "Missing required parameter: script"),
    "syntax": ("function main() {\n  return 1 +* 2;\n}", 400, "line 2, column"),
    "throws": ("function main() {\n  throw new Error('boom');\n}", 400, "boom (line 2, column 9)"),
    "no-main": ("var x = 1;", 400, "main()"),
    "require": ("function main() { return require('fs').readFileSync('/etc/passwd'); }", 400, "require is not defined"),
    "network": ("function main() { return fetch('http://example.com'); }", 400, "fetch is not defined"),
    "webassembly": ("function main() { return WebAssembly.compile(new Uint8Array(8)); }", 400, "WebAssembly"),
    "prototype-pollution": (
        "Object.prototype.polluted = 1; Array.prototype.map = null;"
        " function main() { return Events({from_date: params.from, to_date: params.to}).map(e => e.polluted); }",
        400,
        "map",
    ),
    "process": ("function main() { return process.env; }", 400, "process is not defined"),
    # `user[...]` reads the profile in a join selector only; `behaviors[...]` nowhere in JQL.
    "join-selector-behaviors": (
        f"function main() {{ return join({EV}, People(), {{selectors: [{{selector: 'behaviors[\"x\"] > 1'}}]}}); }}",
        400,
        "Error in join selectors[0]",
    ),
    "event-selector-user": (
        "function main() { return Events({from_date: params.from, to_date: params.to,"
        " event_selectors: [{selector: 'user[\"plan\"] == 1'}]}); }",
        400,
        "Error in event_selectors[0]",
    ),
    "infinite-loop": ("function main() { while (true) {} }", 400, "FOOTFALL_JQL_TIMEOUT_SECONDS"),
    "loop-in-callback": (
        f"function main() {{ return {EV}.map(function (e) {{ for (;;) {{}} }}); }}",
        400,
        "FOOTFALL_JQL_TIMEOUT_SECONDS",
    ),
    "memory-bomb": (
        "function main() { var a = []; for (;;) a.push(new Array(1e6).fill('x')); }",
        400,
        "FOOTFALL_JQL_MEMORY_MB",
    ),
    "output-cap": (
        f"function main() {{ return {EV}.map(function (e) {{ return new Array(2000).join('x'); }}); }}",
        400,
        "FOOTFALL_JQL_MAX_OUTPUT_BYTES",
    ),
    "bad-selector": (
        "function main() { return Events({from_date: params.from, to_date: params.to,"
        " event_selectors: [{selector: 'properties[\"x\" =='}]}); }",
        400,
        "event_selectors[0]",
    ),
    "bad-date": ("function main() { return Events({from_date: '2024-13-01', to_date: params.to}); }", 400, "from_date"),
}


@pytest.mark.parametrize("name", list(BAD), ids=list(BAD))
def test_bad_scripts_and_limits_answer_400(loaded, name: str) -> None:  # type: ignore[no-untyped-def]
    env, dataset, _ = loaded
    pid = min(dataset.projects)
    spec = dataset.projects[pid]
    script, status, needle = BAD[name]
    started = time.monotonic()
    r = jql(env, pid, script, {"from": spec.from_date, "to": spec.to_date})
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"request", "error"} and needle in body["error"], body
    assert time.monotonic() - started < 30
    # The server keeps serving.
    ok = jql(
        env,
        pid,
        f"function main() {{ return {EV}.reduce(mixpanel.reducer.count()); }}",
        {"from": spec.from_date, "to": spec.to_date},
    )
    assert ok.status_code == 200 and ok.json()[0] > 0


def test_an_unknown_format_answers_400_before_the_script_runs(loaded) -> None:  # type: ignore[no-untyped-def]
    env, dataset, _ = loaded
    pid = min(dataset.projects)
    spec = dataset.projects[pid]
    script = f"function main() {{ return {EV}.reduce(mixpanel.reducer.count()); }}"
    r = jql(env, pid, script, {"from": spec.from_date, "to": spec.to_date}, format="xml")
    assert r.status_code == 400 and "format" in r.json()["error"], r.text


# -- mixpanel-utils, unchanged, over HTTP ----------------------------------------------------------
@pytest.fixture
def http_base(loaded) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The loaded app behind a real HTTP server (mixpanel-utils speaks urllib), in a thread."""
    import socket
    import threading

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(loaded[0].app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def test_mixpanel_utils_jql_helpers(loaded, http_base: str) -> None:  # type: ignore[no-untyped-def]
    """query_jql_events, query_jql_people and query_jql as mixpanel-utils sends them."""
    from mixpanel_utils import MixpanelUtils

    from tests.integration.query.report_env import SA_SECRET, SA_USER

    _, dataset, profiles = loaded
    pid = max(dataset.projects)
    spec = dataset.projects[pid]
    mu = MixpanelUtils(SA_SECRET, service_account_username=SA_USER, project_id=pid, max_retries=1)
    mu.formatted_api = http_base + "/api"

    got = mu.query_jql_events(spec.from_date, spec.to_date, [{"event": "Purchase"}], output_properties=["price"])
    expected = [
        {
            "event": e["name"],
            "properties": {
                "distinct_id": e["distinct_id"],
                "time": e["time"] / 1000,
                **({"price": e["properties"]["price"]} if "price" in e["properties"] else {}),
            },
        }
        for e in o.events(spec.events, spec.tz, spec.from_date, spec.to_date, [{"event": "Purchase"}])
    ]
    assert expected and not diff(_sorted(got), _sorted(expected))

    selector = 'properties["plan"] == "pro"'
    got = mu.query_jql_people(selector, output_properties=["plan", "age"])
    expected = [
        {
            "$distinct_id": u["distinct_id"],
            "$properties": {"plan": u["properties"]["plan"], "age": u["properties"]["age"]},
        }
        for u in o.people(profiles[pid], spec.tz, [{"selector": selector}])
    ]
    assert expected and not diff(_sorted(got), _sorted(expected))

    script = (
        "function main() { return Events({from_date: params.a, to_date: params.b}).reduce(mixpanel.reducer.count()); }"
    )
    count = mu.query_jql(script, params={"a": spec.from_date, "b": spec.to_date})
    assert count == [len(o.events(spec.events, spec.tz, spec.from_date, spec.to_date))]

    # format=csv (with download_file): the text as it comes, one row per group.
    by_name = "function main() { return Events({from_date: params.a, to_date: params.b})"
    by_name += ".groupBy(['name'], mixpanel.reducer.count()); }"
    text = mu.query_jql(by_name, params={"a": spec.from_date, "b": spec.to_date}, format="csv")
    rows = list(csv.reader(io.StringIO(text)))
    groups = o.group_by(o.events(spec.events, spec.tz, spec.from_date, spec.to_date), [o.path("name")], o.count())
    assert rows[0] == ["key.0", "value"]
    assert rows[1:] == [[g["key"][0], str(g["value"])] for g in groups] and len(rows) > 2
