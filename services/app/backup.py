"""Operations: `footfall backup`, `footfall restore`, `footfall status` and their HTTP routes.

* `POST /api/app/backups` with `{"path": "NAME"}` backs the running server's store up into
  `FOOTFALL_BACKUP_DIR/NAME` (an absolute path must lie inside that folder) while it keeps
  serving; `GET /api/app/status` answers the store's size, the events, estimated size and
  last insert per project, the consumer lag (when Kafka is used) and the schema versions.
  Both are for an Owner of a project of the deployment's own organization (1): a backup holds
  every organization's data, and it stays on the server's disk.
* `footfall --url URL --user NAME:SECRET backup DEST` and `… status` call them; without
  `--user` (and `FOOTFALL_USER`) they open the store directly, which works only while no
  server holds it. `footfall restore SRC --data DIR` always works directly (into a new or
  empty folder; `footfall.shared.backup.restore`). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from footfall.services.app.settings import ManagementSettings
from footfall.shared import metrics
from footfall.shared.auth import Authenticator
from footfall.shared.backup import (
    BackupError,
    Progress,
    resolve_destination,
    restore,
    store_status,
    take_backup,
)
from footfall.shared.credentials import Role
from footfall.shared.errors import AuthError, FootfallError, ParamError
from footfall.shared.metadata import DEFAULT_ORGANIZATION, MetadataRepository, MetadataStore, ServiceAccount
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.web import json_response, read_body

BACKUP_TIMEOUT_SECONDS = 3600.0

__all__ = ["add_operation_commands", "cmd_backup", "cmd_restore", "cmd_status", "consumer_lag", "operation_routes"]


class BackupFailed(FootfallError):
    """The store could not be backed up as asked (the status of the `BackupError`)."""


def consumer_lag() -> dict[str, int] | None:
    """Messages behind per topic, from this process's consumers (None: no Kafka consumer here)."""
    lag: dict[str, int] = {}
    for family in metrics.CONSUMER_LAG.collect():
        for sample in family.samples:
            topic = sample.labels.get("topic", "")
            lag[topic] = lag.get(topic, 0) + int(sample.value)
    return lag or None


def _require_operator(repo: MetadataStore, account: ServiceAccount) -> None:
    record = repo.get_service_account(account.sa_id)
    if record is None:
        raise AuthError(401, "Invalid credentials")
    if record.organization_id != DEFAULT_ORGANIZATION or Role.OWNER not in record.roles.values():
        raise AuthError(403, "backups and status need a service account with role Owner in organization 1")


def _path(raw: bytes) -> str:
    try:
        body: Any = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise ParamError('the body must be a JSON object: {"path": "NAME"}') from None
    if not isinstance(body, dict) or set(body) != {"path"} or not isinstance(body["path"], str) or not body["path"]:
        raise ParamError('the body must be {"path": "NAME"}: a new folder inside FOOTFALL_BACKUP_DIR')
    return str(body["path"])


def operation_routes(
    authenticator: Authenticator, repo: MetadataStore, warehouse: ClickHouseWarehouse, backup_dir: Path
) -> list[Route]:
    async def caller(request: Request) -> None:
        client = request.client.host if request.client is not None else None
        account = await authenticator.account_async(request.headers.get("authorization"), client=client)
        await warehouse.run(_require_operator, repo, account)

    async def backups(request: Request) -> Response:
        await caller(request)
        name = _path(await read_body(request, 4096))
        try:
            dest = resolve_destination(name, backup_dir)
            manifest = await warehouse.run(take_backup, warehouse, dest)
        except BackupError as exc:
            raise BackupFailed(exc.status, str(exc)) from None
        files = manifest.pop("files")
        return json_response({"status": "ok", "results": {**manifest, "files": len(files)}})

    async def status(request: Request) -> Response:
        await caller(request)
        body = await warehouse.run(store_status, warehouse, repo)
        body["consumer_lag"] = consumer_lag()
        return json_response({"status": "ok", "results": body})

    return [
        Route("/api/app/backups", backups, methods=["POST"]),
        Route("/api/app/status", status, methods=["GET"]),
    ]


# -- the CLI -----------------------------------------------------------------------------------


@contextmanager
def _progress(title: str) -> Iterator[Progress]:
    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[amount]}"), TimeElapsedColumn())
    with Bar(*columns, console=console) as bar:
        tasks: dict[str, Any] = {}

        def report(step: str, done: int, total: int) -> None:
            amount = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if step == "checking files" else f"{done}/{total}"
            if step not in tasks:
                tasks[step] = bar.add_task(f"{title}: {step}", total=max(total, 1), amount=amount)
            bar.update(tasks[step], completed=done, total=max(total, 1), amount=amount)

        yield report


def _fail(message: str, code: int = 1) -> int:
    print(f"footfall: {message}", file=sys.stderr)
    return code


def _over_http(args: argparse.Namespace, settings: ManagementSettings) -> tuple[str, str] | None:
    user = getattr(args, "global_user", None) or settings.user
    if not user:
        return None
    return getattr(args, "global_url", None) or settings.url, user


