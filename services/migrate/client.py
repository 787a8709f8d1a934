"""`footfall migrate …`: run the service, or start a job on a running deployment and follow it.

    footfall migrate --port P                       the migration service alone (Kafka + warehouse)
    footfall migrate amplitude --api-key K --api-secret S --project-token T [--from D] [--to D] [--dry-run]
    footfall migrate mixpanel --api-secret S [--api-key U --project-id N] [--source-url URL] --project-token T …
    footfall migrate status ID --project-token T

Following a job draws a progress bar (rich) of its chunks with the events imported, and ends
with the job's final record; the exit status is 0 only when the job succeeded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from footfall.services.migrate.settings import MigrateSettings

__all__ = ["add_migrate_command", "run_client"]

POLL_SECONDS = 1.0


def add_migrate_command(sub: Any) -> None:
    migrate = sub.add_parser("migrate", help="the migration service: run it, or start and follow a migration job")
    migrate.add_argument("--host", default="127.0.0.1")
    migrate.add_argument("--port", type=int, default=8003, help="port of the service (default 8003)")
    migrate.add_argument("--data", type=Path, default=None, help="data folder of a chDB store")
    actions = migrate.add_subparsers(dest="action", required=False)
    for tool in ("amplitude", "mixpanel"):
        start = actions.add_parser(tool, help=f"start a migration from {tool.capitalize()} and follow it")
        if tool == "amplitude":
            start.add_argument("--api-key", required=True)
            start.add_argument("--api-secret", required=True)
        else:
            start.add_argument("--api-secret", required=True, help="service-account secret or project secret")
            start.add_argument("--api-key", default=None, help="service-account username")
            start.add_argument("--project-id", default=None, help="source project id")
            start.add_argument("--source-url", default=None, help="another Footfall deployment as the source")
        start.add_argument("--project-token", default=os.environ.get("FOOTFALL_PROJECT_TOKEN"), required=False)
        start.add_argument("--from", dest="start", default=None, help="first UTC day, YYYY-MM-DD")
        start.add_argument("--to", dest="end", default=None, help="last UTC day, YYYY-MM-DD")
        start.add_argument("--dry-run", action="store_true")
        start.add_argument("--region", default=None)
        start.add_argument("--source-region", default=None)
        start.add_argument("--url", default=None, help="the deployment (default FOOTFALL_URL)")
        start.add_argument("--no-follow", action="store_true", help="print the job and return at once")
    status = actions.add_parser("status", help="print a migration job")
    status.add_argument("job_id")
    status.add_argument("--project-token", default=os.environ.get("FOOTFALL_PROJECT_TOKEN"))
    status.add_argument("--url", default=None)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"MIXPANEL_TOKEN": args.project_token, "DRY_RUN": bool(args.dry_run)}
    if args.action == "amplitude":
        body |= {"AMPLITUDE_API_KEY": args.api_key, "AMPLITUDE_API_SECRET": args.api_secret}
    else:
        body |= {"MIXPANEL_API_SECRET": args.api_secret}
        for field, value in (
            ("MIXPANEL_API_KEY", args.api_key),
            ("MIXPANEL_PROJECT_ID", args.project_id),
            ("SOURCE_URL", args.source_url),
        ):
            if value:
                body[field] = value
    for field, value in (
        ("START_DATE", args.start),
        ("END_DATE", args.end),
        ("REGION", args.region),
        ("SOURCE_REGION", args.source_region),
    ):
        if value:
            body[field] = value
    return body


def _fail(message: str) -> int:
    print(f"footfall migrate: {message}", file=sys.stderr)
    return 1


def _answer(response: httpx.Response) -> dict[str, Any] | None:
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def run_client(args: argparse.Namespace, settings: MigrateSettings) -> int:
    url = (args.url or settings.url).rstrip("/")
    if not args.project_token:
        return _fail("--project-token (or FOOTFALL_PROJECT_TOKEN) is required: the destination project's token")
    auth = (str(args.project_token), "")
    with httpx.Client(timeout=30.0) as client:
        if args.action == "status":
            response = client.get(f"{url}/migrate/jobs/{args.job_id}", auth=auth)
            data = _answer(response)
            if response.status_code != 200 or data is None:
                return _fail(f"{response.status_code}: {(data or {}).get('error', response.text[:200])}")
            print(orjson.dumps(data["results"], option=orjson.OPT_INDENT_2).decode())
            return 0
        response = client.post(f"{url}/migrate/{args.action}", json=_body(args))
        data = _answer(response)
        if response.status_code != 202 or data is None:
            return _fail(f"{response.status_code}: {(data or {}).get('error', response.text[:200])}")
        job = data["results"]
        print(f"migration job {job['id']} ({job['state']})", file=sys.stderr)
        if args.no_follow:
            print(orjson.dumps(job, option=orjson.OPT_INDENT_2).decode())
            return 0
        job = _follow(client, url, auth, job)
    print(orjson.dumps(job, option=orjson.OPT_INDENT_2).decode())
    return 0 if job["state"] == "succeeded" else 1


def _follow(client: httpx.Client, url: str, auth: tuple[str, str], job: dict[str, Any]) -> dict[str, Any]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks  {task.fields[events]} events"),
        TimeElapsedColumn(),
    )
    console = Console(stderr=True)
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(job["source_tool"], total=None, events=0)
        while True:
            counts = job["counts"]
            events = counts["events_to_import"] if job["dry_run"] else counts["events_imported"]
            progress.update(bar, completed=counts["chunks_done"], total=counts["chunks_total"] or None, events=events)
            if job["state"] not in ("queued", "running"):
                return job
            time.sleep(POLL_SECONDS)
            try:
                response = client.get(f"{url}/migrate/jobs/{job['id']}", auth=auth)
            except httpx.HTTPError:
                continue  # the deployment restarts: the job resumes there, keep following
            data = _answer(response)
            if response.status_code == 200 and data is not None:
                job = data["results"]
