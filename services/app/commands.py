"""`footfall funnels …` and `footfall bookmarks …`: saved funnels and saved reports from the CLI.

    footfall funnels list   --project 1
    footfall funnels show   ID --project 1
    footfall funnels create --project 1 --name "Signup" --step "Sign Up" --step Purchase [--length 7 --length-unit day]
    footfall funnels create --project 1 --definition @funnel.json       (or inline JSON, or - for stdin)
    footfall funnels update ID --project 1 [--name …] [--step … …] [--length …] [--length-unit …] [--definition …]
    footfall funnels delete ID --project 1
    footfall bookmarks list|show|delete   (as above)
    footfall bookmarks create --project 1 --name "Logins" --params '{"events": ["Logged in"], "last_days": 30}'
    footfall bookmarks update ID --project 1 [--name …] [--params …] [--definition …]

The definitions are the JSON of the management interface (`shared/saved.py`); an update
replaces the members it is given, like PATCH. Records are printed as JSON. The commands
open the warehouse from the settings (`FOOTFALL_WAREHOUSE_DSN` / `--data`): with the
embedded store, stop `footfall serve` first (chDB lets one process open its folder).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from services.app.saved import check_expression
from shared.config import Settings
from shared.metadata import MetadataRepository
from shared.saved import DefinitionError, WarehouseSavedStore, parse_bookmark, parse_funnel
from shared.warehouse import WarehouseError, apply_migrations, open_warehouse

__all__ = ["add_saved_commands", "cmd_bookmarks", "cmd_funnels"]

ACTIONS = ("list", "show", "create", "update", "delete")


class CommandError(Exception):
    pass


def _json_arg(text: str) -> Any:
    """Inline JSON, `@path` for a file, or `-` for stdin."""
    if text == "-":
        raw = sys.stdin.read()
    elif text.startswith("@"):
        raw = Path(text[1:]).read_text()
    else:
        raw = text
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CommandError(f"invalid JSON: {exc}") from None


def _print(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _funnel_body(args: argparse.Namespace, current: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if current is not None:
        body = {k: current[k] for k in ("name", "steps", "length", "length_unit")}
    if args.definition is not None:
        given = _json_arg(args.definition)
        if not isinstance(given, dict):
            raise CommandError("--definition must be a JSON object")
        body.update(given)
    if args.name is not None:
        body["name"] = args.name
    if args.step:
        body["steps"] = [{"event": e} for e in args.step]
    if args.length is not None:
        body["length"] = args.length
    if args.length_unit is not None:
        body["length_unit"] = args.length_unit
    return body


def _bookmark_body(args: argparse.Namespace, current: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if current is not None:
        body = {"name": current["name"], "params": current["params"]}
    if args.definition is not None:
        given = _json_arg(args.definition)
        if not isinstance(given, dict):
            raise CommandError("--definition must be a JSON object")
        body.update(given)
    if args.name is not None:
        body["name"] = args.name
    if args.params is not None:
        body["params"] = _json_arg(args.params)
    return body


def _run(settings: Settings, project_id: int, work: Callable[[WarehouseSavedStore], int]) -> int:
    try:
        warehouse = open_warehouse(settings.dsn)
    except Exception as exc:  # chDB folder locked by a running server, unreachable ClickHouse…
        print(f"footfall: cannot open the warehouse: {exc}", file=sys.stderr)
        return 1
    try:
        apply_migrations(warehouse)
        if project_id not in {p.project_id for p in MetadataRepository(warehouse).list_projects()}:
            raise CommandError(f"project {project_id} does not exist")
        return work(WarehouseSavedStore(warehouse))
    except (CommandError, DefinitionError, OSError) as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 1
    except WarehouseError as exc:
        print(f"footfall: warehouse error: {exc}", file=sys.stderr)
        return 1
    finally:
        warehouse.close()


def _need_id(args: argparse.Namespace) -> int:
    if args.id is None:
        raise CommandError(f"{args.action} needs the id")
    value: int = args.id
    return value


def cmd_funnels(args: argparse.Namespace, settings: Settings) -> int:
    pid: int = args.project

    def work(store: WarehouseSavedStore) -> int:
        if args.action == "list":
            _print([f.to_json() for f in store.list_funnels(pid)])
            return 0
        if args.action == "create":
            name, definition = parse_funnel(_funnel_body(args, None), check=check_expression)
            _print(store.create_funnel(pid, name, definition).to_json())
            return 0
        item_id = _need_id(args)
        found = store.get_funnel(pid, item_id)
        if found is None:
            raise CommandError(f"funnel {item_id} not found in project {pid}")
        if args.action == "show":
            _print(found.to_json())
        elif args.action == "update":
            name, definition = parse_funnel(_funnel_body(args, found.to_json()), check=check_expression)
            updated = store.update_funnel(pid, item_id, name, definition)
            assert updated is not None
            _print(updated.to_json())
        else:
            store.delete_funnel(pid, item_id)
            _print({"status": "ok", "deleted": item_id})
        return 0

    return _run(settings, pid, work)


def cmd_bookmarks(args: argparse.Namespace, settings: Settings) -> int:
    pid: int = args.project

    def work(store: WarehouseSavedStore) -> int:
        if args.action == "list":
            _print([b.to_json() for b in store.list_bookmarks(pid)])
            return 0
        if args.action == "create":
            name, params = parse_bookmark(_bookmark_body(args, None), check=check_expression)
            _print(store.create_bookmark(pid, name, params).to_json())
            return 0
        item_id = _need_id(args)
        found = store.get_bookmark(pid, item_id)
        if found is None:
            raise CommandError(f"bookmark {item_id} not found in project {pid}")
        if args.action == "show":
            _print(found.to_json())
        elif args.action == "update":
            name, params = parse_bookmark(_bookmark_body(args, found.to_json()), check=check_expression)
            updated = store.update_bookmark(pid, item_id, name, params)
            assert updated is not None
            _print(updated.to_json())
        else:
            store.delete_bookmark(pid, item_id)
            _print({"status": "ok", "deleted": item_id})
        return 0

    return _run(settings, pid, work)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("id", type=int, nargs="?", help="id (show, update, delete)")
    parser.add_argument("--project", type=int, required=True, help="project id")
    parser.add_argument("--data", type=Path, default=None, help="data folder (default ./footfall-data)")
    parser.add_argument("--name", default=None)
    parser.add_argument("--definition", default=None, help="JSON object, @file or - (stdin)")


def add_saved_commands(sub: Any) -> None:
    """Register the `funnels` and `bookmarks` subcommands on the CLI's subparsers."""
    funnels = sub.add_parser("funnels", help="manage saved funnels")
    _common(funnels)
    funnels.add_argument("--step", action="append", default=None, help="a step's event name (repeat, in order)")
    funnels.add_argument("--length", type=int, default=None, help="conversion window length")
    funnels.add_argument("--length-unit", dest="length_unit", default=None, help="day, hour, minute or second")
    bookmarks = sub.add_parser("bookmarks", help="manage saved reports (bookmarks)")
    _common(bookmarks)
    bookmarks.add_argument("--params", default=None, help="the report's params: JSON object, @file or -")
