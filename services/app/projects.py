"""`footfall projects …` and `footfall service-accounts …`: projects and credentials from the CLI.

Over HTTP, against a running server (`footfall --url URL --user USERNAME:SECRET …`, or
`FOOTFALL_URL` / `FOOTFALL_USER`; see `management_client.py`):

    footfall --url … --user … projects list | show ID | create --name N [--timezone Z]
    footfall --url … --user … projects rename ID --name N | rotate-secret ID | rotate-token ID
    footfall --url … --user … service-accounts list [--project ID]
    footfall --url … --user … service-accounts create --username U [--project ID] [--role R] [--expires ISO]
    footfall --url … --user … service-accounts delete SA | add-to-project SA --project ID --role R
    footfall --url … --user … service-accounts remove-from-project SA --project ID

Directly on the store (first bootstrap and recovery: no server may hold an embedded store):

    footfall projects list | create --name "Web" [--timezone Europe/Berlin]
    footfall service-accounts create --project 2 [--role admin] [--username NAME]

New secrets and tokens are printed once and stored only as hashes. When `footfall serve` holds
the embedded store, the direct commands say so in one line and name the HTTP form.
"""

from __future__ import annotations

import argparse
import fcntl
import sys
from pathlib import Path
from typing import Any

import orjson

from footfall.services.app.settings import ManagementSettings
from footfall.shared import credentials
from footfall.shared.credentials import Role
from footfall.shared.metadata import MetadataError, MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import WarehouseError, open_warehouse
from footfall.shared.warehouse.dsn import DsnError, parse_dsn

__all__ = ["add_project_commands", "cmd_projects", "cmd_service_accounts"]


