"""`MemoryMetadataStore`: the in-memory twin of `MetadataRepository` (unit tests, tools).

Same validation, same id rules (ids never reused, deleted rows kept as tombstones), same
directory; nothing leaves the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from footfall.shared import credentials
from footfall.shared.metadata.model import (
    DEFAULT_ORGANIZATION,
    AccountRecord,
    Directory,
    MetadataError,
    Project,
    ServiceAccount,
    check_name,
    check_role,
    check_timezone,
    check_username,
    to_ms,
)
from footfall.shared.metadata.store import CREDENTIAL_KINDS, now

__all__ = ["MemoryMetadataStore"]


@dataclass(frozen=True)
class _Account:
    record: AccountRecord
    secret_hash: str
    deleted: bool = False


class MemoryMetadataStore:
    """`MetadataStore` in memory. `hash_secret` may be replaced to keep tests fast."""

    def __init__(self, *, hash_secret: Callable[[str], str] | None = None) -> None:
        self._projects: dict[int, Project] = {}
        self._deleted_projects: set[int] = set()
        self._credentials: dict[tuple[int, str, str], bool] = {}  # (project, kind, lookup) -> live
        self._accounts: dict[int, _Account] = {}
        self._roles: dict[tuple[int, int], str] = {}
        self._usage: dict[int, datetime] = {}
        self._hash = hash_secret or credentials.hash_secret
        self._lock = threading.Lock()

    # -- projects -------------------------------------------------------------------
    def list_projects(self) -> list[Project]:
        return [self._projects[k] for k in sorted(self._projects)]

    def get_project(self, project_id: int) -> Project | None:
        return self._projects.get(project_id)

    def create_project(
        self,
        name: str,
        timezone: str = "UTC",
        project_id: int | None = None,
        *,
        organization_id: int = DEFAULT_ORGANIZATION,
        region: str = "",
    ) -> Project:
        check_name(name)
        check_timezone(timezone)
        with self._lock:
            pid = project_id if project_id is not None else max([0, *self._projects, *self._deleted_projects]) + 1
            project = Project(pid, name, timezone, region, organization_id)
            self._projects[pid] = project
        return project

    def update_project(self, project: Project) -> None:
        check_name(project.name)
        check_timezone(project.timezone)
        if project.project_id not in self._projects:
            raise MetadataError(f"project {project.project_id} does not exist")
        self._projects[project.project_id] = project

    # -- project credentials ----------------------------------------------------------
    def add_project_credential(self, project_id: int, kind: str, value: str) -> None:
        if kind not in CREDENTIAL_KINDS:
            raise MetadataError(f"unknown credential kind {kind!r}")
        self._credentials[(project_id, kind, credentials.lookup_key(value))] = True

    def revoke_project_credential(self, project_id: int, kind: str, value: str) -> None:
        self._credentials[(project_id, kind, credentials.lookup_key(value))] = False

    def replace_project_credentials(self, project_id: int, kind: str, value: str) -> None:
        if kind not in CREDENTIAL_KINDS:
            raise MetadataError(f"unknown credential kind {kind!r}")
        for key in list(self._credentials):
            if key[0] == project_id and key[1] == kind:
                self._credentials[key] = False
        self._credentials[(project_id, kind, credentials.lookup_key(value))] = True

    # -- service accounts -------------------------------------------------------------
    def create_service_account(
        self,
        username: str,
        secret: str,
        *,
        organization_id: int = DEFAULT_ORGANIZATION,
        sa_id: int | None = None,
        expires_at: datetime | None = None,
        creator: int | None = None,
    ) -> int:
        check_username(username)
        secret_hash = self._hash(secret)
        with self._lock:
            sa_id = sa_id if sa_id is not None else max([0, *self._accounts]) + 1
            if expires_at is not None and expires_at.tzinfo is None:
                expires_at = expires_at.replace(tzinfo=UTC)
            record = AccountRecord(sa_id, organization_id, username, now(), expires_at, creator)
            self._accounts[sa_id] = _Account(record, secret_hash)
        return sa_id

    def _live_roles(self, sa_id: int) -> dict[int, str]:
        return {pid: role for (sa, pid), role in sorted(self._roles.items()) if sa == sa_id and pid in self._projects}

    def _record(self, account: _Account) -> AccountRecord:
        sa_id = account.record.sa_id
        return replace(account.record, roles=self._live_roles(sa_id), last_used=self._usage.get(sa_id))

    def get_service_account(self, sa_id: int) -> AccountRecord | None:
        account = self._accounts.get(sa_id)
        if account is None or account.deleted:
            return None
        return self._record(account)

    def list_service_accounts(self, organization_id: int | None = None) -> list[AccountRecord]:
        return [
            self._record(a)
            for _, a in sorted(self._accounts.items())
            if not a.deleted and (organization_id is None or a.record.organization_id == organization_id)
        ]

    def delete_service_account(self, sa_id: int) -> bool:
        account = self._accounts.get(sa_id)
        if account is None or account.deleted:
            return False
        for key in [k for k in self._roles if k[0] == sa_id]:
            del self._roles[key]
        self._accounts[sa_id] = replace(account, deleted=True)
        return True

    def grant(self, sa_id: int, project_id: int, role: str) -> None:
        check_role(role)
        self._roles[(sa_id, project_id)] = role

    def revoke(self, sa_id: int, project_id: int) -> None:
        self._roles.pop((sa_id, project_id), None)

    def record_usage(self, used: Mapping[int, datetime]) -> None:
        for sa_id, moment in used.items():
            if sa_id not in self._usage or self._usage[sa_id] < moment:
                self._usage[sa_id] = moment

    # -- snapshot ---------------------------------------------------------------------
    def load_directory(self) -> Directory:
        tokens: dict[str, int] = {}
        secrets: dict[str, int] = {}
        for (pid, kind, lookup), live in self._credentials.items():
            if live and pid in self._projects:
                (tokens if kind == "token" else secrets)[lookup] = pid
        accounts = {}
        for sa_id, account in sorted(self._accounts.items()):
            if account.deleted:
                continue
            r = account.record
            expires = None if r.expires_at is None else to_ms(r.expires_at)
            accounts[r.username] = ServiceAccount(
                sa_id, r.organization_id, r.username, account.secret_hash, self._live_roles(sa_id), expires
            )
        return Directory(projects=dict(self._projects), tokens=tokens, secrets=secrets, accounts=accounts)
