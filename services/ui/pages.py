"""The UI's HTML: a sign-in form, and one shell per page that loads the page's script.

Pages are rendered here with the session's CSRF token in a `<meta>`; the browser's script
(`static/ui.js`) draws each page from the answers of the HTTP interface (`forward.py`).
"""

from __future__ import annotations

from html import escape

from starlette.responses import HTMLResponse

from footfall.services.ui.sessions import Session

# (path under /ui, title): the pages in the navigation, in order.
PAGES: tuple[tuple[str, str], ...] = (
    ("segmentation", "Segmentation"),
    ("live", "Live events"),
    ("funnels", "Funnels"),
    ("retention", "Retention"),
    ("insights", "Insights"),
    ("profiles", "Profiles"),
    ("cohorts", "Cohorts"),
    ("operators", "Operators"),
)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _document(title: str, body: str, *, csrf: str = "", page: str = "", project: str = "") -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{escape(csrf)}">
<title>{escape(title)} · Footfall</title>
<link rel="stylesheet" href="/ui/static/ui.css">
<script src="/ui/static/ui.js" defer></script>
</head>
<body data-page="{escape(page)}" data-project="{escape(project)}">
<a class="skip" href="#main">Skip to content</a>
{body}
</body>
</html>
"""


def html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def signin_page(login_token: str, message: str = "") -> str:
    alert = f'<p class="error" role="alert">{escape(message)}</p>' if message else ""
    body = f"""<main id="main" class="signin">
<h1>Sign in to Footfall</h1>
{alert}
<form method="post" action="/ui/signin">
<input type="hidden" name="csrf" value="{escape(login_token)}">
<fieldset>
<legend>Sign in with</legend>
<label><input type="radio" name="mode" value="service_account" checked> a service account</label>
<label><input type="radio" name="mode" value="secret"> the project secret</label>
</fieldset>
<p><label for="username">Service account username</label>
<input id="username" name="username" autocomplete="username"></p>
<p><label for="secret">Secret</label>
<input id="secret" name="secret" type="password" autocomplete="current-password" required></p>
<p><label for="project_id">Project id</label>
<input id="project_id" name="project_id" inputmode="numeric" pattern="[0-9]*"></p>
<p><button type="submit">Sign in</button></p>
</form>
</main>"""
    return _document("Sign in", body)


def _nav(current: str, session: Session) -> str:
    current_mark = ' aria-current="page"'
    links = "".join(
        f'<li><a href="/ui/{path}"{current_mark if path == current else ""}>{escape(title)}</a></li>'
        for path, title in PAGES
    )
    return f"""<header>
<span class="brand">Footfall</span>
<nav aria-label="Pages"><ul>{links}</ul></nav>
<span class="who">{escape(session.who)} · project {session.project_id}</span>
<form method="post" action="/ui/signout"><input type="hidden" name="csrf" value="{escape(session.csrf)}">
<button type="submit">Sign out</button></form>
</header>"""


SEGMENTATION = """<h1>Segmentation</h1>
<form id="segmentation-form" class="query">
<p><label for="event">Event</label> <input id="event" name="event" list="event-names" required autocomplete="off">
<datalist id="event-names"></datalist></p>
<p><label for="on">Segment on (expression)</label> <input id="on" name="on" placeholder='properties["country"]'></p>
<p><label for="where">Where (expression)</label> <input id="where" name="where"
 placeholder='properties["plan"] == "pro"'></p>
<p><label for="type">Type</label> <select id="type" name="type"><option value="general">Total events</option>
<option value="unique">Unique users</option><option value="average">Average per user</option></select></p>
<p><label for="unit">Unit</label> <select id="unit" name="unit"><option>minute</option><option>hour</option>
<option selected>day</option><option>week</option><option>month</option></select></p>
<p><label for="from_date">From</label> <input id="from_date" name="from_date" type="date" required></p>
<p><label for="to_date">To</label> <input id="to_date" name="to_date" type="date" required></p>
<p><button type="submit">Show</button></p>
</form>
<p id="status" role="status" aria-live="polite"></p>
<figure id="chart" aria-label="Line chart of the segmentation"></figure>
<table id="values"><caption>Values by segment and date</caption><thead></thead><tbody></tbody></table>"""

LIVE = """<h1>Live events</h1>
<form id="live-form" class="query">
<p><label for="live-event">Event name</label> <input id="live-event" name="event" placeholder="any event"></p>
<p><label for="live-where">Where (expression)</label> <input id="live-where" name="where"></p>
<p><label><input type="checkbox" id="live-auto" checked> Refresh every minute</label></p>
<p><button type="submit">Show</button></p>
</form>
<p id="status" role="status" aria-live="polite"></p>
<table id="events"><caption>Events of the last 10 minutes, newest first</caption>
<thead><tr><th scope="col">Time (UTC)</th><th scope="col">Event</th><th scope="col">Distinct id</th>
<th scope="col">Properties</th></tr></thead><tbody></tbody></table>"""

FUNNELS = """<h1>Funnels</h1>
<p id="status" role="status" aria-live="polite"></p>
<div class="columns">
<section aria-labelledby="saved-title">
<h2 id="saved-title">Saved funnels</h2>
<ul id="funnel-list"></ul>
<form id="funnel-editor">
<h3>Create or edit a funnel</h3>
<input type="hidden" name="funnel_id">
<p><label for="funnel-name">Name</label> <input id="funnel-name" name="name" required></p>
<p><label for="funnel-steps">Steps (one event per line)</label>
<textarea id="funnel-steps" name="steps" rows="4" required></textarea></p>
<p><label for="funnel-length">Conversion window</label> <input id="funnel-length" name="length" type="number"
 min="1" value="14" required> <label for="funnel-unit" class="inline">unit</label>
