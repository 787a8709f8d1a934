"""`footfall` command line: one subcommand per process, plus management commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from footfall.shared.config import ConfigError, LogSettings
from footfall.shared.logging import configure_logging


def _uvicorn(app: object, host: str, port: int, log: LogSettings, workers: int = 1, factory: bool = False) -> int:
    import uvicorn

    uvicorn.run(
        app,  # type: ignore[arg-type]
        factory=factory,
        host=host,
        port=port,
        log_level=log.level if log.level != "info" else "warning",
        access_log=False,
        workers=workers if workers > 1 else None,
        timeout_graceful_shutdown=10,
        # The peer address is the TCP peer: uvicorn would otherwise rewrite it from
        # X-Forwarded-For for 127.0.0.1; the gateway applies FOOTFALL_TRUSTED_PROXIES itself.
        proxy_headers=False,
    )
    return 0


def cmd_serve(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.standalone.main import build_embedded

    embedded = build_embedded(settings)
    data_dir = settings.store.data_dir
    print(f"Footfall listening on http://{args.host}:{args.port} (data in {data_dir})", file=sys.stderr)
    return _uvicorn(embedded.app, args.host, args.port, settings.log)


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
    print(f"Footfall gateway on http://{args.host}:{args.port} -> Kafka {settings.kafka.bootstrap}", file=sys.stderr)
    if args.workers > 1:
        # One app (producer, directory follower) per uvicorn worker process.
        return _uvicorn(
            "footfall.services.gateway.main:create_app", args.host, args.port, settings.log, args.workers, factory=True
        )
    from footfall.services.gateway.main import build_gateway

    return _uvicorn(build_gateway(settings), args.host, args.port, settings.log)


def cmd_worker(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.worker.main import build_worker

    consumers = args.consumers or settings.consumers
    worker = build_worker(settings, consumers=consumers)
    print(
        f"Footfall worker: {consumers} consumer(s), Kafka {settings.kafka.bootstrap} -> {worker.warehouse.dsn.scheme}"
        f" store; /healthz /metrics on http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    return _uvicorn(worker.app, args.host, args.port, settings.log)


def cmd_query(args: argparse.Namespace, settings: Any) -> int:
    from footfall.services.query.main import build_query

    process = build_query(settings)
    print(
        f"Footfall query service on http://{args.host}:{args.port} -> {process.warehouse.dsn.scheme} store",
        file=sys.stderr,
    )
    return _uvicorn(process.app, args.host, args.port, settings.log)


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
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="footfall", description="Self-hostable product analytics.")
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
    return command.run(args, settings)


if __name__ == "__main__":
    raise SystemExit(main())
