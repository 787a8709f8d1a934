"""`footfall` command line: one subcommand per process, plus management commands."""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from footfall.shared.config import ConfigError, LogSettings
from footfall.shared.logging import configure_logging


def _uvicorn(
    app: object,
    host: str,
    port: int,
    log: LogSettings,
    workers: int = 1,
    factory: bool = False,
    sock: socket.socket | None = None,
) -> int:
    # Exits within 5 s of SIGTERM in every state (footfall.shared.server).
    from footfall.shared.server import run_app

    return run_app(app, host, port, log, workers=workers, factory=factory, sock=sock)


def _claim(args: argparse.Namespace, store: Any | None) -> socket.socket:
    """What a server needs before it creates anything: its port, and the data folder of a
    chDB store (one process at a time). StartError (one line) when either is taken."""
    from footfall.shared.server import listen, lock_data_dir

    sock = listen(args.host, args.port)
    if store is not None and store.embedded:
        try:
            _held.append(lock_data_dir(store.data_dir))
        except BaseException:
            sock.close()
            raise
    return sock


_held: list[int] = []  # the data folder's lock, held for the life of the process


def _tune_gc() -> None:
    """Fewer runs of the cyclic garbage collector in the ingesting process. A 2000-item request
    allocates tens of thousands of containers that live until it is answered; at the default
    generation-0 threshold (700) they are promoted and rescanned by full collections again and
    again (about a tenth of the server's CPU per `/engage` update, bench `profiles_embedded`).
    The start-up objects are frozen out of collections altogether. Not higher than 10,000:
    at 50,000 the cyclic garbage of requests waited so long that `serve` under the
    `import_embedded` load reached 2.2 GB RSS (690 MB at 10,000, same events/s)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def cmd_serve(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.standalone.main import build_embedded

    sock = _claim(args, settings.store)  # before the credentials are created
    embedded = build_embedded(settings)
    _tune_gc()
    data_dir = settings.store.data_dir
    print(f"Footfall listening on http://{args.host}:{args.port} (data in {data_dir})", file=sys.stderr)
    return _uvicorn(embedded.app, args.host, args.port, settings.log, sock=sock)


def cmd_funnels(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.commands import cmd_funnels as run

    return run(args, settings)


def cmd_bookmarks(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.commands import cmd_bookmarks as run

    return run(args, settings)


def cmd_cohorts(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.cohort_commands import cmd_cohorts as run

    return run(args, settings)


def cmd_gateway(args: argparse.Namespace, settings: Any) -> int:
    sock = _claim(args, None)
    print(f"Footfall gateway on http://{args.host}:{args.port} -> Kafka {settings.kafka.bootstrap}", file=sys.stderr)
    if args.workers > 1:
        # One app (producer, directory follower) per uvicorn worker process.
        return _uvicorn(
            "footfall.services.gateway.main:create_app",
            args.host,
            args.port,
            settings.log,
            args.workers,
            factory=True,
            sock=sock,
        )
    from footfall.services.gateway.main import build_gateway

    return _uvicorn(build_gateway(settings), args.host, args.port, settings.log, sock=sock)


def cmd_worker(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.worker.main import build_worker

    consumers = args.consumers or settings.consumers
    sock = _claim(args, settings.store)
    worker = build_worker(settings, consumers=consumers)
    print(
        f"Footfall worker: {consumers} consumer(s), Kafka {settings.kafka.bootstrap} -> {worker.warehouse.dsn.scheme}"
        f" store; /healthz /metrics on http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    return _uvicorn(worker.app, args.host, args.port, settings.log, sock=sock)


def cmd_query(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.query.main import build_query

    sock = _claim(args, settings.store)
    process = build_query(settings)
    print(
        f"Footfall query service on http://{args.host}:{args.port} -> {process.warehouse.dsn.scheme} store",
        file=sys.stderr,
    )
    return _uvicorn(process.app, args.host, args.port, settings.log, sock=sock)


def cmd_migrate(args: argparse.Namespace, settings: Any) -> int:
    if args.action is not None:  # amplitude | mixpanel | status: a client of a running deployment
        from footfall.services.migrate.client import run_client

        return run_client(args, settings)
    from footfall.services.migrate.main import build_migrate

    sock = _claim(args, settings.store)
    process = build_migrate(settings)
    print(f"Footfall migration service on http://{args.host}:{args.port}", file=sys.stderr)
    return _uvicorn(process.app, args.host, args.port, settings.log, sock=sock)


def cmd_directory(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.publish import publish_directory

    directory = publish_directory(settings)
    print(
        f"published the credential directory ({len(directory.projects)} project(s),"
        f" {len(directory.accounts)} service account(s)) to Kafka {settings.kafka.bootstrap}",
        file=sys.stderr,
    )
    return 0


def cmd_projects(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.projects import cmd_projects as run

    return run(args, settings)


def cmd_backup(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.backup import cmd_backup as run

    return run(args, settings)


def cmd_restore(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.backup import cmd_restore as run

    return run(args, settings)


def cmd_status(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.backup import cmd_status as run

    return run(args, settings)


def cmd_service_accounts(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.app.projects import cmd_service_accounts as run

    return run(args, settings)


def _serve_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.standalone.settings import ServeSettings

    return ServeSettings.from_env(env, data_dir=data_dir)


def _gateway_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.gateway.settings import GatewaySettings

    return GatewaySettings.from_env(env)


def _worker_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.worker.settings import WorkerSettings

    return WorkerSettings.from_env(env, data_dir=data_dir)


def _query_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.query.settings import QuerySettings

    return QuerySettings.from_env(env, data_dir=data_dir)


def _migrate_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.migrate.settings import MigrateSettings

    return MigrateSettings.from_env(env, data_dir=data_dir)


def _client_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.app.settings import ClientSettings

    return ClientSettings.from_env(env)


def _management_settings(env: dict[str, str], data_dir: Path | None) -> Any:
    from footfall.services.app.settings import ManagementSettings

    return ManagementSettings.from_env(env, data_dir=data_dir)


@dataclass(frozen=True)
class Command:
    """A subcommand: its function and the settings object it reads (each process its own)."""

    run: Callable[[argparse.Namespace, Any], int]
    settings: Callable[[dict[str, str], Path | None], Any]


COMMANDS: dict[str, Command] = {
    "serve": Command(cmd_serve, _serve_settings),
    "gateway": Command(cmd_gateway, _gateway_settings),
    "worker": Command(cmd_worker, _worker_settings),
    "query": Command(cmd_query, _query_settings),
    "directory": Command(cmd_directory, _management_settings),
    "projects": Command(cmd_projects, _management_settings),
    "service-accounts": Command(cmd_service_accounts, _management_settings),
    "funnels": Command(cmd_funnels, _management_settings),
    "bookmarks": Command(cmd_bookmarks, _management_settings),
    "cohorts": Command(cmd_cohorts, _client_settings),
    "migrate": Command(cmd_migrate, _migrate_settings),
    "backup": Command(cmd_backup, _management_settings),
    "restore": Command(cmd_restore, _management_settings),
    "status": Command(cmd_status, _management_settings),
}


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's default in its help line, unless the help already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "default" not in help_text
            and default not in (None, False, argparse.SUPPRESS)
            and not isinstance(action, argparse._VersionAction | argparse._HelpAction)
        ):
            help_text = f"{help_text} (default: %(default)s)".strip()
        return help_text or None


class _Parser(argparse.ArgumentParser):
    """Its subcommands' parsers are `_Parser`s too, so every `--help` shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.help is None and action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            action.help = "(default: %(default)s)"
        return action


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("footfall")
    except PackageNotFoundError:
        return "unknown"


