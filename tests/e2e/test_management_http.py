"""The management API and the CLI over HTTP against a running `footfall serve` (issue 12):
nothing has to be stopped, revocation and rotation hold at once, and the direct-store CLI
says in one line that the store is locked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.app.settings import ManagementSettings
from footfall.services.cli import COMMANDS, build_parser
from tests.e2e.conftest import CREDS, REPO, ServeProcess, free_port

pytestmark = pytest.mark.e2e

OWNER = f"{CREDS['FOOTFALL_BOOTSTRAP_SA_USERNAME']}:{CREDS['FOOTFALL_BOOTSTRAP_SA_SECRET']}"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


class Cli:
    """`footfall --url … --user … …` run in this process (the server is a real subprocess)."""

    def __init__(self, server: ServeProcess, capsys: pytest.CaptureFixture[str]) -> None:
        self.server = server
        self.capsys = capsys

    def run(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        # The command itself, without `main`'s logging set-up (which would keep capsys's stream).
        parsed = build_parser().parse_args(["--url", self.server.base, "--user", OWNER, *args])
        code = COMMANDS[parsed.command].run(parsed, ManagementSettings.from_env({}))
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self.run("--json", *args)
        assert code == 0, err
        return orjson.loads(out)


def test_cli_over_http_while_serving_and_revocation_at_once(
    serve_process: ServeProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve_process
    cli_ = Cli(server, capsys)
    # direct-store mode refuses in one line while serve holds the store
    locked = cli("projects", "list", "--data", str(server.data_dir))
    assert locked.returncode == 1
    assert len(locked.stderr.strip().splitlines()) == 1 and "locked" in locked.stderr and "--url" in locked.stderr

    web = cli_.json("projects", "create", "--name", "Web", "--timezone", "Europe/Berlin")["results"]
    assert web["id"] == 2 and web["region"] == "us" and web["token"] and web["secret"]
    code, _, err = cli_.run("projects", "create", "--name", "web")
    assert code == 1 and "already exists" in err
    code, table, _ = cli_.run("projects", "list")
    assert code == 0 and table.splitlines()[0].split() == ["id", "name", "timezone", "region", "role"]
    assert any(line.split()[:2] == ["2", "Web"] for line in table.splitlines())
    assert cli_.json("projects", "rename", "2", "--name", "Webshop")["results"]["name"] == "Webshop"
    # Retention (issue 16): set, shown, back to keeping everything.
    set_30 = cli_.json("projects", "retention", "2", "--days", "30")["results"]
    assert (set_30["project_id"], set_30["days"], set_30["applying"]["mutations"]) == (2, 30, 0)  # waited
    assert cli_.run("projects", "retention", "2")[1].strip() == "project 2 keeps 30 days of events"
    assert cli_.json("projects", "retention", "2", "--days", "0")["results"]["days"] == 0

    bot = cli_.json("service-accounts", "create", "--username", "bot", "--project", "2", "--role", "analyst")["results"]
    listed = cli_.json("service-accounts", "list", "--project", "2")["results"]
    assert [(a["username"], a["role"]) for a in listed] == [("e2e-sa", "owner"), ("bot", "analyst")]
    assert cli_.json("service-accounts", "add-to-project", str(bot["id"]), "--project", "1", "--role", "consumer")
    query = {"project_id": "2", "from_date": "2024-01-01", "to_date": "2024-01-02", "event": '["E"]'}
    seg = server.base + "/api/query/segmentation"
    assert httpx.get(seg, params=query, auth=("bot", bot["token"]), timeout=30).status_code == 200

    # delete: refused on the very next request
    assert cli_.json("service-accounts", "delete", str(bot["id"])) == {"status": "ok"}
    assert httpx.get(seg, params=query, auth=("bot", bot["token"]), timeout=30).status_code == 401
    code, _, err = cli_.run("service-accounts", "delete", str(bot["id"]))
    assert code == 1 and "HTTP 404" in err

    # rotation: the old secret and token stop at once, the new ones work
    secret = cli_.json("projects", "rotate-secret", "2")["results"]["secret"]
    assert httpx.get(seg, params=query, auth=(web["secret"], ""), timeout=30).status_code == 401
    assert httpx.get(seg, params=query, auth=(secret, ""), timeout=30).status_code == 200
    token = cli_.json("projects", "rotate-token", "2")["results"]["token"]
    event = {
        "event": "E",
        "properties": {"time": int(time.time()) - 60, "distinct_id": "u", "$insert_id": uuid.uuid4().hex},
    }
    body = orjson.dumps([event])
    headers = {"Content-Type": "application/json"}
    r = httpx.post(server.base + "/import", content=body, headers=headers, auth=(web["token"], ""), timeout=30)
    assert r.status_code == 401
    r = httpx.post(server.base + "/import", content=body, headers=headers, auth=(token, ""), timeout=30)
    assert r.status_code == 200, r.text


def test_region_is_declared_and_foreign_projects_are_refused(tmp_path: Path) -> None:
    urls = '{"us": "https://us.footfall.example", "eu": "https://eu.footfall.example"}'
    eu = ServeProcess(tmp_path / "data", env={"FOOTFALL_REGION": "eu", "FOOTFALL_REGION_URLS": urls})
    eu.start()  # project 1 is created in region eu
    eu.stop()
    us = ServeProcess(tmp_path / "data", env={"FOOTFALL_REGION": "us", "FOOTFALL_REGION_URLS": urls})
    us.start()  # the eu metadata restored into a us deployment
    try:
        r = httpx.post(
            us.base + "/import",
            content=b"[]",
            headers={"Content-Type": "application/json"},
            auth=(CREDS["FOOTFALL_BOOTSTRAP_TOKEN"], ""),
            timeout=30,
        )
        assert r.status_code == 403 and "https://eu.footfall.example" in r.json()["error"], r.text
        event = {"event": "E", "properties": {"token": CREDS["FOOTFALL_BOOTSTRAP_TOKEN"], "distinct_id": "u"}}
        t = httpx.post(
            us.base + "/track", content=orjson.dumps([event]), headers={"Content-Type": "application/json"}, timeout=30
        )
        assert t.status_code == 403, t.text
        q = httpx.get(
            us.base + "/api/query/segmentation",
            params={"from_date": "2024-01-01", "to_date": "2024-01-02", "event": '["E"]'},
            auth=(CREDS["FOOTFALL_BOOTSTRAP_SECRET"], ""),
            timeout=30,
        )
        assert q.status_code == 403 and "region eu" in q.json()["error"], q.text
        a = httpx.get(us.base + "/api/app/projects/1", auth=tuple(OWNER.split(":")), timeout=30)  # type: ignore[arg-type]
        assert a.status_code == 403 and a.json()["status"] == "error" and "eu" in a.json()["error"]
        assert httpx.get(us.base + "/api/query/segmentation", auth=("unknown", ""), timeout=30).status_code == 401
    finally:
        us.stop()


def test_footfall_query_applies_its_own_revocations_at_once(tmp_path: Path) -> None:
    """`footfall query` (the management interface of the distributed shape) on the store."""
    data = tmp_path / "data"
    bootstrap = ServeProcess(data)
    bootstrap.start()
    bootstrap.stop()
    port = free_port()
    env = {**os.environ, "FOOTFALL_LOG_FORMAT": "json"}
    env.pop("FOOTFALL_KAFKA_BOOTSTRAP", None)
    log = open(tmp_path / "query.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "footfall.services.cli", "query", "--port", str(port), "--data", str(data)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        owner = tuple(OWNER.split(":"))
        made = httpx.post(
            base + "/api/app/organizations/1/service-accounts",
            json={"username": "reader", "projects": [{"id": 1, "role": "consumer"}]},
            auth=owner,  # type: ignore[arg-type]
            timeout=30,
        )
        assert made.status_code == 201, made.text
        reader = ("reader", made.json()["results"]["token"])
        query = {"project_id": "1", "from_date": "2024-01-01", "to_date": "2024-01-02", "event": '["E"]'}
        seg = base + "/api/query/segmentation"
        assert httpx.get(seg, params=query, auth=reader, timeout=30).status_code == 200
        gone = httpx.delete(
            f"{base}/api/app/organizations/1/service-accounts/{made.json()['results']['id']}", auth=owner, timeout=30
        )  # type: ignore[arg-type]
        assert gone.status_code == 200
        assert httpx.get(seg, params=query, auth=reader, timeout=30).status_code == 401
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
