"""`footfall` command line: one subcommand per process, plus management commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from shared.config import ConfigError, Settings
from shared.logging import configure_logging

Command = Callable[[argparse.Namespace, Settings], int]


def _uvicorn(app: object, host: str, port: int, settings: Settings, workers: int = 1) -> int:
    import uvicorn

    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=settings.log_level if settings.log_level != "info" else "warning",
        access_log=False,
        workers=workers if workers > 1 else None,
        timeout_graceful_shutdown=10,
    )
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from services.standalone.main import build_embedded

    embedded = build_embedded(settings)
    print(f"Footfall listening on http://{args.host}:{args.port} (data in {settings.data_dir})", file=sys.stderr)
    return _uvicorn(embedded.app, args.host, args.port, settings)


def cmd_funnels(args: argparse.Namespace, settings: Settings) -> int:
    from services.app.commands import cmd_funnels as run

    return run(args, settings)


def cmd_bookmarks(args: argparse.Namespace, settings: Settings) -> int:
    from services.app.commands import cmd_bookmarks as run

    return run(args, settings)


COMMANDS: dict[str, Command] = {"serve": cmd_serve, "funnels": cmd_funnels, "bookmarks": cmd_bookmarks}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="footfall", description="Self-hostable product analytics.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run every interface in one process (embedded chDB store)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--data", type=Path, default=None, help="data folder (default ./footfall-data)")

    from services.app.commands import add_saved_commands

    add_saved_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    overrides: dict[str, object] = {}
    if getattr(args, "data", None) is not None:
        overrides["data_dir"] = args.data
    try:
        settings = Settings.from_env(os.environ, **overrides)
    except ConfigError as exc:
        print(f"footfall: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    return COMMANDS[args.command](args, settings)


if __name__ == "__main__":
    raise SystemExit(main())