def _print(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


DIRECT_ACTIONS = {"projects": ("list", "create"), "service-accounts": ("create",)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def store_locked(dsn: str) -> bool:
    """Does another process hold the embedded chDB store? (ClickHouse keeps an exclusive
    `flock` on `<folder>/status` while it runs.) Asked before opening, so that chDB's own
    multi-line refusal never reaches the terminal."""
    try:
        parsed = parse_dsn(dsn)
    except DsnError:
        return False
    status = Path(parsed.path) / "status"
    if not parsed.embedded or not status.exists():
        return False
    with open(status, "rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def _with_repo(settings: ManagementSettings, action: Any, command: str = "projects") -> int:
    if not settings.store.warehouse_dsn:
        settings.store.make_data_dir()
    if store_locked(settings.store.dsn):
        print(
            f"footfall: the store {settings.store.dsn} is locked by a running server; manage it over HTTP:"
            f" footfall --url URL --user USERNAME:SECRET {command} …",
            file=sys.stderr,
        )
        return 1
    try:
        warehouse = open_warehouse(settings.store.dsn)
    except Exception as exc:  # an unreachable server, a store locked meanwhile
        print(f"footfall: cannot open the warehouse {settings.store.dsn}: {_first_line(exc)}", file=sys.stderr)
        return 1
    try:
        apply_migrations(warehouse)
        return int(action(MetadataRepository(warehouse)))
    except (MetadataError, WarehouseError) as exc:
        print(f"footfall: {_first_line(exc)}", file=sys.stderr)
        return 1
    finally:
        warehouse.close()


def _http_or_direct(args: argparse.Namespace, settings: ManagementSettings) -> int | None:
    """Run the command over HTTP when a user is given (`--user` or `FOOTFALL_USER`); None: direct."""
    user = getattr(args, "global_user", None) or settings.user
    url = getattr(args, "global_url", None)
    if user:
        from footfall.services.app.management_client import run_http

        return run_http(args, url or settings.url, user, as_json=bool(getattr(args, "global_json", False)))
    if url:
        print("footfall: --url needs --user USERNAME:SECRET (or FOOTFALL_USER)", file=sys.stderr)
        return 2
    if args.action not in DIRECT_ACTIONS[args.command]:
        print(
            f"footfall: {args.command} {args.action} runs over HTTP: footfall --url URL --user USERNAME:SECRET"
            f" {args.command} {args.action} …",
            file=sys.stderr,
        )
        return 2
    return None


def cmd_projects(args: argparse.Namespace, settings: ManagementSettings) -> int:
    done = _http_or_direct(args, settings)
    if done is not None:
        return done

    def run(repo: MetadataRepository) -> int:
        if args.action == "list":
            _print(
                [
                    {
                        "project_id": p.project_id,
                        "name": p.name,
                        "timezone": p.timezone,
                        "region": p.region or settings.region.region,
                    }
                    for p in repo.list_projects()
                ]
            )
            return 0
        if any(p.name.strip().casefold() == args.name.strip().casefold() for p in repo.list_projects()):
            raise MetadataError(f"a project named {args.name!r} already exists")
        project = repo.create_project(args.name, args.timezone, region=settings.region.region)
        token, secret = credentials.new_token(), credentials.new_secret()
        repo.add_project_credential(project.project_id, "token", token)
        repo.add_project_credential(project.project_id, "secret", secret)
        _print(
            {
                "project_id": project.project_id,
                "name": project.name,
                "timezone": project.timezone,
                "project_token": token,
                "project_secret": secret,
            }
        )
        return 0

    return _with_repo(settings, run)


def cmd_service_accounts(args: argparse.Namespace, settings: ManagementSettings) -> int:
    done = _http_or_direct(args, settings)
    if done is not None:
        return done
    if args.project is None:
        print("footfall: service-accounts create needs --project", file=sys.stderr)
        return 2
    role = args.role or Role.ADMIN

    def run(repo: MetadataRepository) -> int:
        if args.project not in {p.project_id for p in repo.list_projects()}:
            raise MetadataError(f"project {args.project} does not exist")
        username = args.username or credentials.new_username(args.project)
        if username in repo.load_directory().accounts:
            raise MetadataError(f"a service account named {username!r} already exists")
        secret = credentials.new_secret()
        sa_id = repo.create_service_account(username, secret)
        repo.grant(sa_id, args.project, role)
        _print({"id": sa_id, "username": username, "secret": secret, "project_id": args.project, "role": role})
        return 0

    return _with_repo(settings, run, "service-accounts")


def add_project_commands(sub: Any) -> None:
    projects = sub.add_parser("projects", help="list, create, rename projects; rotate their token or secret")
    actions = projects.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="list projects").add_argument("--data", default=None)
    create = actions.add_parser("create", help="create a project with a new token and secret")
    create.add_argument("--name", required=True)
    create.add_argument("--timezone", default="UTC")
    create.add_argument("--data", default=None)
    actions.add_parser("show", help="one project (HTTP)").add_argument("project", type=int)
    rename = actions.add_parser("rename", help="change a project's name or time zone (HTTP)")
    rename.add_argument("project", type=int)
    rename.add_argument("--name", default=None)
    rename.add_argument("--timezone", dest="timezone_change", default=None)
    for kind in ("secret", "token"):
        rotate = actions.add_parser(f"rotate-{kind}", help=f"a new project {kind}, shown once (HTTP)")
        rotate.add_argument("project", type=int)
    retention = actions.add_parser("retention", help="show, or set with --days, the days of events kept (HTTP)")
    retention.add_argument("project", type=int)
    retention.add_argument("--days", type=int, default=None, help="0 keeps everything (default: show only)")

    accounts = sub.add_parser("service-accounts", help="manage service accounts")
    sa_actions = accounts.add_subparsers(dest="action", required=True)
    sa_list = sa_actions.add_parser("list", help="the organization's service accounts, or a project's (HTTP)")
    sa_list.add_argument("--project", type=int, default=None)
    sa_create = sa_actions.add_parser("create", help="create a service account (with a role in a project)")
    sa_create.add_argument("--project", type=int, default=None)
    sa_create.add_argument("--role", choices=Role.ALL, default=None, help="default: admin (direct), consumer (HTTP)")
    sa_create.add_argument("--username", default=None)
    sa_create.add_argument("--expires", default=None, help="ISO 8601 date-time (HTTP)")
    sa_create.add_argument("--data", default=None)
    sa_delete = sa_actions.add_parser("delete", help="delete a service account everywhere (HTTP)")
    sa_delete.add_argument("id", type=int)
    sa_add = sa_actions.add_parser("add-to-project", help="add to a project or change the role (HTTP)")
    sa_add.add_argument("id", type=int)
    sa_add.add_argument("--project", type=int, required=True)
    sa_add.add_argument("--role", choices=Role.ALL, required=True)
    sa_remove = sa_actions.add_parser("remove-from-project", help="remove from a project (HTTP)")
    sa_remove.add_argument("id", type=int)
    sa_remove.add_argument("--project", type=int, required=True)
