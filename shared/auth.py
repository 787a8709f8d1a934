"""Authenticate a request against a `Directory` snapshot.

The three import credentials of the interface, and the two of the query interface:

* service account: HTTP Basic `username:secret` plus the `project_id` query parameter;
* project secret: HTTP Basic with the secret as username and an empty password;
* project token (import only): HTTP Basic with the token as username and an empty
  password; without `project_id` the token names the project.

Mixpanel's Basic parser also accepts the colon-joined credentials in plain text after
`Basic `; so does this one.

Checked on every request, against the current snapshot (swapped atomically by `replace`):
a service account's expiry (401 "service account expired" from the moment it passes, not at
the next reload), and the region of the project (semantics-2 §15.1: a project of another
region is refused with 403 naming its region and, when configured, that region's URL). The
management interface's organization routes authenticate the account alone (`account_async`);
what a role may do is `footfall.shared.permissions`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from footfall.shared import credentials
from footfall.shared.config import RegionSettings
from footfall.shared.credentials import Role, VerifiedCache
from footfall.shared.errors import AuthError
from footfall.shared.metadata import Directory, Project, ServiceAccount
from footfall.shared.permissions import require

_T = TypeVar("_T")


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


class LoginThrottle:
    """Failed service-account logins, counted per (username, client address) and per address.

    After `limit` failures of one pair within `window` seconds (or `address_limit` failures
    from one address, whatever the usernames), further attempts are refused with 429 and
    `Retry-After` before any secret is checked, until the oldest failure leaves the window.
    Keying the tighter limit by the pair means an attacker cannot lock a user out from
    everywhere by failing under their name. Memory is bounded: past `max_keys` tracked keys
    the oldest are forgotten.
    """

    def __init__(
        self,
        limit: int = 10,
        address_limit: int = 100,
        window: float = 60.0,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.address_limit = address_limit
        self.window = window
        self.max_keys = max_keys
        self.clock = clock
        self._failures: dict[tuple[str, str], deque[float]] = {}

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def check(self, username: str, address: str) -> None:
        """Raise 429 when the pair or the address has failed too often lately."""
        now = self.clock()
        for key, limit in (
            (("pair", f"{username}\0{address}"), self.limit),
            (("address", address), self.address_limit),
        ):
            times = self._recent(key, now)
            if limit and len(times) >= limit:
                retry = max(1, math.ceil(times[0] + self.window - now))
                raise AuthError(429, "too many failed logins, retry later", retry_after=retry)

    def failed(self, username: str, address: str) -> None:
        now = self.clock()
        if len(self._failures) >= self.max_keys:
            for key in list(self._failures)[: self.max_keys // 10]:
                del self._failures[key]
        for key in (("pair", f"{username}\0{address}"), ("address", address)):
            self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, username: str, address: str) -> None:
        self._failures.pop(("pair", f"{username}\0{address}"), None)


def check_region(region: RegionSettings, project: Project) -> Project:
    """403 for a project of another region (§15.1), naming that region's URL when configured."""
    if project.region and project.region != region.region:
        url = region.url_of(project.region)
        where = f": use {url}" if url else ""
        raise AuthError(
            403,
            f"project {project.project_id} is in region {project.region}, not in this deployment's region"
            f" {region.region}{where}",
        )
    return project


