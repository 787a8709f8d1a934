"""Where jobs live: the warehouse table `migration_jobs` (m0014) and an in-memory twin.

Every write is a new version of the job's row (ReplacingMergeTree by `updated_at`, strictly
increasing per job); reads use FINAL through the SQL layer's project-scoped source, so a store
call sees one project. Source credentials are stored Fernet-encrypted beside the record while the
job can still run or be resumed, and erased (an empty `secret`) once it succeeded.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import orjson
from cryptography.fernet import Fernet, InvalidToken

from footfall.services.migrate.model import Job
from footfall.shared.schema.catalog import MIGRATION_JOBS
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse import Warehouse

__all__ = ["Cipher", "JobStore", "MemoryJobStore", "WarehouseJobStore", "load_cipher"]

KEY_FILE = "migrate.key"


class Cipher:
    """Encrypts the source credentials of a job (a Fernet key: AES-128-CBC + HMAC-SHA256)."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    def seal(self, credentials: dict[str, Any]) -> str:
        return self._fernet.encrypt(orjson.dumps(credentials)).decode()

    def open(self, sealed: str) -> dict[str, Any] | None:
        if not sealed:
            return None
        try:
            value = orjson.loads(self._fernet.decrypt(sealed.encode()))
        except (InvalidToken, orjson.JSONDecodeError):
            return None
        return value if isinstance(value, dict) else None


def load_cipher(key: str, data_dir: Path) -> Cipher:
    """`FOOTFALL_MIGRATE_KEY`, else `<data>/migrate.key` (created once, mode 0600)."""
    if key:
        return Cipher(key.encode())
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(Fernet.generate_key())
    return Cipher(path.read_bytes().strip())


class JobStore(Protocol):
    """Blocking (run it through the warehouse's runner)."""

    def save(self, job: Job, sealed: str | None) -> None:
        """A new version of `job`; `sealed` None keeps the stored credentials, "" erases them."""
        ...

    def get(self, project_id: int, job_id: str) -> tuple[Job, str] | None: ...

    def of_project(self, project_id: int) -> list[Job]: ...


def _later(previous: datetime | None) -> datetime:
    now = datetime.now(UTC)
    return now if previous is None else max(now, previous + timedelta(microseconds=1))


@dataclass
class MemoryJobStore:
    rows: dict[tuple[int, str], tuple[Job, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def save(self, job: Job, sealed: str | None) -> None:
        with self.lock:
            old = self.rows.get((job.project_id, job.id))
            kept = sealed if sealed is not None else (old[1] if old else "")
            self.rows[(job.project_id, job.id)] = (Job.from_record(job.record()), kept)

    def get(self, project_id: int, job_id: str) -> tuple[Job, str] | None:
        with self.lock:
            found = self.rows.get((project_id, job_id))
            return None if found is None else (Job.from_record(found[0].record()), found[1])

    def of_project(self, project_id: int) -> list[Job]:
        with self.lock:
            return [Job.from_record(j.record()) for (p, _), (j, _) in sorted(self.rows.items()) if p == project_id]


class WarehouseJobStore:
    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self._versions: dict[str, datetime] = {}
        self._lock = threading.RLock()

    def _select(self, project_id: int, job_id: str | None) -> list[tuple[Any, ...]]:
        binds = Params()
        keys = sql("job_id = {}", binds.add(job_id, "String")) if job_id is not None else None
        rows = source(MIGRATION_JOBS, Scope(project_id), binds, final=True, keys=keys)
        text = sql("SELECT record, secret, updated_at FROM {} ORDER BY job_id", rows)
        return self.warehouse.query(render(text), binds.values)

    def save(self, job: Job, sealed: str | None) -> None:
        with self._lock:
            if sealed is None:
                found = self.get(job.project_id, job.id)
                sealed = found[1] if found else ""
            version = _later(self._versions.get(job.id))
            self._versions[job.id] = version
            self.warehouse.insert(
                MIGRATION_JOBS.name,
                MIGRATION_JOBS.column_names,
                [[job.project_id, job.id, job.state, orjson.dumps(job.record()).decode(), sealed, version]],
            )

    def get(self, project_id: int, job_id: str) -> tuple[Job, str] | None:
        rows = self._select(project_id, job_id)
        if not rows:
            return None
        record, secret, updated_at = rows[0]
        with self._lock:
            at = updated_at if updated_at.tzinfo else updated_at.replace(tzinfo=UTC)
            self._versions[job_id] = max(self._versions.get(job_id, at), at)
        return Job.from_record(orjson.loads(record)), str(secret)

    def of_project(self, project_id: int) -> list[Job]:
        return [Job.from_record(orjson.loads(r[0])) for r in self._select(project_id, None)]
