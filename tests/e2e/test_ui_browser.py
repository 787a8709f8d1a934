"""The web UI in headless Chromium (Debian's `chromium`, driven by Playwright) against a
`footfall serve` subprocess: sign in, import events, the segmentation chart's numbers equal
the API's answer (and the oracle's), live events, CSRF, sign out and a dead session.
Screenshots of each page go to `build/ui-screenshots/` (git-ignored) for review."""

from __future__ import annotations

import os
import random
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mixpanel import BufferedConsumer, Mixpanel
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import CREDS, REPO, ServeProcess
from tests.oracle.funnels import funnels as oracle_funnels
from tests.oracle.retention import retention as oracle_retention
from tests.oracle.segmentation import segmentation as oracle_segmentation
from tests.oracle.stream import stream as oracle_stream

pytestmark = pytest.mark.e2e
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

SECRET = CREDS["FOOTFALL_BOOTSTRAP_SECRET"]
TOKEN = CREDS["FOOTFALL_BOOTSTRAP_TOKEN"]
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
SHOTS = REPO / "build" / "ui-screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (make test installs it as root)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        launched = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        yield launched
        launched.close()


def journeys(seed: int, now: int) -> list[dict[str, Any]]:
    """Three days of `Viewed` (country-tagged) events of 16 users, and `Signed up` of 6 of them."""
    rng = random.Random(seed)
    events = []
    for _ in range(150):
        user = rng.randrange(16)
        events.append(
            {
                "event": "Signed up" if user < 6 and rng.random() < 0.4 else "Viewed",
                "properties": {
                    "time": now - 3600 - rng.randrange(0, 3 * 86400 - 3600),
                    "distinct_id": f"u{user}",
                    "$insert_id": uuid.uuid4().hex,
                    "country": rng.choice(["DE", "FR", "US"]),
                },
            }
        )
    # the live page's window (the last 10 minutes) holds only these
    for i, (name, user) in enumerate([("Signed up", 0), ("Viewed", 1), ("Signed up", 2), ("Signed up", 1)]):
        properties = {"time": now - 20 * (i + 1), "distinct_id": f"u{user}", "$insert_id": uuid.uuid4().hex}
        events.append({"event": name, "properties": {**properties, "country": "DE"}})
    return events


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(page: Any, base: str) -> None:
    """By keyboard alone: Tab through the form (skip link, the sign-in choice, the fields), Enter."""
    page.goto(base + "/ui")
    focused = []
    for text in ("", "", SA[0], SA[1], "1"):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.id || document.activeElement.className"))
        if text:
            page.keyboard.type(text)
    assert focused == ["skip", "", "username", "secret", "project_id"], focused
    page.keyboard.press("Enter")
    page.wait_for_url(base + "/ui/segmentation**")


def chart_values(page: Any) -> dict[str, dict[str, int]]:
    """{segment: {date: value}} as the page drew it: the chart's points, checked against its table."""
    points = page.eval_on_selector_all(
        "#chart g.series circle",
        "cs => cs.map(c => [c.parentNode.dataset.segment, c.dataset.date, Number(c.dataset.value)])",
    )
    cells = page.eval_on_selector_all(
        "#values tbody td",
        "ts => ts.map(t => [t.parentNode.dataset.segment, t.dataset.date, Number(t.dataset.value)])",
    )
    assert sorted(points) == sorted(cells)
    drawn: dict[str, dict[str, int]] = {}
    for segment, date, value in points:
        drawn.setdefault(segment, {})[date] = value
    return drawn


