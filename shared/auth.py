"""Authenticate a request against a `Directory` snapshot.

The three import credentials of the interface, and the two of the query interface:

* service account: HTTP Basic `username:secret` plus the `project_id` query parameter;
* project secret: HTTP Basic with the secret as username and an empty password;
* project token (import only): HTTP Basic with the token as username and an empty
  password; without `project_id` the token names the project.

Mixpanel's Basic parser also accepts the colon-joined credentials in plain text after
`Basic `; so does this one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass

from footfall.shared import credentials
from footfall.shared.credentials import Role, VerifiedCache
from footfall.shared.errors import AuthError
from footfall.shared.metadata import Directory, Project


@dataclass(frozen=True)
class Principal:
    project: Project
    via: str  # "service_account" | "secret" | "token"
    role: str | None = None
    sa_id: int | None = None
    username: str | None = None

    @property
    def project_id(self) -> int:
        return self.project.project_id


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(username, password) from an Authorization header, or None when absent/not Basic."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    value = value.strip()
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = value  # plain-text credentials after "Basic "
    if ":" not in decoded:
        # A bare token/secret without the colon (some clients omit an empty password).
        return decoded, ""
    user, _, password = decoded.partition(":")
    return user, password


def _parse_project_id(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    # ASCII digits only: int() would also take " 1", "+1", "1_0" (= 10) and other scripts' digits.
    if not (raw.isascii() and raw.isdigit()):
        raise AuthError(400, "project_id must be an integer")
    value = int(raw)
    if value <= 0:
        raise AuthError(400, "project_id must be a positive integer")
    return value


def _lookup(table: dict[str, int], value: str) -> int | None:
    """Find a token/secret by its keyed hash (`credentials.lookup_key`).

    The secret itself is never compared: the probe compares HMAC outputs, whose timing
    cannot be steered towards the secret, which is what a constant-time compare protects.
    """
    return table.get(credentials.lookup_key(value))


class Authenticator:
    """Stateless apart from the verified-secret cache; the directory is swapped atomically."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self._verified = VerifiedCache()

    def replace(self, directory: Directory) -> None:
        self.directory = directory

    def _project(self, project_id: int) -> Project:
        project = self.directory.projects.get(project_id)
        if project is None:
            raise AuthError(403, f"project {project_id} does not exist or is not accessible")
        return project

    def _service_account(self, username: str, secret: str, project_id: int | None) -> Principal:
        account = self.directory.accounts.get(username)
        if account is None or not self._verified.verify(secret, account.secret_hash):
            raise AuthError(401, "Invalid credentials")
        if project_id is None:
            raise AuthError(400, "project_id is required when authenticating with a service account")
        role = account.roles.get(project_id)
        if role is None:
            raise AuthError(403, f"service account is not a member of project {project_id}")
        return Principal(self._project(project_id), "service_account", role, account.sa_id, username)

    def _by_secret_or_token(self, value: str, project_id: int | None, *, allow_token: bool) -> Principal:
        pid = _lookup(self.directory.secrets, value)
        via = "secret"
        if pid is None and allow_token:
            pid = _lookup(self.directory.tokens, value)
            via = "token"
        if pid is None:
            raise AuthError(401, "Invalid credentials")
        if project_id is not None and project_id != pid:
            raise AuthError(403, f"credentials do not belong to project {project_id}")
        return Principal(self._project(pid), via)

    def authenticate(self, header: str | None, project_id_param: str | None, *, allow_token: bool) -> Principal:
        creds = parse_basic(header)
        if creds is None:
            raise AuthError(401, "Missing credentials: use HTTP Basic authentication")
        username, password = creds
        project_id = _parse_project_id(project_id_param)
        if password:
            return self._service_account(username, password, project_id)
        if not username:
            raise AuthError(401, "Invalid credentials")
        return self._by_secret_or_token(username, project_id, allow_token=allow_token)

    def for_import(self, header: str | None, project_id_param: str | None) -> Principal:
        principal = self.authenticate(header, project_id_param, allow_token=True)
        if principal.via == "service_account" and principal.role not in Role.CAN_IMPORT:
            raise AuthError(403, "importing requires a service account with role Owner or Admin")
        return principal

    def for_query(self, header: str | None, project_id_param: str | None) -> Principal:
        return self.authenticate(header, project_id_param, allow_token=False)

    # A service-account secret not seen recently costs one scrypt (~50 ms): run the
    # check in a thread so that it never stalls the event loop.
    async def for_import_async(self, header: str | None, project_id_param: str | None) -> Principal:
        return await asyncio.to_thread(self.for_import, header, project_id_param)

    async def for_query_async(self, header: str | None, project_id_param: str | None) -> Principal:
        return await asyncio.to_thread(self.for_query, header, project_id_param)
