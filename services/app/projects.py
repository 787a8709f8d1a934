"""`footfall projects …` and `footfall service-accounts …`: projects and credentials from the CLI.

    footfall projects list
    footfall projects create --name "Web" [--timezone Europe/Berlin]
    footfall service-accounts create --project 2 [--role admin] [--username NAME]

New secrets and tokens are printed once, as JSON, and stored only as hashes. The
commands open the warehouse from the settings (`FOOTFALL_WAREHOUSE_DSN` / `--data`):
with the embedded store stop `footfall serve` first (chDB lets one process open its
folder); a running `footfall query` picks the change up within its refresh interval, and
gateways with the next directory snapshot a worker publishes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from footfall.services.app.settings import ManagementSettings
from footfall.shared import credentials
from footfall.shared.credentials import Role
from footfall.shared.metadata import MetadataError, MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import WarehouseError, open_warehouse

__all__ = ["add_project_commands", "cmd_projects", "cmd_service_accounts"]


def _print(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _with_repo(settings: ManagementSettings, action: Any) -> int:
    if not settings.store.warehouse_dsn:
        settings.store.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        warehouse = open_warehouse(settings.store.dsn)
    except Exception as exc:  # chDB's folder lock, an unreachable server
        print(f"footfall: cannot open the warehouse {settings.store.dsn}: {exc}", file=sys.stderr)
        return 1
    try:
        apply_migrations(warehouse)
        return int(action(MetadataRepository(warehouse)))
    except (MetadataError, WarehouseError) as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 1
    finally:
        warehouse.close()


def cmd_projects(args: argparse.Namespace, settings: ManagementSettings) -> int:
    def run(repo: MetadataRepository) -> int:
        if args.action == "list":
            _print([{"project_id": p.project_id, "name": p.name, "timezone": p.timezone} for p in repo.list_projects()])
            return 0
        project = repo.create_project(args.name, args.timezone)
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
    def run(repo: MetadataRepository) -> int:
        if args.project not in {p.project_id for p in repo.list_projects()}:
            raise MetadataError(f"project {args.project} does not exist")
        username = args.username or credentials.new_username(args.project)
        if username in repo.load_directory().accounts:
            raise MetadataError(f"a service account named {username!r} already exists")
        secret = credentials.new_secret()
        sa_id = repo.create_service_account(username, secret)
        repo.grant(sa_id, args.project, args.role)
        _print({"id": sa_id, "username": username, "secret": secret, "project_id": args.project, "role": args.role})
        return 0

    return _with_repo(settings, run)


def add_project_commands(sub: Any) -> None:
    projects = sub.add_parser("projects", help="list or create projects")
    actions = projects.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="list projects").add_argument("--data", default=None)
    create = actions.add_parser("create", help="create a project with a new token and secret")
    create.add_argument("--name", required=True)
    create.add_argument("--timezone", default="UTC")
    create.add_argument("--data", default=None)

    accounts = sub.add_parser("service-accounts", help="create service accounts")
    sa_actions = accounts.add_subparsers(dest="action", required=True)
    sa_create = sa_actions.add_parser("create", help="create a service account with a role in one project")
    sa_create.add_argument("--project", type=int, required=True)
    sa_create.add_argument("--role", choices=Role.ALL, default=Role.ADMIN)
    sa_create.add_argument("--username", default=None)
    sa_create.add_argument("--data", default=None)
