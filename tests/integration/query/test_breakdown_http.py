"""The breakdown endpoints at the HTTP boundary: both path prefixes, trailing slash, GET
and form POST, unknown parameters, CSV, the error shape and status of every kind of bad
request, and the per-project limits."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from footfall.services.query.settings import QuerySettings
from tests.integration.query.report_env import SA_SECRET, SA_USER, ReportEnv, build_env, import_events, release
from tests.unit.query.strategies import expressions

pytestmark = pytest.mark.warehouse

T0 = 1_710_000_000  # 2024-03-09T16:00:00Z


def _event(name: str, t: int, user: str, **props: object) -> dict[str, object]:
    return {
        "event": name,
        "properties": {"time": t, "distinct_id": user, "$insert_id": f"{name[:3]}-{t}-{user}", **props},
    }


EVENTS = [
    _event("Play", T0, "a", genre="rock", plays=3),
    _event("Play", T0 + 60, "b", genre="jazz", plays="4"),
    _event("Play", T0 + 86_400, "a", genre="rock", plays=5),
    _event("Stop", T0 + 120, "a"),
]
RANGE = {"from_date": "2024-03-09", "to_date": "2024-03-10"}


@pytest.fixture(scope="module")
def env(warehouse) -> Iterator[ReportEnv]:  # type: ignore[no-untyped-def]
    env = build_env(warehouse, {1: "UTC", 2: "Europe/Berlin"})
    import_events(env, 1, EVENTS)
    yield env
    release(env)


def sa_auth() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{SA_USER}:{SA_SECRET}".encode()).decode()}


@pytest.mark.parametrize("prefix", ["/api/query", "/api/2.0"])
@pytest.mark.parametrize("slash", ["", "/"], ids=["bare", "slash"])
def test_paths_methods_and_auth_variants(env: ReportEnv, prefix: str, slash: str) -> None:
    params = {"event": "Play", "project_id": "1", "format": "json", "api_key": "ignored", "callback": "", **RANGE}
    url = f"{prefix}/segmentation{slash}"
    got = env.request("GET", url, params=params, headers=sa_auth())
    posted = env.request("POST", url, data=params, headers=sa_auth())
    by_secret = env.query(1, f"/segmentation{slash}", {"event": "Play", **RANGE}, prefix=prefix)
    expected = {
        "data": {"series": ["2024-03-09", "2024-03-10"], "values": {"Play": {"2024-03-09": 2, "2024-03-10": 1}}},
        "legend_size": 1,
    }
    for r in (got, posted, by_secret):
        assert r.status_code == 200, r.text
        assert r.json() == expected


def test_list_parameters_are_json_strings(env: ReportEnv) -> None:
    r = env.query(
        1,
        "/events/properties",
        {"event": "Play", "name": "genre", "values": '["rock"]', "type": "unique", "unit": "day", **RANGE},
    )
    assert r.json()["data"]["values"] == {"rock": {"2024-03-09": 1, "2024-03-10": 1}}


@pytest.mark.parametrize(
    ("path", "params", "header", "first_row"),
    [
        ("/segmentation", {"event": "Play", **RANGE}, '"segment","date","value"', '"Play","2024-03-09","2"'),
        (
            "/events",
            {"event": '["Stop"]', "type": "general", "unit": "day", **RANGE},
            '"segment","date","value"',
            '"Stop","2024-03-09","1"',
        ),
        (
            "/events/properties",
            {"event": "Play", "name": "genre", "type": "general", "unit": "day", **RANGE},
            '"segment","date","value"',
            '"rock","2024-03-09","1"',
        ),
    ],
    ids=["segmentation", "events", "properties"],
)
def test_csv_format(env: ReportEnv, path: str, params: dict[str, str], header: str, first_row: str) -> None:
    r = env.query(1, path, {**params, "format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    lines = r.text.splitlines()
    assert lines[0] == header and lines[1] == first_row


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/segmentation", {"from_date": "2024-03-09", "to_date": "2024-03-10"}, "Missing required parameter: event"),
        ("/segmentation", {"event": "Play", "to_date": "2024-03-10"}, "Missing required parameter: from_date"),
        ("/segmentation", {"event": "Play", "from_date": "2024-13-01", "to_date": "2024-03-10"}, "Error in from_date"),
        ("/segmentation", {"event": "Play", "from_date": "2024-03-10", "to_date": "2024-03-09"}, "Error in to_date"),
        ("/segmentation", {"event": "Play", "type": "median", **RANGE}, "Error in type"),
        ("/segmentation", {"event": "Play", "unit": "year", **RANGE}, "Error in unit"),
        ("/segmentation", {"event": "Play", "limit": "10001", **RANGE}, "Error in limit: must be at most 10000"),
        ("/segmentation", {"event": "Play", "limit": "ten", **RANGE}, "Error in limit"),
        ("/segmentation", {"event": "Play", "format": "xml", **RANGE}, "Error in format"),
        (
            "/segmentation",
            {"event": "Play", "where": 'properties["genre"] == ', **RANGE},
            "Error in where: syntax error at position 23: expected",
        ),
        (
            "/segmentation",
            {"event": "Play", "on": 'properties["genre"', **RANGE},
            "Error in on: syntax error at position 18: expected",
        ),
        ("/segmentation", {"event": "Play", "where": 'nosuch(properties["x"])', **RANGE}, "Error in where: invalid"),
        ("/segmentation", {"event": "Play", "where": 'user["x"] == 1', **RANGE}, "Error in where"),
        ("/segmentation/numeric", {"event": "Play", **RANGE}, "Missing required parameter: on"),
        ("/segmentation/numeric", {"event": "Play", "on": "1", "buckets": "0", **RANGE}, "Error in buckets"),
        ("/segmentation/sum", {"event": "Play", **RANGE}, "Missing required parameter: on"),
        ("/segmentation/average", {"event": "Play", "on": "properties[", **RANGE}, "Error in on: syntax error"),
        ("/events", {"type": "general", "unit": "day", **RANGE}, "Missing required parameter: event"),
        ("/events", {"event": "Play", "type": "general", **RANGE}, "Error in event: must be a JSON array"),
        ("/events", {"event": '["Play"]', "type": "general", "interval": "0"}, "Error in interval"),
        (
            "/events",
            {"event": '["Play"]', "unit": "minute", "from_date": "2020-01-01", "to_date": "2024-01-01"},
            "Error in unit: the range holds more than",
        ),
        ("/events/top", {"type": "sum"}, "Error in type"),
        ("/events/names", {"limit": "0"}, "Error in limit: must be at least 1"),
        ("/events/properties", {"event": "Play", **RANGE}, "Missing required parameter: name"),
        ("/events/properties", {"event": "Play", "name": "g", "values": "rock", **RANGE}, "Error in values"),
        ("/events/properties/top", {}, "Missing required parameter: event"),
        ("/events/properties/values", {"event": "Play"}, "Missing required parameter: name"),
    ],
)
def test_bad_requests_name_the_parameter(env: ReportEnv, path: str, params: dict[str, str], message: str) -> None:
    r = env.query(1, path, params)
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"request", "error"}
    assert body["error"].startswith(message), body["error"]
    assert body["request"].startswith("/api/query" + path)


def test_credentials_errors_have_the_same_shape(env: ReportEnv) -> None:
    url = "/api/2.0/segmentation"
    params = {"event": "Play", **RANGE}
    missing = env.request("GET", url, params=params)
    wrong = env.request("GET", url, params=params, auth=("nope", ""))
    other = env.request("GET", url, params={**params, "project_id": "1"}, auth=("report-secret-2", ""))
    assert (missing.status_code, wrong.status_code, other.status_code) == (401, 401, 403)
    for r in (missing, wrong, other):
        assert set(r.json()) == {"request", "error"}


def test_projects_are_isolated(env: ReportEnv) -> None:
    r = env.query(2, "/segmentation", {"event": "Play", **RANGE})
    assert r.json()["data"]["values"] == {"Play": {"2024-03-09": 0, "2024-03-10": 0}}


def test_rate_limit_answers_429_with_retry_after(env: ReportEnv) -> None:
    limited = build_env(env.warehouse, {1: "UTC"}, QuerySettings(rate_per_hour=2, concurrency=5), keep_data=True)
    try:
        statuses = [limited.query(1, "/events/names", {"type": "general"}).status_code for _ in range(3)]
        r = limited.query(1, "/events/names", {"type": "general"})
        assert statuses == [200, 200, 429] and r.status_code == 429
        assert int(r.headers["retry-after"]) > 0 and set(r.json()) == {"request", "error"}
    finally:
        limited.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expression=expressions(), garbage=st.text(max_size=40))
def test_random_expressions_are_never_a_server_error(env: ReportEnv, expression: str, garbage: str) -> None:
    """Any `where`/`on` text — well-formed, ill-typed or garbage — is answered 200 or 400."""
    for path, params in (
        ("/segmentation", {"event": "Play", "where": expression, "on": expression, **RANGE}),
        ("/segmentation/numeric", {"event": "Play", "on": expression, **RANGE}),
        ("/segmentation/sum", {"event": "Play", "on": expression + garbage, **RANGE}),
    ):
        r = env.query(1, path, params)
        assert r.status_code in (200, 400), (path, params, r.text)
        if r.status_code == 400:
            assert set(r.json()) == {"request", "error"}