<select id="funnel-unit" name="length_unit"><option>second</option><option>minute</option><option>hour</option>
<option selected>day</option><option>week</option><option>month</option></select></p>
<p><button type="submit">Save funnel</button> <button type="button" id="funnel-new">New</button></p>
</form>
</section>
<section aria-labelledby="report-title">
<h2 id="report-title">Conversion</h2>
<form id="funnel-query" class="query">
<p><label for="funnel-pick">Funnel</label> <select id="funnel-pick" name="funnel_id" required></select></p>
<p><label for="funnel-on">Segment on (expression)</label> <input id="funnel-on" name="on"></p>
<p><label for="funnel-from">From</label> <input id="funnel-from" name="from_date" type="date" required></p>
<p><label for="funnel-to">To</label> <input id="funnel-to" name="to_date" type="date" required></p>
<p><button type="submit">Show funnel</button></p>
</form>
<figure id="funnel-chart" aria-label="Bar chart of the funnel's steps"></figure>
</section>
</div>"""

RETENTION = """<h1>Retention</h1>
<form id="retention-form" class="query">
<p><label for="born_event">First event (birth)</label> <input id="born_event" name="born_event"
 list="retention-names" autocomplete="off"><datalist id="retention-names"></datalist></p>
<p><label for="ret-event">Returning event</label> <input id="ret-event" name="event" list="retention-names"
 autocomplete="off" placeholder="any event"></p>
<p><label for="retention_type">Cohorts</label> <select id="retention_type" name="retention_type">
<option value="birth">Birth (their first time)</option>
<option value="compounded">Compounded (every period)</option></select></p>
<p><label for="ret-unit">Unit</label> <select id="ret-unit" name="unit"><option selected>day</option>
<option>week</option><option>month</option></select></p>
<p><label for="interval_count">Periods</label> <input id="interval_count" name="interval_count" type="number"
 min="0" max="100" value="7" required></p>
<p><label for="ret-where">Where (expression)</label> <input id="ret-where" name="where"></p>
<p><label for="ret-from">From</label> <input id="ret-from" name="from_date" type="date" required></p>
<p><label for="ret-to">To</label> <input id="ret-to" name="to_date" type="date" required></p>
<p><button type="submit">Show retention</button></p>
</form>
<p id="status" role="status" aria-live="polite"></p>
<table id="retention-table"><caption>Users of each cohort who came back, per period</caption>
<thead></thead><tbody></tbody></table>"""

PROFILES = """<h1>Profiles</h1>
<form id="profiles-form" class="query">
<p><label for="prof-where">Where (expression)</label> <input id="prof-where" name="where"
 placeholder='properties["$email"] == "a@example.com"'></p>