def test_browser_signs_in_charts_what_the_api_answers_and_signs_out(
    serve_process: ServeProcess, browser: Any, tmp_path: Path
) -> None:
    base = serve_process.base
    now = int(time.time()) - 60
    events = journeys(11, now)
    r = httpx.post(
        base + "/import?strict=1&project_id=1",
        content=orjson.dumps(events),
        auth=(SECRET, ""),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 200, r.text

    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    started = time.perf_counter()
    page.goto(base + "/ui/signin")
    first_load = time.perf_counter() - started
    assert first_load < 1.0, f"the sign-in page took {first_load:.2f} s"
    shot(page, "signin")
    sign_in(page, base)
    loaded_ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    assert 0 < loaded_ms < 1000, f"the segmentation page loaded in {loaded_ms} ms"
    print(f"first load: sign-in {first_load * 1000:.0f} ms, segmentation page {loaded_ms:.0f} ms")
    cookie = next(c for c in context.cookies() if c["name"] == "footfall_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # the session id is out of the scripts' reach

    today = datetime.now(UTC).date()
    params = {
        "event": "Viewed",
        "from_date": (today - timedelta(days=3)).isoformat(),
        "to_date": today.isoformat(),
        "unit": "day",
        "type": "general",
        "on": 'properties["country"]',
    }
    # the form, filled by keyboard and mouse like a person would
    page.get_by_label("Event", exact=True).fill(params["event"])
    page.get_by_label("Segment on (expression)").fill(params["on"])
    page.get_by_label("From").fill(params["from_date"])
    page.get_by_label("To").fill(params["to_date"])
    page.get_by_label("Type").select_option("general")
    page.get_by_role("button", name="Show").click()
    page.wait_for_selector("#chart svg circle")
    drawn = chart_values(page)
    shot(page, "segmentation")

    answer = httpx.get(base + "/api/query/segmentation", params={**params, "project_id": "1"}, auth=SA, timeout=30)
    assert answer.status_code == 200, answer.text
    api = answer.json()
    assert drawn == api["data"]["values"]
    assert api == oracle_segmentation(events, "UTC", params)
    assert sum(sum(v.values()) for v in drawn.values()) == sum(e["event"] == "Viewed" for e in events)

    # unique users of `Signed up`, by URL (a shared link): the same equality
    unique = {**params, "event": "Signed up", "type": "unique", "on": ""}
    page.goto(base + "/ui/segmentation?" + httpx.QueryParams(unique).__str__())
    page.wait_for_selector("#chart svg circle")
    answer = httpx.get(base + "/api/query/segmentation", params={**unique, "project_id": "1"}, auth=SA, timeout=30)
    assert chart_values(page) == answer.json()["data"]["values"]

    # live events: the newest first, filtered by name
    page.get_by_role("link", name="Live events").click()
    page.get_by_label("Event name").fill("Signed up")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#status")).to_contain_text('minutes named "Signed up"; updated')
    rows = page.eval_on_selector_all("#events tbody tr", "rs => rs.map(r => r.children[1].textContent)")
    times = page.eval_on_selector_all("#events tbody tr", "rs => rs.map(r => r.children[0].textContent)")
    assert times == sorted(times, reverse=True)
    assert rows == ["Signed up"] * 3
    shot(page, "live")

    # funnels: create one in the editor, its bars equal the /funnels answer (and the oracle's), delete it
    page.get_by_role("link", name="Funnels").click()
    page.get_by_label("Name").fill("Signup flow")
    page.get_by_label("Steps (one event per line)").fill("Viewed\nSigned up")
    page.get_by_label("Conversion window").fill("2")
    page.get_by_role("button", name="Save funnel").click()
    expect(page.locator("#status")).to_contain_text("Created")
    listed = httpx.get(base + "/api/app/projects/1/funnels", auth=SA, timeout=30).json()["results"]
    assert [(f["name"], [s["event"] for s in f["steps"]], f["length"]) for f in listed] == [
        ("Signup flow", ["Viewed", "Signed up"], 2)
    ]
    page.get_by_label("From").fill(params["from_date"])
    page.get_by_label("To").fill(params["to_date"])
    page.get_by_label("Segment on (expression)").fill('properties["country"]')
    page.get_by_role("button", name="Show funnel").click()
    page.wait_for_selector("#funnel-chart .funnel-segment")
    bars = page.eval_on_selector_all(
        "#funnel-chart .funnel-segment",
        "ss => ss.map(s => [s.dataset.segment, [...s.querySelectorAll('g.step')].map(g => Number(g.dataset.count))])",
    )
    shot(page, "funnels")
    funnel_params = {
        "funnel_id": str(listed[0]["funnel_id"]),
        "from_date": params["from_date"],
        "to_date": params["to_date"],
        "interval": "4",
        "on": 'properties["country"]',
    }
    answer = httpx.get(base + "/api/query/funnels", params={**funnel_params, "project_id": "1"}, auth=SA, timeout=30)
    assert answer.status_code == 200, answer.text
    api_funnel = answer.json()
    (bucket,) = api_funnel["data"].values()
    assert bars == [["All users" if k == "$overall" else k, [s["count"] for s in v]] for k, v in bucket.items()]
    expected = oracle_funnels(events, "UTC", funnel_params, listed[0])
    assert api_funnel["data"] == expected["data"]
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Signup flow").click()
    expect(page.locator("#funnel-list")).to_contain_text("No saved funnels")
    assert httpx.get(base + "/api/app/projects/1/funnels", auth=SA, timeout=30).json()["results"] == []

    # retention: the cohort table equals the /retention answer (and the oracle's)
    page.get_by_role("link", name="Retention").click()
    page.get_by_label("First event (birth)").fill("Viewed")
    page.get_by_label("Returning event").fill("Viewed")
    page.get_by_label("Periods").fill("2")
    page.get_by_label("From").fill(params["from_date"])
    page.get_by_label("To").fill(params["to_date"])
    page.get_by_role("button", name="Show retention").click()
    page.wait_for_selector("#retention-table tbody tr")
    table = page.eval_on_selector_all(
        "#retention-table tbody tr",
        "rs => rs.map(r => [r.dataset.date, Number(r.dataset.first), "
        "[...r.querySelectorAll('td[data-count]')].map(c => Number(c.dataset.count))])",
    )
    shot(page, "retention")
    retention_params = {
        "born_event": "Viewed",
        "event": "Viewed",
        "retention_type": "birth",
        "unit": "day",
        "interval_count": "2",
        "from_date": params["from_date"],
        "to_date": params["to_date"],
    }
    answer = httpx.get(
        base + "/api/query/retention", params={**retention_params, "project_id": "1"}, auth=SA, timeout=30
    )
    assert answer.status_code == 200, answer.text
    api_retention = answer.json()
    assert table == [[d, c["first"], c["counts"]] for d, c in sorted(api_retention.items())]
    assert api_retention == oracle_retention(events, "UTC", retention_params)
    assert sum(first for _, first, _ in table) == len(
        {e["properties"]["distinct_id"] for e in events if e["event"] == "Viewed"}
    )

    # insights: a saved report created in the editor, run, its lines equal /insights (and the oracle's counts)
    page.get_by_role("link", name="Insights").click()
    expect(page.locator("#report-list")).to_contain_text("No saved reports")
    page.get_by_label("Name").fill("Views and signups")
    page.get_by_label("Events (one per line, at most 20)").fill("Viewed\nSigned up")
    page.get_by_label("Last days").fill("4")
    page.get_by_role("button", name="Save report").click()
    expect(page.locator("#status")).to_contain_text('"Views and signups": 2 line(s)')
    shot(page, "insights")
    drawn = chart_values(page)
    (report,) = httpx.get(base + "/api/app/projects/1/bookmarks", auth=SA, timeout=30).json()["results"]
    answer = httpx.get(
        base + "/api/query/insights", params={"bookmark_id": report["id"], "project_id": "1"}, auth=SA, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert drawn == answer.json()["series"]
    for name, by_bucket in drawn.items():
        expected = oracle_segmentation(events, "UTC", {**params, "event": name, "on": ""})["data"]["values"][name]
        assert {key[:10]: n for key, n in by_bucket.items()} == expected, name
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Views and signups").click()
    expect(page.locator("#report-list")).to_contain_text("No saved reports")

    # profiles: 30 of them, paged by 25, searched, one opened with its activity feed
    people = Mixpanel(TOKEN, consumer=BufferedConsumer(people_url=base + "/engage", request_timeout=30))
    for n in range(30):
        people.people_set(
            f"u{n}", {"$name": f"User {n}", "$email": f"u{n}@example.com", "plan": "pro" if n % 3 else "free"}
        )
    people._consumer.flush()
    ids = sorted(f"u{n}" for n in range(30))
    page.get_by_role("link", name="Profiles").click()
    expect(page.locator("#profiles-pager")).to_contain_text("Page 1 of 2 (30 profiles)")
    listed_ids = page.eval_on_selector_all("#profiles-table tbody tr", "rs => rs.map(r => r.dataset.id)")
    answer = httpx.get(base + "/api/query/engage", params={"project_id": "1", "page_size": "25"}, auth=SA, timeout=30)
    assert listed_ids == [r["$distinct_id"] for r in answer.json()["results"]] == ids[:25]
    shot(page, "profiles")
    page.get_by_role("button", name="Next page").click()
    expect(page.locator("#profiles-pager")).to_contain_text("Page 2 of 2")
    assert page.eval_on_selector_all("#profiles-table tbody tr", "rs => rs.map(r => r.dataset.id)") == ids[25:]
    page.get_by_label("Where (expression)").fill('properties["$email"] == "u3@example.com"')
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#profiles-pager")).to_contain_text("(1 profiles)")
    page.get_by_role("button", name="u3", exact=True).click()
    expect(page.locator("#profile-detail .activity caption")).to_contain_text("event(s)")
    feed = page.eval_on_selector_all("#profile-detail .activity tbody tr", "rs => rs.map(r => r.dataset.insertId)")
    shot(page, "profile")
    stream_params = {
        "distinct_ids": '["u3"]',
        "from_date": (today - timedelta(days=29)).isoformat(),
        "to_date": today.isoformat(),
    }
    answer = httpx.get(
        base + "/api/query/stream/query", params={**stream_params, "project_id": "1"}, auth=SA, timeout=30
    )
    assert answer.status_code == 200, answer.text
    streamed = answer.json()
    assert streamed == oracle_stream(events, "UTC", stream_params)
    newest_first = sorted(streamed["results"]["events"], key=lambda e: -e["properties"]["time"])
    assert feed == [e["properties"]["$insert_id"] for e in newest_first]
    assert len(feed) == sum(e["properties"]["distinct_id"] == "u3" for e in events) > 0
    assert page.locator("#profile-detail .profile-props").inner_text().count("u3@example.com") == 1

    # cohorts: a dynamic one over the profiles and a static one, edited, counted as the API counts, deleted
    page.get_by_role("link", name="Cohorts").click()
    expect(page.locator("#cohort-list")).to_contain_text("No cohorts yet")
    page.get_by_label("Name").fill("Pro plan")
    page.get_by_label("Selector (a profile expression, or the selector tree as JSON)").fill('user["plan"] == "pro"')
    page.get_by_role("button", name="Save cohort").click()
    expect(page.locator("#status")).to_contain_text('Created "Pro plan"')
    page.get_by_label("Name").fill("Three")
    page.get_by_label("static (a list of ids)").check()
    page.get_by_label("Distinct ids (one per line)").fill("u1\nu2\nu3")
    page.get_by_role("button", name="Save cohort").click()
    expect(page.locator("#cohort-list")).to_contain_text("Three")
    page.get_by_role("button", name="Edit Three").click()
    expect(page.get_by_label("Distinct ids (one per line)")).to_have_value("u1\nu2\nu3")
    page.get_by_label("Distinct ids (one per line)").fill("u1\nu2\nu4")
    page.get_by_role("button", name="Save cohort").click()
    expect(page.locator("#status")).to_contain_text('Saved "Three"')
    shot(page, "cohorts")
    shown_counts = dict(
        page.eval_on_selector_all(
            "#cohort-list tbody tr", "rs => rs.map(r => [r.children[0].textContent, Number(r.children[1].textContent)])"
        )
    )
    saved = httpx.get(base + "/api/app/projects/1/cohorts", auth=SA, timeout=30).json()["results"]
    assert (
        shown_counts
        == {c["name"]: c["count"] for c in saved}
        == {"Pro plan": sum(n % 3 != 0 for n in range(30)), "Three": 3}
    )
    (three,) = [c for c in saved if c["name"] == "Three"]
    one = httpx.get(base + f"/api/app/projects/1/cohorts/{three['id']}", auth=SA, timeout=30).json()["results"]
    assert sorted(one["distinct_ids"]) == ["u1", "u2", "u4"]
    for name in ("Pro plan", "Three"):
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name=f"Delete {name}").click()
        expect(page.locator("#status")).to_contain_text(f'Deleted "{name}"')
    expect(page.locator("#cohort-list")).to_contain_text("No cohorts yet")
    assert httpx.get(base + "/api/app/projects/1/cohorts", auth=SA, timeout=30).json()["results"] == []

    # operators: the page's tables are this process's /metrics, read here by prometheus_client's parser
    bad = [{"event": "", "properties": {"time": now, "distinct_id": "x"}}, {"event": "No time", "properties": {}}]
    r = httpx.post(
        base + "/import?project_id=1",
        content=orjson.dumps(bad),
        auth=(SECRET, ""),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code in (200, 400), r.text
    page.get_by_role("link", name="Operators").click()
    expect(page.locator("#status")).to_contain_text("Updated")
    shot(page, "operators")
    samples = [
        s
        for family in text_string_to_metric_families(httpx.get(base + "/metrics", timeout=30).text)
        for s in family.samples
    ]

    def drawn_rows(table: str) -> list[list[str]]:
        script = "rs => rs.map(r => [...r.children].map(c => c.textContent))"
        return sorted(page.eval_on_selector_all(f"#{table} tbody tr", script))

    def expected_rows(name: str, labels: tuple[str, ...]) -> list[list[str]]:
        rows = [[*(s.labels[k] for k in labels), f"{s.value:g}"] for s in samples if s.name == name]
        return sorted(rows) or [["none in this process"]]

    assert drawn_rows("ops-ingest") == expected_rows("footfall_events_imported_total", ("path",))
    rejected = expected_rows("footfall_events_rejected_total", ("reason", "path"))
    assert drawn_rows("ops-rejected") == rejected and sum(float(r[-1]) for r in rejected) >= 2
    queried = {s.labels["endpoint"]: s.value for s in samples if s.name == "footfall_query_seconds_count" and s.value}
    shown = {row[0]: float(row[1]) for row in drawn_rows("ops-queries")}
    assert shown == queried and {"segmentation", "funnels", "retention", "engage"} <= set(shown), shown

    # CSRF: a state change without the session's token is refused, with it it passes the UI
    status = page.evaluate("fetch('/ui/api/query/segmentation', {method: 'POST'}).then(r => r.status)")
    assert status == 403

    # sign out; the old session id is dead (as after idle expiry): back to the sign-in form
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(base + "/ui/signin")
    context.add_cookies([cookie])
    page.goto(base + "/ui/segmentation")
    assert page.url.startswith(base + "/ui/signin")
    assert "session expired" in page.content()
    assert httpx.get(base + "/ui/api/query/events/names", cookies={"footfall_ui": cookie["value"]}).status_code == 401
    context.close()
