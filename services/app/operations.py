"""The management operations on organizations, projects and service accounts (semantics-2 §17).

Blocking functions over a `MetadataStore`, called by the HTTP routes (`organizations.py`)
through the warehouse's runner. Each operation takes the authenticated caller, re-reads its
roles from the store (the snapshot the caller was authenticated with may be seconds old), and
checks the permission rules of `footfall.shared.permissions` before it changes anything.
Writes are serialised by one process-wide lock: the store hands out ids and checks uniqueness
by reading before writing (`footfall.shared.metadata.store`).

Decisions where the references are silent (README "Organizations, projects and service
accounts"): project names are unique within an organization, compared without case and edge
blanks; the caller who creates a project becomes its Owner; project listings show the projects
of the organization the caller is a member of; no change may leave a project without an Owner.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from footfall.shared import credentials
from footfall.shared.auth import check_region
from footfall.shared.config import RegionSettings
from footfall.shared.credentials import Role
from footfall.shared.errors import AuthError, NotFoundError, ParamError
from footfall.shared.metadata import (
    AccountRecord,
    MetadataStore,
    Project,
    ServiceAccount,
    check_name,
    check_role,
    check_timezone,
    check_username,
    now,
)
from footfall.shared.permissions import (
    ROLE_ORDER,
    Action,
    allowed,
    require_manager_anywhere,
    require_manager_of,
    require_may_change,
    require_may_grant,
    require_organization,
)

__all__ = ["Management", "iso"]

_WRITE_LOCK = threading.Lock()  # one writer of metadata per process
MAX_ID = 2**63  # ids are UInt64 in the store; larger ones cannot exist


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, to the second (the interface's `created`, `expires`, `last_used`)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_member(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < MAX_ID:
        raise ParamError(f"{where} must be a positive integer")
    return value


def _text_member(body: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ParamError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise ParamError(f"{name} must be a string")
    return value


def _list_member(body: Mapping[str, Any], name: str, *, required: bool = True) -> list[Any]:
    value = body.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise ParamError(f"{name} is required and must be a list")
    return value


def _parse_role(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ParamError(f"{where} must be one of {', '.join(Role.ALL)}")
    return check_role(value.lower())


def parse_expires(value: Any) -> datetime | None:
    """`expires`: null, or an ISO 8601 date or date-time (no offset = UTC) in the future."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParamError("expires must be an ISO 8601 date-time string or null")
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise ParamError(f"expires is not an ISO 8601 date-time: {value!r}") from None
        moment = datetime(day.year, day.month, day.day)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if moment <= now():
        raise ParamError("expires is in the past")
    return moment