def _http(args: argparse.Namespace, url: str, user: str, method: str, path: str, body: Any) -> Any:
    from footfall.services.app.management_client import ManagementClient

    client = ManagementClient(url, user)
    client._client.timeout = httpx.Timeout(BACKUP_TIMEOUT_SECONDS)  # a backup of a big store takes its time
    try:
        return client.call(method, path, body)
    finally:
        client.close()


def _direct(settings: ManagementSettings, run: Callable[[ClickHouseWarehouse], int]) -> int:
    from footfall.services.app.projects import store_locked
    from footfall.shared.schema import apply_migrations
    from footfall.shared.warehouse import WarehouseError, open_warehouse

    if not settings.store.embedded:
        return _fail("with a ClickHouse server, use the server's own tools (README, Operations)")
    if not (settings.store.data_dir / "chdb").exists():
        return _fail(f"no store in {settings.store.data_dir}")
    if store_locked(settings.store.dsn):
        return _fail(
            f"the store {settings.store.dsn} is held by a running server: use"
            " footfall --url URL --user USERNAME:SECRET backup|status …"
        )
    settings.store.backups.mkdir(mode=0o700, parents=True, exist_ok=True)
    warehouse = open_warehouse(settings.store.dsn, backup_dir=str(settings.store.backups))
    try:
        apply_migrations(warehouse)
        return run(warehouse)
    except (BackupError, WarehouseError) as exc:
        return _fail(str(exc).strip().splitlines()[0][:300])
    finally:
        warehouse.close()


def _print_json(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def cmd_backup(args: argparse.Namespace, settings: ManagementSettings) -> int:
    remote = _over_http(args, settings)
    if remote is not None:
        from rich.console import Console

        from footfall.services.app.management_client import _Failed

        try:
            with Console(stderr=True).status(f"backing up the store of {remote[0]} …"):
                answer = _http(args, *remote, "POST", "/api/app/backups", {"path": args.dest})
        except _Failed as exc:
            return _fail(str(exc), exc.code)
        result = answer["results"]
        print(f"backed up schema version {result['schema_version']} into {result['path']} ({result['bytes']} bytes)")
        return 0

    def run(warehouse: ClickHouseWarehouse) -> int:
        dest = resolve_destination(args.dest, settings.store.backups)
        with _progress("backup") as report:
            manifest = take_backup(warehouse, dest, progress=report)
        print(f"backed up schema version {manifest['schema_version']} into {dest} ({manifest['bytes']} bytes)")
        return 0

    return _direct(settings, run)


def cmd_restore(args: argparse.Namespace, settings: ManagementSettings) -> int:
    if args.data is None:
        return _fail("restore needs --data DIR: a new or empty data folder", 2)
    try:
        with _progress("restore") as report:
            manifest = restore(Path(args.src), Path(args.data), progress=report)
    except BackupError as exc:
        return _fail(f"{exc}; nothing was restored")
    print(f"restored schema version {manifest['schema_version']} into {Path(args.data).resolve()}")
    return 0


def _status_text(status: dict[str, Any]) -> str:
    lines = [
        f"schema version {status['schema_version']} (this release: {status['release_schema_version']})",
        f"store size {status['store_bytes']} bytes",
        f"consumer lag {status.get('consumer_lag') if status.get('consumer_lag') is not None else 'n/a (no Kafka)'}",
        "",
        f"{'project':>7}  {'events':>12}  {'bytes (est.)':>14}  last insert",
    ]
    for p in status["projects"]:
        lines.append(f"{p['project_id']:>7}  {p['events']:>12}  {p['bytes_estimate']:>14}  {p['last_insert'] or '-'}")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace, settings: ManagementSettings) -> int:
    as_json = bool(getattr(args, "global_json", False))
    remote = _over_http(args, settings)
    if remote is not None:
        from footfall.services.app.management_client import _Failed

        try:
            status = _http(args, *remote, "GET", "/api/app/status", None)["results"]
        except _Failed as exc:
            return _fail(str(exc), exc.code)
    else:
        found: dict[str, Any] = {}

        def run(warehouse: ClickHouseWarehouse) -> int:
            found.update(store_status(warehouse, MetadataRepository(warehouse)), consumer_lag=None)
            return 0

        code = _direct(settings, run)
        if code:
            return code
        status = found
    if as_json:
        _print_json(status)
    else:
        print(_status_text(status))
    return 0


def add_operation_commands(sub: Any) -> None:
    backup = sub.add_parser("backup", help="back the store up into a new folder inside FOOTFALL_BACKUP_DIR")
    backup.add_argument("dest", help="the new folder (relative: inside FOOTFALL_BACKUP_DIR)")
    backup.add_argument("--data", default=None, help="data folder, when no server runs (default ./footfall-data)")
    restore_cmd = sub.add_parser("restore", help="restore a backup into a new or empty data folder")
    restore_cmd.add_argument("src", help="the backup folder")
    restore_cmd.add_argument("--data", default=None, help="the new data folder (required)")
    status = sub.add_parser("status", help="store size, events and last insert per project, consumer lag")
    status.add_argument("--data", default=None, help="data folder, when no server runs (default ./footfall-data)")