def _schema_version() -> int:
    """The highest migration number this release carries (footfall.shared.backup)."""
    from footfall.shared.backup import release_schema_version

    return release_schema_version()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="footfall", description="Self-hostable product analytics.")
    parser.add_argument("--version", action="version", version=f"footfall {_version()} (schema {_schema_version()})")
    # `projects` and `service-accounts` over a running server's HTTP API (footfall.services.app.management_client)
    parser.add_argument("--url", dest="global_url", default=None, help="server of the management API (FOOTFALL_URL)")
    parser.add_argument("--user", dest="global_user", default=None, help="USERNAME:SECRET of a service account")
    parser.add_argument("--json", dest="global_json", action="store_true", help="print the API's JSON, not a table")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run every interface in one process (embedded chDB store)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--data", type=Path, default=None, help="data folder (default ./footfall-data)")

    gateway = sub.add_parser("gateway", help="run /import only, publishing to Kafka (no warehouse access)")
    gateway.add_argument("--host", default="127.0.0.1")
    gateway.add_argument("--port", type=int, default=8000)
    gateway.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (default 1)")

    worker = sub.add_parser("worker", help="consume events from Kafka into the warehouse")
    worker.add_argument("--host", default="127.0.0.1")
    worker.add_argument("--port", type=int, default=8001, help="port of /healthz and /metrics (default 8001)")
    worker.add_argument(
        "--consumers", type=int, default=0, help="consumers in this process (default FOOTFALL_WORKER_CONSUMERS)"
    )
    worker.add_argument("--data", type=Path, default=None, help="data folder of a chDB store (default ./footfall-data)")

    query = sub.add_parser("query", help="run the query interface only, against FOOTFALL_WAREHOUSE_DSN")
    query.add_argument("--host", default="127.0.0.1")
    query.add_argument("--port", type=int, default=8002)
    query.add_argument("--data", type=Path, default=None, help="data folder of a chDB store (default ./footfall-data)")

    directory = sub.add_parser("directory", help="credential directory for gateways")
    directory_sub = directory.add_subparsers(dest="action", required=True)
    publish = directory_sub.add_parser("publish", help="publish the credential snapshot to the Kafka directory topic")
    publish.add_argument(
        "--data", type=Path, default=None, help="data folder of a chDB store (default ./footfall-data)"
    )

    from footfall.services.app.cohort_commands import add_cohort_commands
    from footfall.services.app.commands import add_saved_commands
    from footfall.services.app.projects import add_project_commands

    add_saved_commands(sub)
    add_project_commands(sub)
    add_cohort_commands(sub)
    from footfall.services.migrate.client import add_migrate_command

    add_migrate_command(sub)
    from footfall.services.app.backup import add_operation_commands

    add_operation_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]
    data = getattr(args, "data", None)
    try:
        settings = command.settings(dict(os.environ), Path(data) if data is not None else None)
    except ConfigError as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log.level, settings.log.format)
    from footfall.shared.server import StartError

    try:
        return command.run(args, settings)
    except StartError as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
