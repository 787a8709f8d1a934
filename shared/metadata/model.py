"""The metadata model: projects, service accounts and the `Directory` snapshot the request path reads.

`Directory` is immutable plain data (`to_dict` / `from_dict`), so the distributed gateway can
receive it over the compacted Kafka directory topic. The serialised form only grows by appending
members to its lists: a snapshot from an older publisher (without regions, organizations or
expiry) still loads, with the defaults below.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from footfall.shared.credentials import Role
from footfall.shared.errors import ParamError

__all__ = [
    "DEFAULT_ORGANIZATION",
    "MAX_NAME_LENGTH",
    "AccountRecord",
    "Directory",
    "MetadataError",
    "Project",
    "ServiceAccount",
    "check_name",
    "check_role",
    "check_timezone",
    "check_username",
    "to_ms",
]

DEFAULT_ORGANIZATION = 1  # a deployment starts with organization 1 (semantics-2 §17.1)
MAX_NAME_LENGTH = 255


class MetadataError(ParamError):
    """A metadata change that cannot be made (unknown zone or role, bad username): 400."""


@dataclass(frozen=True)
class Project:
    project_id: int
    name: str
    timezone: str
    region: str = ""  # "" = created before regions existed: it belongs to the deployment that holds it
    organization_id: int = DEFAULT_ORGANIZATION


@dataclass(frozen=True)
class ServiceAccount:
    """What authentication needs of a service account (hashes only)."""

    sa_id: int
    organization_id: int
    username: str
    secret_hash: str
    roles: dict[int, str] = field(default_factory=dict)  # project_id -> role
    expires_at_ms: int | None = None  # checked on every request

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms


@dataclass(frozen=True)
class AccountRecord:
    """A stored service account as the management interface shows it (no secret hash)."""

    sa_id: int
    organization_id: int
    username: str
    created_at: datetime
    expires_at: datetime | None = None
    creator: int | None = None
    last_used: datetime | None = None
    roles: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Directory:
    """What the request path needs to authenticate and scope a request."""

    projects: dict[int, Project] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # lookup_key(token) -> project_id
    secrets: dict[str, int] = field(default_factory=dict)  # lookup_key(secret) -> project_id
    accounts: dict[str, ServiceAccount] = field(default_factory=dict)  # username -> account

    def to_dict(self) -> dict[str, Any]:
        return {
            "projects": [
                [p.project_id, p.name, p.timezone, p.region, p.organization_id] for p in self.projects.values()
            ],
            "tokens": self.tokens,
            "secrets": self.secrets,
            "accounts": [
                [
                    a.sa_id,
                    a.organization_id,
                    a.username,
                    a.secret_hash,
                    {str(k): v for k, v in a.roles.items()},
                    a.expires_at_ms,
                ]
                for a in self.accounts.values()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Directory:
        def project(p: list[Any]) -> Project:
            region = str(p[3]) if len(p) > 3 else ""
            organization = int(p[4]) if len(p) > 4 else DEFAULT_ORGANIZATION
            return Project(int(p[0]), p[1], p[2], region, organization)

        def account(a: list[Any]) -> ServiceAccount:
            expires = int(a[5]) if len(a) > 5 and a[5] is not None else None
            roles = {int(k): v for k, v in a[4].items()}
            return ServiceAccount(int(a[0]), int(a[1]), a[2], a[3], roles, expires)

        return cls(
            projects={int(p[0]): project(p) for p in data["projects"]},
            tokens={k: int(v) for k, v in data["tokens"].items()},
            secrets={k: int(v) for k, v in data["secrets"].items()},
            accounts={a[2]: account(a) for a in data["accounts"]},
        )


def to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise MetadataError(f"unknown time zone {name!r}") from None
    return name


def check_role(role: str) -> str:
    if role not in Role.ALL:
        raise MetadataError(f"unknown role {role!r} (one of {', '.join(Role.ALL)})")
    return role


def _printable(text: str) -> bool:
    return all(unicodedata.category(ch)[0] != "C" for ch in text)


def check_username(username: str) -> str:
    """1–255 printable characters, no ':' (HTTP Basic splits at the first one), no edge blanks."""
    if not username or len(username) > MAX_NAME_LENGTH:
        raise MetadataError(f"a service-account username must be 1 to {MAX_NAME_LENGTH} characters")
    if ":" in username or not _printable(username) or username != username.strip():
        raise MetadataError(
            "a service-account username may not contain ':' or control characters, nor start or end with a blank"
        )
    return username


def check_name(name: str, what: str = "a project name") -> str:
    if not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise MetadataError(f"{what} must be 1 to {MAX_NAME_LENGTH} characters and not blank")
    if not _printable(name):
        raise MetadataError(f"{what} may not contain control characters")
    return name
