"""Credential checks run off the event loop, failed service-account logins are throttled, and an
unknown username costs the same scrypt as a wrong secret (`footfall.shared.auth`)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from footfall.shared import credentials
from footfall.shared.auth import Authenticator, AuthError, LoginThrottle
from footfall.shared.metadata import Directory


def basic(user: str, password: str = "") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_blocking_checks_refuse_to_run_on_an_event_loop(directory: Directory, creds) -> None:  # type: ignore[no-untyped-def]
    auth = Authenticator(directory)

    async def on_the_loop() -> None:
        auth.for_import(basic("owner-sa", creds.sa_secret), "1")

    with pytest.raises(RuntimeError, match="event loop"):
        asyncio.run(on_the_loop())


def test_async_checks_verify_in_a_worker_thread(directory: Directory, creds, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    auth = Authenticator(directory)
    threads: list[bool] = []
    real = credentials.verify_secret

    def spy(secret: str, stored: str) -> bool:
        try:
            asyncio.get_running_loop()
            threads.append(False)  # on a loop's thread
        except RuntimeError:
            threads.append(True)
        return real(secret, stored)

    monkeypatch.setattr(credentials, "verify_secret", spy)

    async def calls() -> None:
        assert (await auth.for_query_async(basic("analyst-sa", creds.sa_secret), "1")).role == "analyst"
        with pytest.raises(AuthError):
            await auth.for_management_async(basic("analyst-sa", "wrong"), "1")
        with pytest.raises(AuthError):
            await auth.for_import_async(basic("nobody", "wrong"), "1")

    asyncio.run(calls())
    assert threads and all(threads)


def test_an_unknown_username_costs_a_scrypt_like_a_wrong_secret(
    directory: Directory, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = Authenticator(directory)
    hashed: list[str] = []
    real = credentials.verify_secret

    def counting(secret: str, stored: str) -> bool:
        hashed.append(stored)
        return real(secret, stored)

    monkeypatch.setattr(credentials, "verify_secret", counting)
    with pytest.raises(AuthError) as unknown:
        auth.for_import(basic("no-such-account", "whatever"), "1")
    with pytest.raises(AuthError) as wrong:
        auth.for_import(basic("owner-sa", "wrong-secret"), "1")
    assert unknown.value.status == wrong.value.status == 401
    assert unknown.value.message == wrong.value.message  # nothing tells the two apart
    assert len(hashed) == 2  # one scrypt each
    assert hashed[0] == credentials.decoy_hash() and hashed[1] != hashed[0]


def test_throttle_counts_failures_per_username_and_address() -> None:
    clock = Clock()
    throttle = LoginThrottle(limit=3, address_limit=5, window=60, clock=clock)
    for _ in range(3):
        throttle.check("alice", "10.0.0.1")
        throttle.failed("alice", "10.0.0.1")
    with pytest.raises(AuthError) as refused:
        throttle.check("alice", "10.0.0.1")
    assert refused.value.status == 429 and refused.value.retry_after == 60
    throttle.check("alice", "10.0.0.2")  # the user is not locked out from elsewhere
    throttle.check("bob", "10.0.0.1")  # nor is the address for other users, below its own limit
    throttle.failed("bob", "10.0.0.1")
    throttle.failed("carol", "10.0.0.1")
    with pytest.raises(AuthError):  # 5 failures from one address, whatever the usernames
        throttle.check("dave", "10.0.0.1")
    clock.now += 30
    with pytest.raises(AuthError) as later:
        throttle.check("alice", "10.0.0.1")
    assert later.value.retry_after == 30
    clock.now += 31  # the window has passed
    throttle.check("alice", "10.0.0.1")
    throttle.check("dave", "10.0.0.1")


def test_throttle_forgets_a_pair_after_a_success_and_bounds_its_memory() -> None:
    throttle = LoginThrottle(limit=2, address_limit=0, window=60, max_keys=100, clock=Clock())
    throttle.failed("alice", "a")
    throttle.succeeded("alice", "a")
    throttle.failed("alice", "a")
    throttle.check("alice", "a")  # one failure since the success
    for i in range(1000):
        throttle.failed(f"user-{i}", f"addr-{i}")
    assert len(throttle._failures) <= 100


def test_a_throttled_pair_is_refused_before_any_secret_is_checked(
    directory: Directory, creds, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    auth = Authenticator(directory, throttle=LoginThrottle(limit=2, window=60, clock=Clock()))
    checks: list[str] = []
    real = credentials.verify_secret

    def counting(secret: str, stored: str) -> bool:
        checks.append(secret)
        return real(secret, stored)

    monkeypatch.setattr(credentials, "verify_secret", counting)

    async def attempt(secret: str, client: str = "198.51.100.7") -> int:
        try:
            await auth.for_import_async(basic("owner-sa", secret), "1", client=client)
        except AuthError as exc:
            return exc.status
        return 200

    async def scenario() -> list[int]:
        return [await attempt("wrong-1"), await attempt("wrong-2"), await attempt("wrong-3"),
                await attempt(creds.sa_secret), await attempt(creds.sa_secret, client="198.51.100.8")]  # fmt: skip

    assert asyncio.run(scenario()) == [401, 401, 429, 429, 200]
    assert checks.count("wrong-3") == 0  # refused without a scrypt
