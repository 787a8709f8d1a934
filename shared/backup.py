"""Backup, restore and status of the embedded (chDB) store.

A backup is the warehouse's own `BACKUP DATABASE default TO File(DEST)`: every table
(events, profiles, metadata, credentials as stored, i.e. hashed, saved reports, cohorts,
the migration ledger) and the materialised views, each table copied as the set of parts
it had when its turn came, so a running `serve` keeps importing and answering meanwhile.
Footfall then writes `footfall-backup.json` beside it: the schema version, the tables,
and the size and SHA-256 of every file.

A restore checks every file against that manifest first (a truncated, altered, missing or
extra file is refused before anything is created), restores into a hidden sibling of the
target folder, checks the tables and the schema version there, rebuilds the targets of the
materialised views from their sources (tables are copied one after another, so an aggregate
could otherwise count an event the copied `events` table does not hold), and only then
renames the sibling to the target. A refused or failed restore removes the sibling: the
target is never half-restored.

Destinations are bounded: chDB may write backups only below `backups.allowed_path`, the
folder `FOOTFALL_BACKUP_DIR` (default `footfall-backups` beside the data folder).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from footfall.shared.metadata import MetadataStore
from footfall.shared.schema.catalog import EVENTS
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse.client import ClickHouseWarehouse, Warehouse, WarehouseError
from footfall.shared.warehouse.dsn import Dsn

__all__ = [
    "MANIFEST",
    "BackupError",
    "release_schema_version",
    "resolve_destination",
    "restore",
    "store_schema_version",
    "store_status",
    "take_backup",
    "verify",
]

MANIFEST = "footfall-backup.json"
FORMAT = 1
_CHUNK = 1 << 20
_SAFE_PATH = re.compile(r"^[^'\\\x00-\x1f]+$")  # the path goes into File('…'), which takes no bound value

Progress = Callable[[str, int, int], None]  # (step, done, total)


class BackupError(Exception):
    """A backup or restore refused or failed; the message says why, in one line. `status` is
    the HTTP status it answers as: 400 a bad destination, 409 an existing one, 501 not an
    embedded store, 503 the warehouse refused."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _no_progress(step: str, done: int, total: int) -> None:
    return None


def release_schema_version() -> int:
    """This release's schema version: the highest migration number it carries."""
    from footfall.shared.schema.migrate import discover

    return max(version for version, _, _ in discover())


def store_schema_version(warehouse: Warehouse) -> int:
    """The highest migration applied to a store (0: none)."""
    rows = warehouse.query("SELECT max(version) FROM schema_migrations")
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def resolve_destination(dest: str | Path, backup_dir: Path) -> Path:
    """DEST as an absolute folder below `backup_dir` that does not exist yet (a relative DEST
    is taken inside `backup_dir`); BackupError otherwise."""
    root = backup_dir.resolve()
    path = Path(dest)
    path = (path if path.is_absolute() else root / path).resolve()
    if path == root or root not in path.parents:
        raise BackupError(f"a backup must go into a new folder inside {root} (FOOTFALL_BACKUP_DIR), not {dest}")
    if not _SAFE_PATH.match(str(path)):
        raise BackupError(f"the backup folder's name may not contain quotes, backslashes or control characters: {dest}")
    if path.exists():
        raise BackupError(f"{path} already exists: name a new folder", 409)
    return path


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def _sha256(path: Path, progress: Progress, done: int, total: int) -> tuple[str, int]:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            progress("checking files", done, total)
    return digest.hexdigest(), done


def _hash_all(folder: Path, files: list[Path], progress: Progress) -> dict[str, list[Any]]:
    total = sum(p.stat().st_size for p in files)
    done = 0
    out: dict[str, list[Any]] = {}
    for path in files:
        size = path.stat().st_size
        sha, done = _sha256(path, progress, done, total)
        out[path.relative_to(folder).as_posix()] = [size, sha]
    return out


def _tables_in(folder: Path) -> list[str]:
    return sorted(p.stem for p in (folder / "metadata" / "default").glob("*.sql"))