def _off_loop() -> None:
    """Secret checks may cost a scrypt (~50 ms): never on an event loop's thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError("credential verification called on the event loop: use the *_async methods")


class Authenticator:
    """Stateless apart from the verified-secret cache and the login throttle; the directory
    is swapped atomically.

    The request path calls the `*_async` methods: they consult the throttle, then verify
    in a worker thread. The blocking methods (`authenticate`, `for_import`, `for_query`)
    refuse to run on an event loop's thread. `on_login(sa_id)` (optional) is told of every
    successful service-account login (`footfall.shared.metadata.UsageRecorder.note`).
    """

    def __init__(
        self,
        directory: Directory,
        *,
        throttle: LoginThrottle | None = None,
        region: RegionSettings | None = None,
        clock: Callable[[], float] = time.time,
        on_login: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = directory
        self.throttle = throttle or LoginThrottle()
        self.region = region or RegionSettings()
        self.clock = clock
        self.on_login = on_login
        self._verified = VerifiedCache()

    def replace(self, directory: Directory) -> None:
        self.directory = directory

    def check_region(self, project: Project) -> Project:
        return check_region(self.region, project)

    def _project(self, project_id: int) -> Project:
        project = self.directory.projects.get(project_id)
        if project is None:
            raise AuthError(403, f"project {project_id} does not exist or is not accessible")
        return self.check_region(project)

    def _account(self, username: str, secret: str) -> ServiceAccount:
        account = self.directory.accounts.get(username)
        if account is None:
            credentials.verify_secret(secret, credentials.decoy_hash())  # same cost as a wrong secret
            raise AuthError(401, "Invalid credentials")
        if not self._verified.verify(secret, account.secret_hash):
            raise AuthError(401, "Invalid credentials")
        if account.expired(int(self.clock() * 1000)):
            raise AuthError(401, "the service account has expired")
        if self.on_login is not None:
            self.on_login(account.sa_id)
        return account

    def _service_account(self, username: str, secret: str, project_id: int | None) -> Principal:
        account = self._account(username, secret)
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
        _off_loop()
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

    def account(self, header: str | None) -> ServiceAccount:
        """The service account of Basic `username:secret` (no project): the management
        interface's organization routes. Anything else (none, a project secret) is 401."""
        _off_loop()
        creds = parse_basic(header)
        if creds is None:
            raise AuthError(401, "Missing credentials: use HTTP Basic authentication with a service account")
        username, password = creds
        if not password:
            raise AuthError(401, "the management interface needs service-account credentials")
        return self._account(username, password)

    def project_for_token(self, token: str) -> Project | None:
        """The project whose token `token` is, or None (`/track`'s `properties.token`).

        A keyed-hash lookup (`credentials.lookup_key`), no secret check: cheap enough to run
        on the event loop, once per distinct token of a request.
        """
        pid = _lookup(self.directory.tokens, token)
        project = None if pid is None else self.directory.projects.get(pid)
        return None if project is None else self.check_region(project)

    def for_query(self, header: str | None, project_id_param: str | None) -> Principal:
        return self.authenticate(header, project_id_param, allow_token=False)

    def identify(self, header: str | None) -> None:
        """Check the credentials alone (a service account's secret, or a project secret),
        before a project is named: a request body is read only once this passed."""
        _off_loop()
        creds = parse_basic(header)
        if creds is None:
            raise AuthError(401, "Missing credentials: use HTTP Basic authentication")
        username, password = creds
        if password:
            account = self.directory.accounts.get(username)
            if account is None:
                credentials.verify_secret(password, credentials.decoy_hash())  # same cost as a wrong secret
                raise AuthError(401, "Invalid credentials")
            if not self._verified.verify(password, account.secret_hash):
                raise AuthError(401, "Invalid credentials")
            return
        if not username or _lookup(self.directory.secrets, username) is None:
            raise AuthError(401, "Invalid credentials")

    def for_management(
        self,
        header: str | None,
        project_id_param: str | None,
        *,
        write_roles: tuple[str, ...] = (),
        action: str = "this change",
        permission: str | None = None,
    ) -> Principal:
        """A service account that is a member of the project; with `write_roles`, one of those
        roles; with `permission` (an `footfall.shared.permissions.Action`), a role the matrix
        allows it."""
        principal = self.authenticate(header, project_id_param, allow_token=False)
        if principal.via != "service_account":
            raise AuthError(401, "the management interface needs service-account credentials")
        if write_roles and principal.role not in write_roles:
            names = " or ".join(r.capitalize() for r in write_roles)
            raise AuthError(403, f"{action} requires a service account with role {names}")
        if permission is not None:
            require(principal, permission)
        return principal

    async def _verified_off_loop(self, header: str | None, client: str | None, check: Callable[[], _T]) -> _T:
        creds = parse_basic(header)
        username = creds[0] if creds is not None and creds[1] else None  # a service-account login
        address = client or "unknown"
        if username is not None:
            self.throttle.check(username, address)
        try:
            verified = await asyncio.to_thread(check)
        except AuthError as exc:
            if username is not None and exc.status == 401:
                self.throttle.failed(username, address)
            raise
        if username is not None:
            self.throttle.succeeded(username, address)
        return verified

    async def for_import_async(
        self, header: str | None, project_id_param: str | None, *, client: str | None = None
    ) -> Principal:
        return await self._verified_off_loop(header, client, lambda: self.for_import(header, project_id_param))

    async def for_query_async(
        self, header: str | None, project_id_param: str | None, *, client: str | None = None
    ) -> Principal:
        return await self._verified_off_loop(header, client, lambda: self.for_query(header, project_id_param))

    async def identify_async(self, header: str | None, *, client: str | None = None) -> None:
        """`identify`, throttled and off the event loop like the other checks."""
        await self._verified_off_loop(header, client, lambda: self.identify(header))

    async def for_management_async(
        self,
        header: str | None,
        project_id_param: str | None,
        *,
        client: str | None = None,
        write_roles: tuple[str, ...] = (),
        action: str = "this change",
        permission: str | None = None,
    ) -> Principal:
        return await self._verified_off_loop(
            header,
            client,
            lambda: self.for_management(
                header, project_id_param, write_roles=write_roles, action=action, permission=permission
            ),
        )

    async def account_async(self, header: str | None, *, client: str | None = None) -> ServiceAccount:
        """`account`, off the event loop, through the login throttle."""
        return await self._verified_off_loop(header, client, lambda: self.account(header))
