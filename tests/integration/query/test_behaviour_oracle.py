"""`/funnels`, `/retention`, `/retention/addiction` and `/stream/query` against the oracle.

The generated data (tests/factories.py) of five projects (UTC, America/New_York,
Europe/Berlin, Australia/Lord_Howe, Asia/Kolkata), imported through `/import` with merges
stopped, so unmerged and conflicting duplicates stay in the table. It stresses the rules:
repeated step events, steps out of order and within 2 s of each other, journeys crossing
`to_date`, DST changes, users in several buckets, empty distinct_id. The saved funnels are
`tests.factories.FUNNELS` (a custom-event step with a selector; a funnel repeating a step).
Every response must equal the oracle's body (floats within 1e-9, same key order).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from footfall.shared.saved import WarehouseSavedStore, parse_funnel
from tests.factories import Dataset, ProjectSpec, make_dataset
from tests.integration.query.report_env import Case, ReportEnv, diff, rng, serving
from tests.oracle import frequency, funnels, retention, stream

pytestmark = pytest.mark.warehouse

SEED = 20240311
PROJECTS = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def loaded(warehouse) -> Iterator[tuple[ReportEnv, Dataset, dict[tuple[int, int], int]]]:  # type: ignore[no-untyped-def]
    dataset = make_dataset(SEED, n_events=1500)
    with serving(warehouse, dataset) as env:
        store = WarehouseSavedStore(warehouse)
        saved: dict[tuple[int, int], int] = {}  # (project, factories funnel id) -> stored funnel_id
        for pid in dataset.projects:
            for fid, definition in sorted(dataset.funnels.items()):
                name, parsed = parse_funnel(definition)
                saved[(pid, fid)] = store.create_funnel(pid, name, parsed).funnel_id
        # Ids count per project: one more funnel in project 2 has an id that project 1 lacks.
        name, parsed = parse_funnel(dataset.funnels[min(dataset.funnels)])
        saved[(2, 0)] = store.create_funnel(2, name, parsed).funnel_id
        yield env, dataset, saved


def _compare(env: ReportEnv, pid: int, path: str, params: dict[str, str], expected: object) -> None:
    r = env.query(pid, path, params)
    assert r.status_code == 200, f"{path} {params}: {r.status_code} {r.text[:1000]}"
    problems = diff(r.json(), expected)
    assert not problems, f"{path} {params} (project {pid}):\n" + "\n".join(problems[:20])


# -- /funnels --------------------------------------------------------------------------------------
FUNNEL_CASES: dict[str, Case] = {
    "daily": lambda s: rng(s),
    "interval-3": lambda s: rng(s, interval="3"),
    "week": lambda s: rng(s, unit="week"),
    "month-wins-over-interval": lambda s: rng(s, unit="month", interval="5"),
    "window-2-hours": lambda s: rng(s, length="2", length_unit="hour"),
    "window-90-seconds": lambda s: rng(s, length="90", length_unit="second"),
    "crossing-to-date": lambda s: {"from_date": s.to_date, "to_date": s.to_date, "length": "3", "length_unit": "day"},
    "where": lambda s: rng(s, where='properties["plan"] == "pro"'),
    "on": lambda s: rng(s, on='properties["plan"]', unit="week"),
    "on-list-limit": lambda s: rng(s, on='properties["tags"]', limit="2"),
    "on-where-interval": lambda s: rng(
        s, on='properties["$browser"]', where='defined(properties["price"])', interval="7"
    ),
}


@pytest.mark.parametrize("case", FUNNEL_CASES, ids=list(FUNNEL_CASES))
@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
def test_funnels_match_oracle(
    loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], pid: int, case: str
) -> None:
    env, dataset, saved = loaded
    spec = dataset.projects[pid]
    for fid, definition in sorted(dataset.funnels.items()):
        params = FUNNEL_CASES[case](spec)
        expected = funnels.funnels(spec.events, spec.tz, params, definition, dataset.now)
        _compare(env, pid, "/funnels", {**params, "funnel_id": str(saved[(pid, fid)])}, expected)


def test_funnels_list(loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]]) -> None:
    env, dataset, saved = loaded
    r = env.query(2, "/funnels/list", {})
    assert r.status_code == 200
    expected = [{"funnel_id": saved[(2, fid)], "name": d["name"]} for fid, d in sorted(dataset.funnels.items())]
    first = dataset.funnels[min(dataset.funnels)]
    expected.append({"funnel_id": saved[(2, 0)], "name": first["name"]})
    assert r.json() == expected


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"from_date": "2024-03-05", "to_date": "2024-03-06"}, 400, "funnel_id"),
        ({"funnel_id": "999999", "from_date": "2024-03-05", "to_date": "2024-03-06"}, 404, "funnel_id"),
        ({"funnel_id": "{f}", "to_date": "2024-03-06"}, 400, "from_date"),
        ({"funnel_id": "{f}", "from_date": "2024-03-05", "to_date": "2024-03-06", "length": "91"}, 400, "90 days"),
        (
            {"funnel_id": "{f}", "from_date": "2024-03-05", "to_date": "2024-03-06", "length_unit": "week"},
            400,
            "length_unit",
        ),
        ({"funnel_id": "{f}", "from_date": "2024-03-05", "to_date": "2024-03-06", "unit": "hour"}, 400, "unit"),
        (
            {"funnel_id": "{f}", "from_date": "2024-03-05", "to_date": "2024-03-06", "where": "properties["},
            400,
            "Error in where: syntax error at position",
        ),
        ({"funnel_id": "{f}", "from_date": "2024-03-05", "to_date": "2024-03-06", "limit": "10001"}, 400, "limit"),
    ],
    ids=[
        "no-funnel-id",
        "unknown-funnel",
        "no-from-date",
        "window-over-90-days",
        "bad-length-unit",
        "bad-unit",
        "bad-where",
        "limit-too-large",
    ],
)
def test_funnel_errors(
    loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], params: dict[str, str], status: int, message: str
) -> None:
    env, _, saved = loaded
    params = {k: v.replace("{f}", str(saved[(1, 1)])) for k, v in params.items()}
    r = env.query(1, "/funnels", params)
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"request", "error"} and message in body["error"]


def test_funnel_of_another_project_is_404(loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]]) -> None:
    env, _, saved = loaded
    dates = {"from_date": "2024-03-05", "to_date": "2024-03-06"}
    assert saved[(2, 0)] not in {fid for (pid, _), fid in saved.items() if pid == 1}
    assert env.query(2, "/funnels", {"funnel_id": str(saved[(2, 0)]), **dates}).status_code == 200
    r = env.query(1, "/funnels", {"funnel_id": str(saved[(2, 0)]), **dates})
    assert r.status_code == 404


# -- /retention ------------------------------------------------------------------------------------
RETENTION_CASES: dict[str, Case] = {
    "birth": lambda s: rng(s, born_event="Sign Up"),
    "birth-event-interval-count": lambda s: rng(s, born_event="Sign Up", event="Purchase", interval_count="7"),
    "birth-same-event": lambda s: rng(s, born_event="App Open", event="App Open", interval_count="3"),
    "birth-born-where-where": lambda s: rng(
        s,
        born_event="App Open",
        born_where='properties["plan"] == "pro"',
        where='properties["$browser"] != "Safari"',
        interval_count="4",
    ),
    "birth-interval-2-unbounded": lambda s: rng(
        s, born_event="Sign Up", interval="2", interval_count="5", unbounded_retention="true"
    ),
    "birth-week": lambda s: rng(s, born_event="App Open", unit="week", interval_count="3"),
    "birth-month": lambda s: {
        "from_date": "2024-03-01",
        "to_date": "2024-04-14",
        "born_event": "App Open",
        "unit": "month",
        "interval_count": "2",
    },
    "compounded": lambda s: rng(s, retention_type="compounded", event="App Open", interval_count="5"),
    "compounded-all-events-week": lambda s: rng(s, retention_type="compounded", unit="week", interval_count="2"),
    "compounded-where-unbounded": lambda s: rng(
        s,
        retention_type="compounded",
        event="View Item",
        where='defined(properties["price"])',
        interval_count="6",
        unbounded_retention="1",
    ),
    "on": lambda s: rng(s, born_event="App Open", on='properties["plan"]', interval_count="3"),
    "on-list-limit-compounded": lambda s: rng(
        s, retention_type="compounded", event="View Item", on='properties["tags"]', limit="2", interval_count="2"
    ),
}


@pytest.mark.parametrize("case", RETENTION_CASES, ids=list(RETENTION_CASES))
@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
def test_retention_matches_oracle(
    loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], pid: int, case: str
) -> None:
    env, dataset, _ = loaded
    spec = dataset.projects[pid]
    params = RETENTION_CASES[case](spec)
    _compare(env, pid, "/retention", params, retention.retention(spec.events, spec.tz, params, dataset.now))


# -- /retention/addiction --------------------------------------------------------------------------
FREQUENCY_CASES: dict[str, Case] = {
    "day-hour": lambda s: rng(s, unit="day", addiction_unit="hour"),
    "week-day-event": lambda s: rng(s, unit="week", addiction_unit="day", event="App Open"),
    "week-hour-where": lambda s: rng(s, unit="week", addiction_unit="hour", where='properties["plan"] != "free"'),
    "month-day": lambda s: {
        "from_date": "2024-03-01",
        "to_date": "2024-04-14",
        "unit": "month",
        "addiction_unit": "day",
    },
    "on-limit": lambda s: rng(s, unit="week", addiction_unit="day", on='properties["$browser"]', limit="2"),
}


@pytest.mark.parametrize("case", FREQUENCY_CASES, ids=list(FREQUENCY_CASES))
@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
def test_frequency_matches_oracle(
    loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], pid: int, case: str
) -> None:
    env, dataset, _ = loaded
    spec = dataset.projects[pid]
    params = FREQUENCY_CASES[case](spec)
    _compare(env, pid, "/retention/addiction", params, frequency.frequency(spec.events, spec.tz, params, dataset.now))


# -- /stream/query ---------------------------------------------------------------------------------
def _some_ids(spec: ProjectSpec) -> list[object]:
    ids: list[object] = []
    for raw in spec.events:
        did = raw["properties"]["distinct_id"]
        if did not in ids:
            ids.append(did)
        if len(ids) == 6:
            break
    return [*ids, "", "nobody"]


@pytest.mark.parametrize("pid", PROJECTS, ids=[f"p{p}" for p in PROJECTS])
def test_stream_matches_oracle(loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], pid: int) -> None:

    env, dataset, _ = loaded
    spec = dataset.projects[pid]
    params = rng(spec, distinct_ids=json.dumps(_some_ids(spec)))
    _compare(env, pid, "/stream/query", params, stream.stream(spec.events, spec.tz, params, dataset.now))


# -- /insights -------------------------------------------------------------------------------------
INSIGHTS_CASES: dict[str, dict[str, object]] = {
    "day-general": {"events": ["App Open", "View Item", "Never Happened"], "unit": "day"},
    "hour-unique": {"events": ["Purchase"], "unit": "hour", "type_of_count": "unique"},
    "week-average-where": {
        "events": ["View Item", "Search"],
        "unit": "week",
        "type_of_count": "average",
        "where": 'properties["plan"] == "pro"',
    },
    "month-on": {"events": ["App Open", "Purchase"], "unit": "month", "on": 'properties["$browser"]', "limit": 2},
    "last-days-unique-on": {
        "events": ["View Item"],
        "type_of_count": "unique",
        "on": 'properties["tags"]',
        "last_days": 10,
    },
}


def _insights_expected(spec: ProjectSpec, dataset: Dataset, params: dict[str, object]) -> dict[str, object]:
    """The oracle's /events (and /segmentation for `on`) numbers, keyed the way /insights keys them."""
    from datetime import date, timedelta
    from zoneinfo import ZoneInfo

    from footfall.services.query.reports.insights import bucket_timestamp
    from tests.oracle import segmentation as oracle_segmentation

    if "last_days" in params:
        today = dataset.now.astimezone(ZoneInfo(spec.tz)).date()
        first, last = today - timedelta(days=int(params["last_days"]) - 1), today  # type: ignore[arg-type]
    else:
        first, last = date.fromisoformat(spec.from_date), date.fromisoformat(spec.to_date)
    base = {
        "from_date": first.isoformat(),
        "to_date": last.isoformat(),
        "unit": str(params.get("unit", "day")),
        "type": str(params.get("type_of_count", "general")),
    }
    if "where" in params:
        base["where"] = str(params["where"])
    names = [str(e) for e in params["events"]]  # type: ignore[attr-defined]

    def stamp(cells: dict[str, object]) -> dict[str, object]:
        return {bucket_timestamp(k, spec.tz): v for k, v in cells.items()}

    def values(name: str, **extra: str) -> dict[str, dict[str, object]]:
        body = oracle_segmentation.segmentation(spec.events, spec.tz, {**base, "event": name, **extra}, dataset.now)
        return body["data"]["values"]  # type: ignore[no-any-return]

    if "on" not in params:
        return {name: stamp(values(name)[name]) for name in names}
    on = {"on": str(params["on"]), "limit": str(params.get("limit", 60))}
    return {
        name: {"$overall": stamp(values(name)[name]), **{k: stamp(v) for k, v in values(name, **on).items()}}
        for name in names
    }


