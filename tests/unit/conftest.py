"""Unit-test fixtures: a `Directory` of known credentials and the gateway served in-process.

The gateway is driven through `httpx.ASGITransport` (no socket, no server), from
synchronous tests through a private event loop. App exceptions are not re-raised: a bug
shows up as the 500 a client would see, which the tests assert never happens (the
traceback is in the captured log).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from footfall.services.gateway.addresses import Network
from footfall.services.gateway.app import build_app
from footfall.services.gateway.sinks import MemorySink
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.credentials import Role, hash_secret, lookup_key
from footfall.shared.metadata import Directory, Project, ServiceAccount


@dataclass(frozen=True)
class Creds:
    """Clear-text credentials of the test directory (the directory holds only hashes)."""

    token: str = "0123456789abcdef0123456789abcdef"
    secret: str = "project-1-secret-value"
    token2: str = "fedcba9876543210fedcba9876543210"
    secret2: str = "project-2-secret-value"
    sa_secret: str = "service-account-secret"
    # username -> role in project 1 (None: member of project 2 only)
    accounts: tuple[tuple[str, str | None], ...] = (
        ("owner-sa", Role.OWNER),
        ("admin-sa", Role.ADMIN),
        ("analyst-sa", Role.ANALYST),
        ("consumer-sa", Role.CONSUMER),
        ("outsider-sa", None),
    )


CREDS = Creds()


def build_directory(creds: Creds = CREDS) -> Directory:
    sa_hash = hash_secret(creds.sa_secret)  # one scrypt for all accounts keeps the fixture fast
    accounts = {}
    for sa_id, (username, role) in enumerate(creds.accounts, start=1):
        roles = {1: role} if role is not None else {2: Role.OWNER}
        accounts[username] = ServiceAccount(sa_id, 1, username, sa_hash, roles)
    return Directory(
        projects={1: Project(1, "Default", "UTC"), 2: Project(2, "Other", "Europe/Berlin")},
        tokens={lookup_key(creds.token): 1, lookup_key(creds.token2): 2},
        secrets={lookup_key(creds.secret): 1, lookup_key(creds.secret2): 2},
        accounts=accounts,
    )


class Gateway:
    """The gateway app with a `MemorySink`, answering synchronous calls (from the peer
    127.0.0.1, or `peer=` per request)."""

    def __init__(
        self, directory: Directory, limits: ImportLimits | None = None, *, trusted_proxies: tuple[Network, ...] = ()
    ) -> None:
        self.sink = MemorySink()
        self.limits = limits or ImportLimits()
        self.app = build_app(Authenticator(directory), self.sink, self.limits, trusted_proxies=trusted_proxies)
        self._runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test")

    def request(self, method: str, url: str, *, peer: str | None = None, **kwargs: Any) -> httpx.Response:
        if peer is None:
            return self._runner.run(self._client.request(method, url, **kwargs))
        return self._runner.run(self._from_peer(peer, method, url, **kwargs))

    async def _from_peer(self, peer: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False, client=(peer, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://footfall.test") as client:
            return await client.request(method, url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


@pytest.fixture(scope="session")
def creds() -> Creds:
    return CREDS


@pytest.fixture(scope="session")
def directory() -> Directory:
    return build_directory()


@pytest.fixture(scope="session")
def make_gateway(directory: Directory) -> Iterator[Callable[..., Gateway]]:
    """`make_gateway(limits=None, trusted_proxies=())` → a new `Gateway` (its own sink);
    closed at session end.

    Session-scoped so that Hypothesis tests may use it; each call is independent."""
    made: list[Gateway] = []

    def make(limits: ImportLimits | None = None, *, trusted_proxies: tuple[Network, ...] = ()) -> Gateway:
        gw = Gateway(directory, limits, trusted_proxies=trusted_proxies)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.close()


@pytest.fixture
def gateway(make_gateway: Callable[..., Gateway]) -> Gateway:
    """A gateway with the default limits and an empty sink."""
    return make_gateway()
