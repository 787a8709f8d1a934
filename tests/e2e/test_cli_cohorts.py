"""`footfall cohorts …` against a running `footfall serve`: the CLI goes through the server's HTTP
API, so it works while the server holds the embedded chDB folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import CREDS, REPO, ServeProcess, free_port

pytestmark = pytest.mark.e2e

DEFINITION = {
    "name": "Buyers",
    "selector": 'behaviors["buys"] >= 1 and user["plan"] == "pro"',
    "behaviors": [{"name": "buys", "window": "30d", "event_selectors": [{"event": "Purchase"}]}],
}


def cohorts(
    server: ServeProcess | None, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")}
    if server is not None:
        base |= {
            "FOOTFALL_URL": server.base,
            "FOOTFALL_SA_USERNAME": CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"],
            "FOOTFALL_SA_SECRET": CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"],
        }
    return subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", "cohorts", *args],
        cwd=REPO,
        env=base | (env or {}),
        capture_output=True,
        text=True,
        input=stdin if stdin is not None else "",
        timeout=120,
    )


def ok(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


@pytest.mark.slow
def test_cohort_commands_through_the_running_server(serve_process: ServeProcess, tmp_path: Path) -> None:
    server = serve_process
    created = ok(cohorts(server, "create", "--project", "1", "--json", json.dumps(DEFINITION)))
    assert created["status"] == "ok"
    record = created["results"]
    cid = record["id"]
    assert record["is_static"] is False and record["project_id"] == 1 and record["count"] == 0
    assert record["behaviors"]["buys"]["window"] == {"unit": "day", "value": 30}

    static_file = tmp_path / "static.json"
    static_file.write_text(json.dumps({"name": "Imported", "distinct_ids": ["u2", "u1"]}))
    static = ok(cohorts(server, "create", "--project", "1", "--file", str(static_file)))["results"]
    assert static["distinct_ids"] == ["u1", "u2"]

    listed = ok(cohorts(server, "list", "--project", "1"))["results"]
    assert [c["id"] for c in listed] == [cid, static["id"]] and "distinct_ids" not in listed[1]
    only = ok(cohorts(server, "list", "--project", "1", "--ids", str(static["id"])))["results"]
    assert [c["id"] for c in only] == [static["id"]]

    # the body on stdin; explicit options win over the environment
    patched = cohorts(
        None,
        "update",
        str(static["id"]),
        "--project",
        "1",
        "--url",
        server.base,
        "--username",
        CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"],
        "--secret",
        CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"],
        stdin='{"add_distinct_ids": ["u3"], "remove_distinct_ids": ["u1"]}',
    )
    assert ok(patched)["results"]["distinct_ids"] == ["u2", "u3"]
    assert ok(cohorts(server, "show", str(static["id"]), "--project", "1"))["results"]["distinct_ids"] == ["u2", "u3"]

    # refusals: the server's message, exit code 1
    bad = cohorts(server, "update", str(cid), "--project", "1", "--json", '{"selector": "user[\\"plan\\"] =="}')
    assert bad.returncode == 1 and "selector: syntax error at position" in bad.stderr and "HTTP 400" in bad.stderr
    missing = cohorts(server, "show", "999999", "--project", "1")
    assert missing.returncode == 1 and "not found" in missing.stderr and "HTTP 404" in missing.stderr
    wrong = cohorts(server, "list", "--project", "1", env={"FOOTFALL_SA_SECRET": "wrong"})
    assert wrong.returncode == 1 and "HTTP 401" in wrong.stderr
    other = cohorts(server, "list", "--project", "2")
    assert other.returncode == 1 and "HTTP 403" in other.stderr

    # a referenced cohort cannot be deleted; the referrer first, then it
    ref = {
        "name": "Ref",
        "selector": {"operator": "and", "children": [{"property": "cohort", "value": cid, "operator": "in"}]},
    }
    referrer = ok(cohorts(server, "create", "--project", "1", "--json", json.dumps(ref)))["results"]["id"]
    refused = cohorts(server, "delete", str(cid), "--project", "1")
    assert refused.returncode == 1 and f"referenced by cohort(s) {referrer} (Ref)" in refused.stderr
    assert ok(cohorts(server, "delete", str(referrer), "--project", "1")) == {"status": "ok"}
    assert ok(cohorts(server, "delete", str(cid), "--project", "1")) == {"status": "ok"}
    assert [c["id"] for c in ok(cohorts(server, "list", "--project", "1"))["results"]] == [static["id"]]

    # the cohorts survive a restart of the server (stored in the chDB folder)
    server.restart()
    assert [c["id"] for c in ok(cohorts(server, "list", "--project", "1"))["results"]] == [static["id"]]
    later = ok(cohorts(server, "create", "--project", "1", "--json", json.dumps(DEFINITION)))["results"]
    assert later["id"] > referrer  # ids are never reused


def test_usage_errors_and_an_unreachable_server() -> None:
    creds = ["--username", "u", "--secret", "s"]
    no_creds = cohorts(None, "list", "--project", "1")
    assert no_creds.returncode == 2 and "FOOTFALL_SA_USERNAME" in no_creds.stderr
    no_body = cohorts(None, "create", "--project", "1", *creds, stdin="")
    assert no_body.returncode == 2 and "JSON" in no_body.stderr
    no_id = cohorts(None, "show", "--project", "1", *creds)
    assert no_id.returncode == 2 and "needs the cohort id" in no_id.stderr
    down = cohorts(None, "list", "--project", "1", *creds, "--url", f"http://127.0.0.1:{free_port()}")
    assert down.returncode == 1 and "cannot reach" in down.stderr
