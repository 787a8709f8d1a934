"""The metadata store: the warehouse tables of m0002/m0009 (`MetadataRepository`) and its protocol.

Small ReplacingMergeTree tables versioned by `updated_at`: a change is a new row, reads use
FINAL and skip rows marked `deleted`, so an id is never reused. The tables are global (not
tenant tables) and small: they are read whole and filtered here, never with a hand-written
project clause. Secrets and tokens are stored only as hashes (`shared.credentials`).

Writes that read before they write (the next id, a username's uniqueness) are serialised by
the callers (`footfall.services.app.operations` holds one process-wide lock); two processes
writing metadata at the same instant could still hand out one id twice, so run management
writes through one process, as for cohorts (`footfall.shared.cohorts.store`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

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
from footfall.shared.warehouse.client import Warehouse

__all__ = ["CREDENTIAL_KINDS", "MetadataRepository", "MetadataStore", "now"]

CREDENTIAL_KINDS = ("token", "secret")

_PROJECT_COLUMNS = [
    "project_id",
    "name",
    "timezone",
    "created_at",
    "updated_at",
    "deleted",
    "organization_id",
    "region",
]
_ACCOUNT_COLUMNS = [
    "sa_id",
    "organization_id",
    "username",
    "secret_hash",
    "created_at",
    "expires_at",
    "updated_at",
    "deleted",
    "creator",
]
_CREDENTIAL_COLUMNS = ["project_id", "kind", "lookup", "secret_hash", "created_at", "updated_at", "deleted"]
_MEMBER_COLUMNS = ["sa_id", "project_id", "role", "updated_at", "deleted"]


def now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class MetadataStore(Protocol):
    """Projects, their credentials, service accounts and their roles. Both implementations
    (`MetadataRepository` over the warehouse, `MemoryMetadataStore`) validate the same way."""

    def list_projects(self) -> list[Project]: ...

    def get_project(self, project_id: int) -> Project | None: ...

    def create_project(
        self,
        name: str,
        timezone: str = "UTC",
        project_id: int | None = None,
        *,
        organization_id: int = DEFAULT_ORGANIZATION,
        region: str = "",
    ) -> Project: ...

    def update_project(self, project: Project) -> None:
        """Store a project's new name and time zone (id, organization and region never change)."""
        ...

    def add_project_credential(self, project_id: int, kind: str, value: str) -> None: ...

    def revoke_project_credential(self, project_id: int, kind: str, value: str) -> None: ...

    def replace_project_credentials(self, project_id: int, kind: str, value: str) -> None:
        """Make `value` the project's only live credential of `kind` (rotation)."""
        ...

    def create_service_account(
        self,
        username: str,
        secret: str,
        *,
        organization_id: int = DEFAULT_ORGANIZATION,
        sa_id: int | None = None,
        expires_at: datetime | None = None,
        creator: int | None = None,
    ) -> int: ...

    def get_service_account(self, sa_id: int) -> AccountRecord | None: ...

    def list_service_accounts(self, organization_id: int | None = None) -> list[AccountRecord]: ...

    def delete_service_account(self, sa_id: int) -> bool:
        """Remove the account from every project and the organization; False when unknown."""
        ...

    def grant(self, sa_id: int, project_id: int, role: str) -> None: ...

    def revoke(self, sa_id: int, project_id: int) -> None: ...

    def record_usage(self, used: Mapping[int, datetime]) -> None: ...

    def load_directory(self) -> Directory: ...