<p><label for="prof-id">Distinct id</label> <input id="prof-id" name="distinct_id"></p>
<p><button type="submit">Search</button></p>
</form>
<p id="status" role="status" aria-live="polite"></p>
<table id="profiles-table"><caption>User profiles, by distinct id</caption>
<thead><tr><th scope="col">Distinct id</th><th scope="col">Name</th><th scope="col">Email</th>
<th scope="col">Properties</th></tr></thead><tbody></tbody></table>
<nav id="profiles-pager" aria-label="Profile pages"><button type="button" class="prev">Previous page</button>
<span class="where"></span> <button type="button" class="next">Next page</button></nav>
<section id="profile-detail" hidden>
<h2 tabindex="-1"></h2>
<table class="profile-props"><caption>Properties</caption><tbody></tbody></table>
<p><label for="activity-days">Activity of the last (days)</label>
<input id="activity-days" type="number" min="1" max="365" value="30"></p>
<table class="activity"><caption>Activity</caption>
<thead><tr><th scope="col">Time (UTC)</th><th scope="col">Event</th><th scope="col">Properties</th></tr></thead>
<tbody></tbody></table>
</section>"""

OPERATORS = """<h1>Operators</h1>
<p>The metrics of this process (its <code>/metrics</code>), every 10 seconds. In the distributed
shape each gateway, worker and query process has its own: collect them with Prometheus.</p>
<p id="status" role="status" aria-live="polite"></p>
<h2>Ingest</h2><p id="ops-rate"></p>
<table id="ops-ingest"><caption>Events accepted</caption><thead></thead><tbody></tbody></table>
<table id="ops-rejected"><caption>Events rejected, by reason</caption><thead></thead><tbody></tbody></table>
<h2>Pipeline</h2>
<table id="ops-lag"><caption>Consumer lag</caption><thead></thead><tbody></tbody></table>
<p id="ops-redis"></p>
<table id="ops-dedup"><caption>Deduplication</caption><thead></thead><tbody></tbody></table>
<h2>Queries</h2>
<table id="ops-queries"><caption>Query latency by endpoint (p50 and p95 estimated from the histogram's
buckets)</caption><thead></thead><tbody></tbody></table>"""

COHORTS = """<h1>Cohorts</h1>
<p id="status" role="status" aria-live="polite"></p>
<table id="cohort-list"><caption>Cohorts of the project, with their members now</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Members</th><th scope="col">Kind</th>
<th scope="col">Description</th><th scope="col">Actions</th></tr></thead><tbody></tbody></table>
<form id="cohort-editor">
<h3>New cohort</h3>
<p><label for="cohort-name">Name</label> <input id="cohort-name" name="name" required></p>
<p><label for="cohort-description">Description</label> <input id="cohort-description" name="description"></p>
<fieldset><legend>Kind</legend>
<label><input type="radio" name="kind" value="dynamic" checked> dynamic (a selector)</label>
<label><input type="radio" name="kind" value="static"> static (a list of ids)</label></fieldset>
<div class="dynamic">
<p><label for="cohort-selector">Selector (a profile expression, or the selector tree as JSON)</label>
<textarea id="cohort-selector" name="selector" rows="3" placeholder='user["plan"] == "pro"'></textarea></p>
<p><label for="cohort-behaviors">Behaviours (JSON, optional)</label>
<textarea id="cohort-behaviors" name="behaviors" rows="4"></textarea></p>
</div>
<div class="static" hidden>
<p><label for="cohort-ids">Distinct ids (one per line)</label>
<textarea id="cohort-ids" name="distinct_ids" rows="5"></textarea></p>
</div>
<p><button type="submit">Save cohort</button> <button type="button" id="cohort-new">New</button></p>
</form>"""

INSIGHTS = """<h1>Insights</h1>
<p id="status" role="status" aria-live="polite"></p>
<div class="columns">
<section aria-labelledby="reports-title">
<h2 id="reports-title">Saved reports</h2>
<ul id="report-list"></ul>
<form id="report-editor">
<h3>New report</h3>
<p><label for="report-name">Name</label> <input id="report-name" name="name" required></p>
<p><label for="report-events">Events (one per line, at most 20)</label>
<textarea id="report-events" name="events" rows="3" required></textarea></p>
<p><label for="report-unit">Unit</label> <select id="report-unit" name="unit"><option>hour</option>
<option selected>day</option><option>week</option><option>month</option></select></p>
<p><label for="report-type">Count</label> <select id="report-type" name="type_of_count">
<option value="general">Total events</option><option value="unique">Unique users</option>
<option value="average">Average per user</option></select></p>
<p><label for="report-where">Where (expression)</label> <input id="report-where" name="where"></p>
<p><label for="report-on">Segment on (expression)</label> <input id="report-on" name="on"></p>
<p><label for="report-days">Last days</label> <input id="report-days" name="last_days" type="number" min="1"
 max="3650" value="30" required></p>
<p><button type="submit">Save report</button> <button type="button" id="report-new">New</button></p>
</form>
</section>
<section aria-labelledby="report-title">
<h2 id="report-title">Report</h2>
<figure id="chart" aria-label="Line chart of the report"></figure>
<table id="values"><caption>Values by line and date</caption><thead></thead><tbody></tbody></table>
</section>
</div>"""

BODIES = {
    "segmentation": SEGMENTATION,
    "live": LIVE,
    "funnels": FUNNELS,
    "retention": RETENTION,
    "insights": INSIGHTS,
    "profiles": PROFILES,
    "cohorts": COHORTS,
    "operators": OPERATORS,
}


def app_page(page: str, session: Session) -> str:
    title = dict(PAGES)[page]
    body = f'{_nav(page, session)}\n<main id="main">\n{BODIES[page]}\n</main>'
    return _document(title, body, csrf=session.csrf, page=page, project=str(session.project_id))


def error_page(status: int, message: str) -> str:
    body = f"""<main id="main"><h1>Error {status}</h1><p role="alert">{escape(message)}</p>
<p><a href="/ui/signin">Sign in</a></p></main>"""
    return _document(f"Error {status}", body)