@pytest.mark.parametrize("case", INSIGHTS_CASES, ids=list(INSIGHTS_CASES))
@pytest.mark.parametrize("pid", (2, 4), ids=["p2", "p4"])
def test_insights_match_oracle(
    loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]], pid: int, case: str
) -> None:
    from footfall.shared.saved import parse_bookmark

    env, dataset, _ = loaded
    spec = dataset.projects[pid]
    params: dict[str, object] = {"type": "insights", **INSIGHTS_CASES[case]}
    if "last_days" not in params:
        params.update(from_date=spec.from_date, to_date=spec.to_date)
    name, parsed = parse_bookmark({"name": case, "params": params})
    bookmark = WarehouseSavedStore(env.warehouse).create_bookmark(pid, name, parsed)
    r = env.query(pid, "/insights", {"bookmark_id": str(bookmark.bookmark_id)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["computed_at"] == dataset.now.isoformat()
    assert body["headers"] == (["$event", params["on"]] if "on" in params else ["$event"])
    first, last = parsed.dates(dataset.now.astimezone(__import__("zoneinfo").ZoneInfo(spec.tz)).date())
    assert body["date_range"]["from_date"] == bucket_start(first.isoformat(), spec.tz)
    assert body["date_range"]["to_date"].startswith(last.isoformat() + "T23:59:59.999000")
    problems = diff(body["series"], _insights_expected(spec, dataset, params))
    assert not problems, "\n".join(problems[:20])


def bucket_start(key: str, tz: str) -> str:
    from footfall.services.query.reports.insights import bucket_timestamp

    return bucket_timestamp(key, tz)


def test_insights_errors(loaded: tuple[ReportEnv, Dataset, dict[tuple[int, int], int]]) -> None:
    env, _, _ = loaded
    assert env.query(1, "/insights", {}).status_code == 400
    missing = env.query(1, "/insights", {"bookmark_id": "987654"})
    assert missing.status_code == 404 and "bookmark_id" in missing.json()["error"]