def take_backup(warehouse: ClickHouseWarehouse, dest: Path, *, progress: Progress = _no_progress) -> dict[str, Any]:
    """Back the embedded store up into `dest` (from `resolve_destination`, and inside the
    folder the warehouse was opened with as `backup_dir`); the manifest. Blocking: call it
    from a worker thread. A failed backup leaves no folder behind."""
    if not warehouse.dsn.embedded:
        raise BackupError(
            "footfall backup covers the embedded store; back a ClickHouse server up with its own"
            " BACKUP … TO Disk/S3 (see the README, Operations)",
            501,
        )
    if not _SAFE_PATH.match(str(dest)):
        raise BackupError(f"unusable backup folder name: {dest}")
    started = datetime.now(UTC)
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        progress("copying tables", 0, 1)
        # The path is checked above (inside the allowed folder, no quote): File() binds no parameter.
        warehouse.command(f"BACKUP DATABASE default TO File('{dest}')")
        progress("copying tables", 1, 1)
        os.chmod(dest, 0o700)  # hashed credentials and every event: the owner's eyes only
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "schema_version": store_schema_version(warehouse),
            "created_at": started.isoformat(),
            "tables": _tables_in(dest),
            "files": _hash_all(dest, _files(dest), progress),
        }
        _write_manifest(dest, manifest)
    except WarehouseError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise BackupError(f"the warehouse refused the backup: {str(exc).strip().splitlines()[0][:300]}", 503) from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    manifest["path"] = str(dest)
    manifest["bytes"] = sum(size for size, _ in manifest["files"].values())
    return manifest


def _write_manifest(dest: Path, manifest: dict[str, Any]) -> None:
    partial = dest / (MANIFEST + ".partial")
    partial.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    os.replace(partial, dest / MANIFEST)


def verify(src: Path, *, progress: Progress = _no_progress) -> dict[str, Any]:
    """The manifest of the backup in `src` if every file is as the backup wrote it; else
    BackupError naming the first difference."""
    if not src.is_dir():
        raise BackupError(f"{src} is not a backup folder")
    try:
        manifest = orjson.loads((src / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise BackupError(f"{src} has no {MANIFEST}: not a Footfall backup, or an unfinished one") from None
    except orjson.JSONDecodeError:
        raise BackupError(f"{src / MANIFEST} is damaged (not JSON)") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("files"), dict)
    ):
        raise BackupError(f"{src / MANIFEST} is damaged or of an unknown format")
    listed: dict[str, Any] = manifest["files"]
    present = {p.relative_to(src).as_posix(): p for p in _files(src)}
    missing = sorted(set(listed) - set(present))
    if missing:
        raise BackupError(f"the backup is damaged: {missing[0]} is missing ({len(missing)} file(s) in all)")
    extra = sorted(set(present) - set(listed))
    if extra:
        raise BackupError(f"the backup is damaged: {extra[0]} is not part of it")
    total = sum(int(size) for size, _ in listed.values())
    done = 0
    for name, (size, sha) in sorted(listed.items()):
        path = present[name]
        if path.stat().st_size != size:
            raise BackupError(f"the backup is damaged: {name} has {path.stat().st_size} bytes, not {size}")
        actual, done = _sha256(path, progress, done, total)
        if actual != sha:
            raise BackupError(f"the backup is damaged: {name} differs from the file the backup wrote")
    return dict(manifest)


