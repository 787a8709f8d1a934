"""Projects, credentials and service accounts: the warehouse tables and an in-memory snapshot.

`Directory` is an immutable snapshot that the request path reads (no warehouse round
trip per request); `MetadataRepository` writes the tables and loads snapshots. The
snapshot is plain data (`to_dict`/`from_dict`) so that the distributed gateway can
receive it over a channel that survives a ClickHouse outage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from footfall.shared import credentials
from footfall.shared.errors import ParamError
from footfall.shared.warehouse.client import Warehouse


class MetadataError(ParamError):
    """A metadata change that cannot be made (unknown zone or role, bad username): 400."""


@dataclass(frozen=True)
class Project:
    project_id: int
    name: str
    timezone: str


@dataclass(frozen=True)
class ServiceAccount:
    sa_id: int
    organization_id: int
    username: str
    secret_hash: str
    roles: dict[int, str] = field(default_factory=dict)  # project_id -> role


@dataclass(frozen=True)
class Directory:
    """What the request path needs to authenticate and scope a request."""

    projects: dict[int, Project] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # lookup_key(token) -> project_id
    secrets: dict[str, int] = field(default_factory=dict)  # lookup_key(secret) -> project_id
    accounts: dict[str, ServiceAccount] = field(default_factory=dict)  # username -> account

    def to_dict(self) -> dict[str, Any]:
        return {
            "projects": [[p.project_id, p.name, p.timezone] for p in self.projects.values()],
            "tokens": self.tokens,
            "secrets": self.secrets,
            "accounts": [
                [a.sa_id, a.organization_id, a.username, a.secret_hash, {str(k): v for k, v in a.roles.items()}]
                for a in self.accounts.values()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Directory:
        return cls(
            projects={int(p[0]): Project(int(p[0]), p[1], p[2]) for p in data["projects"]},
            tokens={k: int(v) for k, v in data["tokens"].items()},
            secrets={k: int(v) for k, v in data["secrets"].items()},
            accounts={
                a[2]: ServiceAccount(int(a[0]), int(a[1]), a[2], a[3], {int(k): v for k, v in a[4].items()})
                for a in data["accounts"]
            },
        )


def check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise MetadataError(f"unknown time zone {name!r}") from None
    return name


def _now() -> datetime:
    return datetime.now(UTC)


class MetadataRepository:
    """Reads and writes the metadata tables of `m0002_metadata`."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    # -- projects -------------------------------------------------------------------
    def next_project_id(self) -> int:
        rows = self.warehouse.query("SELECT max(project_id) FROM projects FINAL")
        return int(rows[0][0] or 0) + 1

    def create_project(self, name: str, timezone: str = "UTC", project_id: int | None = None) -> Project:
        check_timezone(timezone)
        pid = project_id if project_id is not None else self.next_project_id()
        now = _now()
        self.warehouse.insert(
            "projects",
            ["project_id", "name", "timezone", "created_at", "updated_at", "deleted"],
            [[pid, name, timezone, now, now, 0]],
        )
        return Project(pid, name, timezone)

    def list_projects(self) -> list[Project]:
        rows = self.warehouse.query(
            "SELECT project_id, name, timezone FROM projects FINAL WHERE deleted = 0 ORDER BY project_id"
        )
        return [Project(int(r[0]), r[1], r[2]) for r in rows]

    # -- project credentials ----------------------------------------------------------
    def add_project_credential(self, project_id: int, kind: str, value: str) -> None:
        if kind not in ("token", "secret"):
            raise MetadataError(f"unknown credential kind {kind!r}")
        now = _now()
        self.warehouse.insert(
            "project_credentials",
            ["project_id", "kind", "lookup", "secret_hash", "created_at", "updated_at", "deleted"],
            [[project_id, kind, credentials.lookup_key(value), "", now, now, 0]],
        )

    def revoke_project_credential(self, project_id: int, kind: str, value: str) -> None:
        now = _now()
        self.warehouse.insert(
            "project_credentials",
            ["project_id", "kind", "lookup", "secret_hash", "created_at", "updated_at", "deleted"],
            [[project_id, kind, credentials.lookup_key(value), "", now, now, 1]],
        )

    # -- service accounts -------------------------------------------------------------
    def create_service_account(
        self, username: str, secret: str, *, organization_id: int = 1, sa_id: int | None = None
    ) -> int:
        if not username or ":" in username:
            raise MetadataError("a service-account username must be non-empty and contain no ':'")
        if sa_id is None:
            rows = self.warehouse.query("SELECT max(sa_id) FROM service_accounts FINAL")
            sa_id = int(rows[0][0] or 0) + 1
        now = _now()
        self.warehouse.insert(
            "service_accounts",
            [
                "sa_id",
                "organization_id",
                "username",
                "secret_hash",
                "created_at",
                "expires_at",
                "updated_at",
                "deleted",
            ],
            [[sa_id, organization_id, username, credentials.hash_secret(secret), now, None, now, 0]],
        )
        return sa_id

    def grant(self, sa_id: int, project_id: int, role: str) -> None:
        if role not in credentials.Role.ALL:
            raise MetadataError(f"unknown role {role!r} (one of {', '.join(credentials.Role.ALL)})")
        self.warehouse.insert(
            "service_account_projects",
            ["sa_id", "project_id", "role", "updated_at", "deleted"],
            [[sa_id, project_id, role, _now(), 0]],
        )

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
        roles: dict[int, dict[int, str]] = {}
        for sa_id, pid, role in self.warehouse.query(
            "SELECT sa_id, project_id, role FROM service_account_projects FINAL WHERE deleted = 0"
        ):
            if int(pid) in projects:
                roles.setdefault(int(sa_id), {})[int(pid)] = role
        accounts = {}
        for sa_id, org, username, secret_hash in self.warehouse.query(
            "SELECT sa_id, organization_id, username, secret_hash FROM service_accounts FINAL "
            "WHERE deleted = 0 AND (expires_at IS NULL OR expires_at > now64(3))"
        ):
            accounts[username] = ServiceAccount(int(sa_id), int(org), username, secret_hash, roles.get(int(sa_id), {}))
        return Directory(projects=projects, tokens=tokens, secrets=secrets, accounts=accounts)