def _same_name(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


@dataclass
class Management:
    """The operations; `store` is blocking (call from a worker thread)."""

    store: MetadataStore
    region: RegionSettings

    # -- shared checks ------------------------------------------------------------------
    def _caller(self, caller: ServiceAccount) -> AccountRecord:
        """The caller as the store holds it now (roles may have changed since its snapshot)."""
        record = self.store.get_service_account(caller.sa_id)
        if record is None:
            raise AuthError(401, "Invalid credentials")
        return record

    def _org_projects(self, organization_id: int) -> dict[int, Project]:
        return {p.project_id: p for p in self.store.list_projects() if p.organization_id == organization_id}

    def _check_region(self, project: Project) -> None:
        check_region(self.region, project)

    def authorize(self, caller: ServiceAccount, project_id: int, action: str) -> Project:
        """The project, if the caller (as stored now) may do `action` on it; else 403."""
        return self._member_project(self._caller(caller), project_id, action)

    def _member_project(self, caller: AccountRecord, project_id: int, action: str) -> Project:
        project = self.store.get_project(project_id)
        role = caller.roles.get(project_id)
        if project is None or role is None or project.organization_id != caller.organization_id:
            raise AuthError(403, f"project {project_id} does not exist or is not accessible")
        self._check_region(project)
        if not allowed(role, action):
            needed = " or ".join(
                r.capitalize() for r in sorted(Role.ALL, key=lambda r: ROLE_ORDER[r]) if allowed(r, action)
            )
            raise AuthError(403, f"this requires a service account with role {needed} in project {project_id}")
        return project

    def _account_in(self, organization_id: int, sa_id: int) -> AccountRecord:
        record = self.store.get_service_account(sa_id) if 1 <= sa_id < MAX_ID else None
        if record is None or record.organization_id != organization_id:
            raise NotFoundError(f"no service account {sa_id} in organization {organization_id}")
        return record

    def _keep_an_owner(self, project_id: int, changes: Mapping[int, str | None]) -> None:
        """Refuse a change (sa_id -> new role, None = removed) that leaves the project without an owner."""
        owners = {
            a.sa_id
            for a in self.store.list_service_accounts()
            if a.roles.get(project_id) == Role.OWNER and changes.get(a.sa_id, Role.OWNER) == Role.OWNER
        }
        added = {sa for sa, role in changes.items() if role == Role.OWNER}
        if not owners | added:
            raise ParamError(f"project {project_id} would be left without an owner")

    # -- views --------------------------------------------------------------------------
    @staticmethod
    def account_view(record: AccountRecord) -> dict[str, Any]:
        # `last_used`, `expires` and `creator` are left out when unknown: the interface's
        # schema types them (date-time, integer) without null.
        view: dict[str, Any] = {
            "id": record.sa_id,
            "username": record.username,
            "last_used": iso(record.last_used),
            "expires": iso(record.expires_at),
            "creator": record.creator,
            "created": iso(record.created_at),
            "user": record.sa_id,
        }
        return {k: v for k, v in view.items() if v is not None or k not in ("last_used", "expires", "creator")}

    @staticmethod
    def project_view(project: Project, region: str) -> dict[str, Any]:
        return {
            "id": project.project_id,
            "name": project.name,
            "timezone": project.timezone,
            "region": project.region or region,
            "organization_id": project.organization_id,
        }

    def _view(self, project: Project) -> dict[str, Any]:
        return self.project_view(project, self.region.region)

    # -- me -------------------------------------------------------------------------------
    def me(self, caller: ServiceAccount) -> dict[str, Any]:
        record = self._caller(caller)
        return {
            "id": record.sa_id,
            "username": record.username,
            "organization_id": record.organization_id,
            "projects": {str(pid): role for pid, role in sorted(record.roles.items())},
        }

    # -- projects -------------------------------------------------------------------------
    def list_projects(self, caller: ServiceAccount, organization_id: int) -> list[dict[str, Any]]:
        record = self._caller(caller)
        require_organization(record, organization_id)
        return [
            {**self._view(p), "role": record.roles[pid]}
            for pid, p in sorted(self._org_projects(organization_id).items())
            if pid in record.roles
        ]

    def create_project(self, caller: ServiceAccount, organization_id: int, body: Mapping[str, Any]) -> dict[str, Any]:
        name = check_name(_text_member(body, "name", required=True) or "")
        timezone = check_timezone(_text_member(body, "timezone") or "UTC")
        region = _text_member(body, "region")
        if region is not None and region.lower() != self.region.region:
            raise ParamError(
                f"this deployment stores region {self.region.region}; a project of region {region!r}"
                " must be created in that region's deployment"
            )
        with _WRITE_LOCK:
            record = self._caller(caller)
            require_organization(record, organization_id)
            projects = self._org_projects(organization_id)
            require_manager_anywhere(record, projects, "creating a project")
            self._refuse_duplicate(name, projects.values())
            project = self.store.create_project(
                name, timezone, organization_id=organization_id, region=self.region.region
            )
            token, secret = credentials.new_token(), credentials.new_secret()
            self.store.add_project_credential(project.project_id, "token", token)
            self.store.add_project_credential(project.project_id, "secret", secret)
            self.store.grant(record.sa_id, project.project_id, Role.OWNER)
        return {**self._view(project), "token": token, "secret": secret}

    @staticmethod
    def _refuse_duplicate(name: str, projects: Iterable[Project], *, other_than: int | None = None) -> None:
        for p in projects:
            if p.project_id != other_than and _same_name(p.name, name):
                raise ParamError(f"a project named {p.name!r} already exists (project {p.project_id})")

    def get_project(self, caller: ServiceAccount, project_id: int) -> dict[str, Any]:
        record = self._caller(caller)
        project = self._member_project(record, project_id, Action.PROJECT_READ)
        return {**self._view(project), "role": record.roles[project_id]}

    def update_project(self, caller: ServiceAccount, project_id: int, body: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - {"name", "timezone"})
        if unknown:
            raise ParamError(f"unknown member(s) {', '.join(unknown)}: a project's name and timezone can change")
        name = _text_member(body, "name")
        timezone = _text_member(body, "timezone")
        if name is None and timezone is None:
            raise ParamError("give name and/or timezone")
        if name is not None:
            check_name(name)
        if timezone is not None:
            check_timezone(timezone)
        with _WRITE_LOCK:
            record = self._caller(caller)
            project = self._member_project(record, project_id, Action.PROJECT_UPDATE)
            if name is not None:
                siblings = self._org_projects(project.organization_id).values()
                self._refuse_duplicate(name, siblings, other_than=project_id)
            changed = replace(
                project,
                name=project.name if name is None else name,
                timezone=project.timezone if timezone is None else timezone,
            )
            self.store.update_project(changed)
        return {**self._view(changed), "role": record.roles[project_id]}

    def rotate(self, caller: ServiceAccount, project_id: int, kind: str) -> dict[str, Any]:
        value = credentials.new_token() if kind == "token" else credentials.new_secret()
        with _WRITE_LOCK:
            record = self._caller(caller)
            project = self._member_project(record, project_id, Action.PROJECT_ROTATE)
            self.store.replace_project_credentials(project_id, kind, value)
        return {"id": project.project_id, kind: value}

    # -- service accounts ------------------------------------------------------------------
    def list_accounts(self, caller: ServiceAccount, organization_id: int) -> list[dict[str, Any]]:
        record = self._caller(caller)
        require_organization(record, organization_id)
        require_manager_anywhere(record, self._org_projects(organization_id), "listing service accounts")
        return [self.account_view(a) for a in self.store.list_service_accounts(organization_id)]

    def get_account(self, caller: ServiceAccount, organization_id: int, sa_id: int) -> dict[str, Any]:
        record = self._caller(caller)
        require_organization(record, organization_id)
        require_manager_anywhere(record, self._org_projects(organization_id), "reading service accounts")
        return self.account_view(self._account_in(organization_id, sa_id))

    def project_accounts(self, caller: ServiceAccount, project_id: int) -> list[dict[str, Any]]:
        record = self._caller(caller)
        self._member_project(record, project_id, Action.SERVICE_ACCOUNTS_LIST)
        out = []
        for account in self.store.list_service_accounts():
            role = account.roles.get(project_id)
            if role is None:
                continue
            out.append(
                {
                    **self.account_view(account),
                    "role": role,
                    "hasSensitiveAccess": False,
                    "role_order": ROLE_ORDER[role],
                    "target_type": "individual",  # no `email`: a service account has none
                }
            )
        return out

    def _project_roles(self, body: Mapping[str, Any], default_role: str | None, org: int) -> dict[int, str]:
        """`projects: [{"id", "role"}]` → {project_id: role}; unknown ids or roles → 400."""
        projects = self._org_projects(org)
        roles: dict[int, str] = {}
        for i, item in enumerate(_list_member(body, "projects", required=default_role is not None)):
            if not isinstance(item, dict):
                raise ParamError(f"projects[{i}] must be an object with id and role")
            pid = _int_member(item.get("id"), f"projects[{i}].id")
            if pid not in projects:
                raise ParamError(f"projects[{i}].id: project {pid} does not exist in organization {org}")
            if item.get("role") is None and default_role is None:
                raise ParamError(f"projects[{i}].role is required")
            roles[pid] = _parse_role(item.get("role") or default_role, f"projects[{i}].role")
        return roles

    def create_account(self, caller: ServiceAccount, organization_id: int, body: Mapping[str, Any]) -> dict[str, Any]:
        username = check_username(_text_member(body, "username", required=True) or "")
        role = _parse_role(body.get("role") or Role.CONSUMER, "role")
        expires = parse_expires(body.get("expires"))
        secret = credentials.new_secret()
        with _WRITE_LOCK:
            record = self._caller(caller)
            require_organization(record, organization_id)
            roles = self._project_roles({"projects": body.get("projects") or []}, role, organization_id)
            if roles:
                require_manager_of(record, roles, "creating a service account")
                for pid, granted in roles.items():
                    require_may_grant(record, pid, granted)
            else:
                require_manager_anywhere(record, self._org_projects(organization_id), "creating a service account")
            if any(a.username == username for a in self.store.list_service_accounts()):
                raise ParamError(f"a service account named {username!r} already exists")
            sa_id = self.store.create_service_account(
                username, secret, organization_id=organization_id, expires_at=expires, creator=record.sa_id
            )
            for pid, granted in roles.items():
                self.store.grant(sa_id, pid, granted)
            created = self.store.get_service_account(sa_id)
        if created is None:
            raise AssertionError("invariant: a created service account can be read back")
        return {"token": secret, **self.account_view(created)}

    def delete_account(self, caller: ServiceAccount, organization_id: int, sa_id: int) -> None:
        with _WRITE_LOCK:
            record = self._caller(caller)
            require_organization(record, organization_id)
            target = self._account_in(organization_id, sa_id)
            if target.sa_id == record.sa_id:
                pass  # deleting oneself is allowed (§17.3): giving up one's own credentials
            elif target.roles:
                require_manager_of(record, target.roles, "deleting a service account")
                for pid, role in target.roles.items():
                    require_may_change(record, pid, role, "deleting a service account")
            else:
                require_manager_anywhere(record, self._org_projects(organization_id), "deleting a service account")
            for pid in target.roles:
                self._keep_an_owner(pid, {sa_id: None})
            self.store.delete_service_account(sa_id)

    def _accounts_in(self, organization_id: int, ids: list[Any], where: str) -> dict[int, AccountRecord]:
        found: dict[int, AccountRecord] = {}
        accounts = {a.sa_id: a for a in self.store.list_service_accounts(organization_id)}
        for i, value in enumerate(ids):
            sa = _int_member(value, f"{where}[{i}]")
            if sa not in accounts:
                raise ParamError(f"{where}[{i}]: no service account {sa} in organization {organization_id}")
            found[sa] = accounts[sa]
        return found

    def add_to_project(self, caller: ServiceAccount, organization_id: int, body: Mapping[str, Any]) -> None:
        with _WRITE_LOCK:
            record = self._caller(caller)
            require_organization(record, organization_id)
            roles = self._project_roles(body, None, organization_id)
            targets = self._accounts_in(
                organization_id, _list_member(body, "service_account_ids"), "service_account_ids"
            )
            if not roles or not targets:
                raise ParamError("projects and service_account_ids must not be empty")
            require_manager_of(record, roles, "adding service accounts to a project")
            for pid, granted in roles.items():
                require_may_grant(record, pid, granted)
                for target in targets.values():
                    current = target.roles.get(pid)
                    if current is not None and current != granted:
                        require_may_change(record, pid, current, "changing a member's role")
                self._keep_an_owner(pid, dict.fromkeys(targets, granted))
            for pid, granted in roles.items():
                for sa in targets:
                    self.store.grant(sa, pid, granted)

    def remove_from_project(self, caller: ServiceAccount, organization_id: int, body: Mapping[str, Any]) -> None:
        with _WRITE_LOCK:
            record = self._caller(caller)
            require_organization(record, organization_id)
            projects = self._org_projects(organization_id)
            removals: dict[int, dict[int, AccountRecord]] = {}
            for i, item in enumerate(_list_member(body, "projects")):
                if not isinstance(item, dict):
                    raise ParamError(f"projects[{i}] must be an object with id and service_account_ids")
                pid = _int_member(item.get("id"), f"projects[{i}].id")
                if pid not in projects:
                    raise ParamError(
                        f"projects[{i}].id: project {pid} does not exist in organization {organization_id}"
                    )
                ids = _list_member(item, "service_account_ids")
                removals[pid] = self._accounts_in(organization_id, ids, f"projects[{i}].service_account_ids")
            if not removals:
                raise ParamError("projects must not be empty")
            require_manager_of(record, removals, "removing service accounts from a project")
            for pid, targets in removals.items():
                for target in targets.values():
                    current = target.roles.get(pid)
                    if current is not None:
                        require_may_change(record, pid, current, "removing a member")
                self._keep_an_owner(pid, dict.fromkeys(targets))
            for pid, targets in removals.items():
                for sa in targets:
                    self.store.revoke(sa, pid)