def restore(src: Path, data_dir: Path, *, progress: Progress = _no_progress) -> dict[str, Any]:
    """Restore the backup in `src` into the data folder `data_dir` (absent or empty). The
    store is built in a hidden sibling and renamed into place only when it is complete and
    checked; on any refusal or failure nothing is left behind. Opens chDB in this process:
    call it where no other store is open (the `footfall restore` command)."""
    src, data_dir = src.resolve(), data_dir.resolve()
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise BackupError(f"{data_dir} is not empty: restore into a new or empty folder")
    if not _SAFE_PATH.match(str(src)):
        raise BackupError(f"unusable backup folder name: {src}")
    manifest = verify(src, progress=progress)
    release = release_schema_version()
    if int(manifest.get("schema_version", 0)) > release:
        raise BackupError(
            f"the backup has schema version {manifest['schema_version']}, newer than this release's {release}"
        )
    staging = data_dir.parent / f".{data_dir.name}.restoring-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700, parents=True)
    try:
        warehouse = ClickHouseWarehouse(Dsn(scheme="chdb", path=str(staging / "chdb")), backup_dir=str(src.parent))
        try:
            progress("restoring tables", 0, 1)
            warehouse.command(f"RESTORE DATABASE default FROM File('{src}')")
            progress("restoring tables", 1, 1)
            _check_restored(warehouse, manifest)
            _rebuild_views(warehouse, progress)
        finally:
            warehouse.close()
        if data_dir.exists():
            data_dir.rmdir()
        os.replace(staging, data_dir)
    except WarehouseError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BackupError(f"the backup could not be restored: {str(exc).strip().splitlines()[0][:300]}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _check_restored(warehouse: Warehouse, manifest: dict[str, Any]) -> None:
    rows = warehouse.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
    restored = sorted(str(r[0]) for r in rows)
    wanted = sorted(str(t) for t in manifest.get("tables", []))
    if restored != wanted:
        lost = sorted(set(wanted) - set(restored))
        raise BackupError(f"the restored store lacks table(s) {', '.join(lost) or '?'}: refused")
    version = store_schema_version(warehouse)
    if version != int(manifest.get("schema_version", -1)):
        raise BackupError(f"the restored store has schema version {version}, the manifest says otherwise: refused")


_TARGET = re.compile(r"\bTO\s+([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)")


_REBUILD_SETTINGS = {"max_bytes_before_external_group_by": 1 << 30}  # a big store's aggregation spills to disk


def _rebuild_views(warehouse: ClickHouseWarehouse, progress: Progress) -> None:
    """Fill each materialised view's target afresh from its source, with the view's own
    SELECT as the engine stores it (no user text reaches it)."""
    views = warehouse.query(
        "SELECT name, as_select, create_table_query FROM system.tables"
        " WHERE database = currentDatabase() AND engine = 'MaterializedView' ORDER BY name"
    )
    for done, (_name, select, create) in enumerate(views):
        match = _TARGET.search(str(create))
        if match is None:
            continue
        target = f"{match.group(1)}.{match.group(2)}"
        warehouse.command(f"TRUNCATE TABLE {target}")
        warehouse.execute_command(f"INSERT INTO {target} {select}", None, _REBUILD_SETTINGS)
        progress("rebuilding views", done + 1, len(views))


_EVERYTHING = Scope(1, datetime(1970, 1, 1, tzinfo=UTC), datetime(2300, 1, 1, tzinfo=UTC))


def store_status(warehouse: Warehouse, repo: MetadataStore) -> dict[str, Any]:
    """What an operator reads: the store's size per table, and per project its events, an
    estimate of its share of the store and the time of its last insert. Blocking."""
    parts = warehouse.query(
        "SELECT table, sum(bytes_on_disk), sum(rows) FROM system.parts"
        " WHERE active AND database = currentDatabase() GROUP BY table ORDER BY table"
    )
    tables = {str(t): {"bytes": int(b), "rows": int(r)} for t, b, r in parts}
    total_bytes = sum(t["bytes"] for t in tables.values())
    projects = []
    counts: list[tuple[int, str, int, datetime | None]] = []
    for project in sorted(repo.list_projects(), key=lambda p: p.project_id):
        binds = Params()
        scope = Scope(project.project_id, _EVERYTHING.start, _EVERYTHING.end)
        # FINAL: a duplicate the merges have not folded yet counts once, as in every report.
        text = render(sql("SELECT count(), max(ingested_at) FROM {}", source(EVENTS, scope, binds, final=True)))
        count, last = warehouse.query(text, binds.values)[0]
        counts.append((project.project_id, project.name, int(count), last if int(count) else None))
    stored = sum(c for _, _, c, _ in counts) or 1
    event_bytes = sum(v["bytes"] for k, v in tables.items() if k in ("events", "event_counts_15m", "known_ids"))
    for project_id, name, count, last in counts:
        projects.append(
            {
                "project_id": project_id,
                "name": name,
                "events": count,
                "bytes_estimate": event_bytes * count // stored,
                "last_insert": last.astimezone(UTC).isoformat() if isinstance(last, datetime) else None,
            }
        )
    return {
        "schema_version": store_schema_version(warehouse),
        "release_schema_version": release_schema_version(),
        "store_bytes": total_bytes,
        "tables": tables,
        "projects": projects,
    }
