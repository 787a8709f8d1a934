"""`footfall cohorts …`: cohorts from the command line, through the running server's HTTP API.

    footfall cohorts list   --project 1 [--ids 1,2,3]
    footfall cohorts show   ID --project 1
    footfall cohorts create --project 1 --json '{"name": "Buyers", "selector": ..., "behaviors": ...}'
    footfall cohorts create --project 1 --file cohort.json          (or the body on stdin, or --file -)
    footfall cohorts update ID --project 1 --json '{"add_distinct_ids": ["u9"]}'     (PATCH members)
    footfall cohorts delete ID --project 1

Unlike `footfall funnels`, these commands do not open the store: they call the management
interface of a running `footfall serve` (or `footfall query`), so they work while the server
holds the embedded chDB folder. Options: `--url` (default `FOOTFALL_URL`, else
http://127.0.0.1:8000), `--username` / `--secret` (default `FOOTFALL_SA_USERNAME` /
`FOOTFALL_SA_SECRET`: a service account that is a member of the project). The server's JSON
answer is printed; a refused request (4xx) prints the server's error message and exits 1, and
so does an unreachable or failing server.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from footfall.services.app.settings import ClientSettings

__all__ = ["add_cohort_commands", "cmd_cohorts"]

ACTIONS = ("list", "show", "create", "update", "delete")
TIMEOUT_SECONDS = 60.0


class _Usage(Exception):
    pass


def _body(args: argparse.Namespace) -> bytes:
    """The request body: `--json`, else `--file` (`-` = stdin), else stdin when it is not a terminal."""
    if args.json is not None and args.file is not None:
        raise _Usage("give the body with --json or with --file, not both")
    if args.json is not None:
        raw = str(args.json)
    elif args.file is not None and args.file != "-":
        try:
            raw = Path(args.file).read_text()
        except OSError as exc:
            raise _Usage(f"cannot read {args.file}: {exc}") from None
    elif args.file == "-" or not sys.stdin.isatty():
        raw = sys.stdin.read()
    else:
        raise _Usage(f"{args.action} needs a JSON body: --json '<definition>', --file PATH, or on stdin")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _Usage(f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _Usage("the body must be a JSON object")
    return orjson.dumps(value)


def _request(args: argparse.Namespace) -> tuple[str, str, bytes | None, dict[str, str]]:
    """(method, path, body, query) of the action."""
    base = f"/api/app/projects/{args.project}/cohorts"
    if args.action in ("show", "update", "delete") and args.id is None:
        raise _Usage(f"{args.action} needs the cohort id")
    if args.action != "list" and args.ids is not None:
        raise _Usage("--ids belongs to list")
    if args.action == "list":
        return "GET", base, None, ({"ids": args.ids} if args.ids is not None else {})
    if args.action == "create":
        return "POST", base, _body(args), {}
    one = f"{base}/{args.id}"
    if args.action == "show":
        return "GET", one, None, {}
    if args.action == "update":
        return "PATCH", one, _body(args), {}
    return "DELETE", one, None, {}


def _error_text(response: Any) -> str:
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        return str(answer["error"])
    return str(response.text.strip()[:500] or response.reason_phrase)


def cmd_cohorts(args: argparse.Namespace, settings: ClientSettings) -> int:
    import httpx

    url = (args.url or settings.url).rstrip("/")
    username = args.username if args.username is not None else settings.username
    secret = args.secret if args.secret is not None else settings.secret
    try:
        if not username or not secret:
            raise _Usage(
                "service-account credentials are needed: --username and --secret"
                " (or FOOTFALL_SA_USERNAME and FOOTFALL_SA_SECRET)"
            )
        method, path, body, query = _request(args)
    except _Usage as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 2
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        response = httpx.request(
            method,
            url + path,
            params=query,
            content=body,
            headers=headers,
            auth=(username, secret),
            timeout=TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        print(f"footfall: cannot reach {url}: {exc}", file=sys.stderr)
        return 1
    if response.status_code >= 400:
        print(f"footfall: {_error_text(response)} (HTTP {response.status_code})", file=sys.stderr)
        return 1
    try:
        answer = response.json()
    except ValueError:
        print(f"footfall: {url} did not answer with JSON (HTTP {response.status_code})", file=sys.stderr)
        return 1
    sys.stdout.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def add_cohort_commands(sub: Any) -> None:
    """Register the `cohorts` subcommand on the CLI's subparsers."""
    cohorts = sub.add_parser("cohorts", help="manage cohorts through a running server's HTTP API")
    cohorts.add_argument("action", choices=ACTIONS)
    cohorts.add_argument("id", type=int, nargs="?", help="cohort id (show, update, delete)")
    cohorts.add_argument("--project", type=int, required=True, help="project id")
    cohorts.add_argument("--url", default=None, help="the server (default FOOTFALL_URL or http://127.0.0.1:8000)")
    cohorts.add_argument("--username", default=None, help="service account (default FOOTFALL_SA_USERNAME)")
    cohorts.add_argument("--secret", default=None, help="its secret (default FOOTFALL_SA_SECRET)")
    cohorts.add_argument("--json", default=None, help="the body (create: a definition; update: PATCH members)")
    cohorts.add_argument("--file", default=None, help="read the body from a file (- for stdin)")
    cohorts.add_argument("--ids", default=None, help="list: only these ids (comma-separated)")
