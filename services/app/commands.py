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

The definitions are the JSON of the management interface (`footfall.shared.saved`); an update
replaces the members it is given, like PATCH. Records are printed as JSON. The commands
open the warehouse from the settings (`FOOTFALL_WAREHOUSE_DSN` / `--data`): with the
embedded store, stop `footfall serve` first (chDB lets one process open its folder).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from footfall.services.app.saved import check_expression
from footfall.services.app.settings import ManagementSettings
from footfall.shared.metadata import MetadataRepository
from footfall.shared.saved import DefinitionError, WarehouseSavedStore, parse_bookmark, parse_funnel
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import WarehouseError, open_warehouse

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


def _body(args: argparse.Namespace, current: dict[str, Any] | None, members: tuple[str, ...]) -> dict[str, Any]:
    """The JSON body an update or a create sends: the current `members` (update), then
    `--definition`, then `--name`."""
    body: dict[str, Any] = {}
    if current is not None:
        body = {k: current[k] for k in members}
    if args.definition is not None:
        given = _json_arg(args.definition)
        if not isinstance(given, dict):
            raise CommandError("--definition must be a JSON object")
        body.update(given)
    if args.name is not None:
        body["name"] = args.name
    return body


def _funnel_body(args: argparse.Namespace, current: dict[str, Any] | None) -> dict[str, Any]:
    body = _body(args, current, ("name", "steps", "length", "length_unit"))
    if args.step:
        body["steps"] = [{"event": e} for e in args.step]
    if args.length is not None:
        body["length"] = args.length
    if args.length_unit is not None:
        body["length_unit"] = args.length_unit
    return body


def _bookmark_body(args: argparse.Namespace, current: dict[str, Any] | None) -> dict[str, Any]:
    body = _body(args, current, ("name", "params"))
    if args.params is not None:
        body["params"] = _json_arg(args.params)
    return body


def _run(settings: ManagementSettings, project_id: int, work: Callable[[WarehouseSavedStore], int]) -> int:
    try:
        warehouse = open_warehouse(settings.store.dsn)
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


class _Item(Protocol):
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _Kind:
    """One kind of saved item: its name, how its body is built and parsed, and the store's methods for it."""

    noun: str
    body: Callable[[argparse.Namespace, dict[str, Any] | None], dict[str, Any]]
    parse: Callable[..., tuple[str, Any]]  # (body, *, check) -> (name, definition)
    list_items: Callable[[WarehouseSavedStore, int], Sequence[_Item]]
    get: Callable[[WarehouseSavedStore, int, int], _Item | None]
    create: Callable[[WarehouseSavedStore, int, str, Any], _Item]
    update: Callable[[WarehouseSavedStore, int, int, str, Any], _Item | None]
    delete: Callable[[WarehouseSavedStore, int, int], bool]


_FUNNELS = _Kind(
    noun="funnel",
    body=_funnel_body,
    parse=parse_funnel,
    list_items=WarehouseSavedStore.list_funnels,
    get=WarehouseSavedStore.get_funnel,
    create=WarehouseSavedStore.create_funnel,
    update=WarehouseSavedStore.update_funnel,
    delete=WarehouseSavedStore.delete_funnel,
)
_BOOKMARKS = _Kind(
    noun="bookmark",
    body=_bookmark_body,
    parse=parse_bookmark,
    list_items=WarehouseSavedStore.list_bookmarks,
    get=WarehouseSavedStore.get_bookmark,
    create=WarehouseSavedStore.create_bookmark,
    update=WarehouseSavedStore.update_bookmark,
    delete=WarehouseSavedStore.delete_bookmark,
)


def _manage(kind: _Kind, args: argparse.Namespace, settings: ManagementSettings) -> int:
    """`args.action` on the saved items of `kind` in project `args.project`."""
    pid: int = args.project

    def work(store: WarehouseSavedStore) -> int:
        if args.action == "list":
            _print([item.to_json() for item in kind.list_items(store, pid)])
            return 0
        if args.action == "create":
            name, definition = kind.parse(kind.body(args, None), check=check_expression)
            _print(kind.create(store, pid, name, definition).to_json())
            return 0
        item_id = _need_id(args)
        found = kind.get(store, pid, item_id)
        if found is None:
            raise CommandError(f"{kind.noun} {item_id} not found in project {pid}")
        if args.action == "show":
            _print(found.to_json())
        elif args.action == "update":
            name, definition = kind.parse(kind.body(args, found.to_json()), check=check_expression)
            updated = kind.update(store, pid, item_id, name, definition)
            if updated is None:
                raise AssertionError("invariant: updated is not None")
            _print(updated.to_json())
        else:
            kind.delete(store, pid, item_id)
            _print({"status": "ok", "deleted": item_id})
        return 0

    return _run(settings, pid, work)


def cmd_funnels(args: argparse.Namespace, settings: ManagementSettings) -> int:
    return _manage(_FUNNELS, args, settings)


def cmd_bookmarks(args: argparse.Namespace, settings: ManagementSettings) -> int:
    return _manage(_BOOKMARKS, args, settings)


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
