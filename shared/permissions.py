"""Who may do what: the permission matrix of the roles (semantics-2 §17.3), in one place.

Roles are per project: `owner`, `admin`, `analyst`, `consumer` (`role_order` 1–4). Two kinds
of checks:

* **Project actions** — the caller is a `Principal` of one project (the `project_id` of the
  request): `require(principal, action)` raises 403 unless the principal's role may do
  `action` there. The table `PROJECT_ACTIONS` is the matrix; endpoints name an action and never
  list roles themselves. A project secret (or token) is not a role: it passes the actions of
  `SECRET_ACTIONS` (importing and querying, as the interface allows) and nothing else (401:
  the management interface needs a service account).
* **Organization actions** (service-account management, §17.3) — the caller is a
  `ServiceAccount`; the `require_*` functions below take its roles and the projects concerned.

Decisions (Mixpanel's project-role descriptions: "admins have the same permissions as owners
but cannot delete or reset the project or manage its security"; analysts create and save
reports; consumers view):

| action | owner | admin | analyst | consumer |
|---|---|---|---|---|
| `query`, `project.read`, `saved.read`, `cohorts.read`, `cohorts.write`, `experiments.read` | ✓ | ✓ | ✓ | ✓ |
| `experiments.write` | ✓ | ✓ | ✓ | |
| `import`, `saved.write`, `project.update`, `data_deletion`, `service_accounts.list` | ✓ | ✓ | | |
| `project.rotate_credentials` (a new token or secret: the project's security) | ✓ | | | |

`cohorts.write` is open to every role as semantics-2 §13.7 says. Organization rules (§17.3,
with two additions of ours, marked *):

* the caller must belong to the organization in the path (else 403);
* listing and reading service accounts, and creating a project: owner or admin in at least one
  project of the organization; the creator of a project becomes its owner;
* create and add-to-project: owner or admin in every project named (a create naming no project:
  in at least one project of the organization), never granting a role above their own there;
* remove-from-project: owner or admin in every project named; delete: owner or admin in every
  project the target belongs to (a target in no project: in at least one project); deleting
  oneself is allowed;
* (*) nobody may change, remove or delete a membership whose role is above their own (an admin
  cannot demote, remove or delete an owner): otherwise the rule against granting above one's
  own role could be undone in two steps;
* (*) no change may leave a project without an owner (checked by the management operations,
  `footfall.services.app.operations`): a project whose last owner is gone can only be repaired with
  direct store access.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from footfall.shared.credentials import Role
from footfall.shared.errors import AuthError

__all__ = [
    "MANAGERS",
    "PROJECT_ACTIONS",
    "ROLE_ORDER",
    "SECRET_ACTIONS",
    "Action",
    "allowed",
    "managed_projects",
    "outranks",
    "require",
    "require_manager_anywhere",
    "require_manager_of",
    "require_may_change",
    "require_may_grant",
    "require_organization",
]

ROLE_ORDER: Mapping[str, int] = {Role.OWNER: 1, Role.ADMIN: 2, Role.ANALYST: 3, Role.CONSUMER: 4}
MANAGERS = frozenset({Role.OWNER, Role.ADMIN})
_EVERY_ROLE = frozenset(Role.ALL)


class Action:
    """The project actions (strings, so that other modules can name them without an import cycle)."""

    QUERY = "query"
    IMPORT = "import"
    PROJECT_READ = "project.read"
    PROJECT_UPDATE = "project.update"
    PROJECT_ROTATE = "project.rotate_credentials"
    SAVED_READ = "saved.read"
    SAVED_WRITE = "saved.write"
    COHORTS_READ = "cohorts.read"
    COHORTS_WRITE = "cohorts.write"
    EXPERIMENTS_READ = "experiments.read"
    EXPERIMENTS_WRITE = "experiments.write"
    DATA_DELETION = "data_deletion"
    SERVICE_ACCOUNTS_LIST = "service_accounts.list"


PROJECT_ACTIONS: Mapping[str, frozenset[str]] = {
    Action.QUERY: _EVERY_ROLE,
    Action.PROJECT_READ: _EVERY_ROLE,
    Action.SAVED_READ: _EVERY_ROLE,
    Action.COHORTS_READ: _EVERY_ROLE,
    Action.COHORTS_WRITE: _EVERY_ROLE,
    Action.EXPERIMENTS_READ: _EVERY_ROLE,
    Action.EXPERIMENTS_WRITE: frozenset({Role.OWNER, Role.ADMIN, Role.ANALYST}),
    Action.IMPORT: MANAGERS,
    Action.SAVED_WRITE: MANAGERS,
    Action.PROJECT_UPDATE: MANAGERS,
    Action.DATA_DELETION: MANAGERS,
    Action.SERVICE_ACCOUNTS_LIST: MANAGERS,
    Action.PROJECT_ROTATE: frozenset({Role.OWNER}),
}

# What a project secret (or, for importing, the token) may do: the interface's two uses.
SECRET_ACTIONS = frozenset({Action.QUERY, Action.IMPORT})

_WHAT = {
    Action.QUERY: "querying",
    Action.IMPORT: "importing",
    Action.PROJECT_READ: "reading the project",
    Action.PROJECT_UPDATE: "changing the project",
    Action.PROJECT_ROTATE: "rotating the project's token or secret",
    Action.SAVED_READ: "reading saved reports",
    Action.SAVED_WRITE: "changing saved reports",
    Action.COHORTS_READ: "reading cohorts",
    Action.COHORTS_WRITE: "changing cohorts",
    Action.EXPERIMENTS_READ: "reading experiments",
    Action.EXPERIMENTS_WRITE: "changing experiments",
    Action.DATA_DELETION: "deleting data",
    Action.SERVICE_ACCOUNTS_LIST: "listing the project's service accounts",
}


class _Principal(Protocol):
    @property
    def via(self) -> str: ...

    @property
    def role(self) -> str | None: ...

    @property
    def project_id(self) -> int: ...


class _Account(Protocol):
    @property
    def sa_id(self) -> int: ...

    @property
    def organization_id(self) -> int: ...

    @property
    def roles(self) -> dict[int, str]: ...


def _names(roles: Iterable[str]) -> str:
    ordered = sorted(roles, key=lambda r: ROLE_ORDER[r])
    return " or ".join(r.capitalize() for r in ordered)


def allowed(role: str | None, action: str) -> bool:
    """May a service account with `role` in a project do `action` there?"""
    if action not in PROJECT_ACTIONS:
        raise KeyError(f"unknown action {action!r}")
    return role is not None and role in PROJECT_ACTIONS[action]


def require(principal: _Principal, action: str) -> None:
    """Raise unless the principal may do `action` in its project (401 for a project secret
    asking for more than importing or querying, 403 for a role too low)."""
    if action not in PROJECT_ACTIONS:
        raise KeyError(f"unknown action {action!r}")
    if principal.via != "service_account":
        if action in SECRET_ACTIONS:
            return
        raise AuthError(401, "the management interface needs service-account credentials")
    if not allowed(principal.role, action):
        roles = _names(PROJECT_ACTIONS[action])
        what = _WHAT.get(action, action)
        raise AuthError(403, f"{what} requires a service account with role {roles} in project {principal.project_id}")


def outranks(role: str, other: str) -> bool:
    """Is `role` strictly above `other` (owner > admin > analyst > consumer)?"""
    return ROLE_ORDER[role] < ROLE_ORDER[other]


# -- organization actions ----------------------------------------------------------------


def require_organization(account: _Account, organization_id: int) -> None:
    if account.organization_id != organization_id:
        raise AuthError(403, f"the service account does not belong to organization {organization_id}")


def managed_projects(account: _Account, organization_projects: Iterable[int]) -> set[int]:
    """The projects of the organization where the account is Owner or Admin."""
    return {pid for pid in organization_projects if account.roles.get(pid) in MANAGERS}


def require_manager_anywhere(account: _Account, organization_projects: Iterable[int], what: str) -> None:
    if not managed_projects(account, organization_projects):
        raise AuthError(
            403, f"{what} requires a service account with role Owner or Admin in a project of the organization"
        )


def require_manager_of(account: _Account, project_ids: Iterable[int], what: str) -> None:
    missing = sorted(pid for pid in set(project_ids) if account.roles.get(pid) not in MANAGERS)
    if missing:
        names = ", ".join(str(p) for p in missing)
        raise AuthError(403, f"{what} requires a service account with role Owner or Admin in project(s) {names}")


def require_may_grant(account: _Account, project_id: int, role: str) -> None:
    """Nobody grants a role above their own in that project (an admin cannot make an owner)."""
    own = account.roles.get(project_id)
    if own is None or outranks(role, own):
        raise AuthError(
            403, f"a service account with role {own or 'none'} in project {project_id} cannot grant the role {role}"
        )


def require_may_change(account: _Account, project_id: int, target_role: str, what: str) -> None:
    """Nobody changes, removes or deletes a membership whose role is above their own."""
    own = account.roles.get(project_id)
    if own is None or outranks(target_role, own):
        raise AuthError(
            403,
            f"{what}: a service account with role {own or 'none'} in project {project_id}"
            f" cannot act on a member with role {target_role}",
        )