class MetadataRepository:
    """`MetadataStore` over the warehouse tables."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    # -- projects -------------------------------------------------------------------
    def next_project_id(self) -> int:
        rows = self.warehouse.query("SELECT max(project_id) FROM projects FINAL")
        return int(rows[0][0] or 0) + 1

    def _project_rows(self) -> list[tuple[Any, ...]]:
        return self.warehouse.query(
            "SELECT project_id, name, timezone, region, organization_id, created_at FROM projects FINAL "
            "WHERE deleted = 0 ORDER BY project_id"
        )

    def list_projects(self) -> list[Project]:
        return [Project(int(r[0]), r[1], r[2], r[3], int(r[4])) for r in self._project_rows()]

    def get_project(self, project_id: int) -> Project | None:
        return next((p for p in self.list_projects() if p.project_id == project_id), None)

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
        pid = project_id if project_id is not None else self.next_project_id()
        moment = now()
        self.warehouse.insert(
            "projects", _PROJECT_COLUMNS, [[pid, name, timezone, moment, moment, 0, organization_id, region]]
        )
        return Project(pid, name, timezone, region, organization_id)

    def update_project(self, project: Project) -> None:
        check_name(project.name)
        check_timezone(project.timezone)
        created = next((r[5] for r in self._project_rows() if int(r[0]) == project.project_id), None)
        if created is None:
            raise MetadataError(f"project {project.project_id} does not exist")
        self.warehouse.insert(
            "projects",
            _PROJECT_COLUMNS,
            [
                [
                    project.project_id,
                    project.name,
                    project.timezone,
                    created,
                    now(),
                    0,
                    project.organization_id,
                    project.region,
                ]
            ],
        )

    # -- project credentials ----------------------------------------------------------
    def _credential_row(self, project_id: int, kind: str, lookup: str, deleted: int) -> list[Any]:
        moment = now()
        return [project_id, kind, lookup, "", moment, moment, deleted]

    def add_project_credential(self, project_id: int, kind: str, value: str) -> None:
        if kind not in CREDENTIAL_KINDS:
            raise MetadataError(f"unknown credential kind {kind!r}")
        row = self._credential_row(project_id, kind, credentials.lookup_key(value), 0)
        self.warehouse.insert("project_credentials", _CREDENTIAL_COLUMNS, [row])

    def revoke_project_credential(self, project_id: int, kind: str, value: str) -> None:
        row = self._credential_row(project_id, kind, credentials.lookup_key(value), 1)
        self.warehouse.insert("project_credentials", _CREDENTIAL_COLUMNS, [row])

    def replace_project_credentials(self, project_id: int, kind: str, value: str) -> None:
        if kind not in CREDENTIAL_KINDS:
            raise MetadataError(f"unknown credential kind {kind!r}")
        live = [
            lookup
            for pid, k, lookup in self.warehouse.query(
                "SELECT project_id, kind, lookup FROM project_credentials FINAL WHERE deleted = 0"
            )
            if int(pid) == project_id and k == kind
        ]
        new = credentials.lookup_key(value)
        rows = [self._credential_row(project_id, kind, lookup, 1) for lookup in live if lookup != new]
        rows.append(self._credential_row(project_id, kind, new, 0))
        self.warehouse.insert("project_credentials", _CREDENTIAL_COLUMNS, rows)

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
        if sa_id is None:
            rows = self.warehouse.query("SELECT max(sa_id) FROM service_accounts FINAL")
            sa_id = int(rows[0][0] or 0) + 1
        moment = now()
        row = [
            sa_id,
            organization_id,
            username,
            credentials.hash_secret(secret),
            moment,
            _utc(expires_at),
            moment,
            0,
            creator,
        ]
        self.warehouse.insert("service_accounts", _ACCOUNT_COLUMNS, [row])
        return sa_id

    def _account_rows(self, sa_id: int | None = None) -> list[tuple[Any, ...]]:
        query = (
            "SELECT sa_id, organization_id, username, secret_hash, created_at, expires_at, creator "
            "FROM service_accounts FINAL WHERE deleted = 0"
        )
        if sa_id is None:
            return self.warehouse.query(query + " ORDER BY sa_id")
        return self.warehouse.query(query + " AND sa_id = {sa:UInt64}", {"sa": sa_id})

    def _roles(self, projects: set[int] | None = None) -> dict[int, dict[int, str]]:
        if projects is None:
            projects = {p.project_id for p in self.list_projects()}
        roles: dict[int, dict[int, str]] = {}
        for sa_id, pid, role in self.warehouse.query(
            "SELECT sa_id, project_id, role FROM service_account_projects FINAL WHERE deleted = 0"
        ):
            if int(pid) in projects:
                roles.setdefault(int(sa_id), {})[int(pid)] = role
        return roles

    def _usage(self) -> dict[int, datetime]:
        rows = self.warehouse.query("SELECT sa_id, max(last_used) FROM service_account_usage GROUP BY sa_id")
        return {int(sa_id): used for sa_id, used in rows if used is not None}

    def _records(self, rows: list[tuple[Any, ...]]) -> list[AccountRecord]:
        if not rows:
            return []
        roles, usage = self._roles(), self._usage()
        return [
            AccountRecord(
                sa_id=int(r[0]),
                organization_id=int(r[1]),
                username=r[2],
                created_at=_utc(r[4]) or now(),
                expires_at=_utc(r[5]),
                creator=None if r[6] is None else int(r[6]),
                last_used=_utc(usage.get(int(r[0]))),
                roles=roles.get(int(r[0]), {}),
            )
            for r in rows
        ]

    def get_service_account(self, sa_id: int) -> AccountRecord | None:
        found = self._records(self._account_rows(sa_id))
        return found[0] if found else None

    def list_service_accounts(self, organization_id: int | None = None) -> list[AccountRecord]:
        records = self._records(self._account_rows())
        return [r for r in records if organization_id is None or r.organization_id == organization_id]

    def delete_service_account(self, sa_id: int) -> bool:
        rows = self._account_rows(sa_id)
        if not rows:
            return False
        sa, org, username, secret_hash, created, expires, creator = rows[0]
        for project_id in self._roles().get(sa_id, {}):
            self.revoke(sa_id, project_id)
        row = [sa, org, username, secret_hash, created, expires, now(), 1, creator]
        self.warehouse.insert("service_accounts", _ACCOUNT_COLUMNS, [row])
        return True

    def grant(self, sa_id: int, project_id: int, role: str) -> None:
        check_role(role)
        self.warehouse.insert("service_account_projects", _MEMBER_COLUMNS, [[sa_id, project_id, role, now(), 0]])

    def revoke(self, sa_id: int, project_id: int) -> None:
        self.warehouse.insert("service_account_projects", _MEMBER_COLUMNS, [[sa_id, project_id, "", now(), 1]])

    def record_usage(self, used: Mapping[int, datetime]) -> None:
        if used:
            rows = [[sa_id, _utc(moment)] for sa_id, moment in used.items()]
            self.warehouse.insert("service_account_usage", ["sa_id", "last_used"], rows)

    # -- snapshot ---------------------------------------------------------------------
    def load_directory(self) -> Directory:
        projects = {p.project_id: p for p in self.list_projects()}
        tokens: dict[str, int] = {}
        secrets: dict[str, int] = {}
        for pid, kind, lookup in self.warehouse.query(
            "SELECT project_id, kind, lookup FROM project_credentials FINAL WHERE deleted = 0"
        ):
            if int(pid) in projects:
                (tokens if kind == "token" else secrets)[lookup] = int(pid)
        roles = self._roles(set(projects))
        accounts = {}
        for sa_id, org, username, secret_hash, _created, expires, _creator in self._account_rows():
            expires_ms = None if expires is None else to_ms(expires)
            accounts[username] = ServiceAccount(
                int(sa_id), int(org), username, secret_hash, roles.get(int(sa_id), {}), expires_ms
            )
        return Directory(projects=projects, tokens=tokens, secrets=secrets, accounts=accounts)
