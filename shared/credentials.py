"""Credentials: generation, hashing and constant-time checks.

Nothing here stores a secret in the clear. Project tokens and secrets are looked up by
`lookup_key()` (a keyed SHA-256, so the stored value is useless without the secret
itself) and then compared with `hmac.compare_digest`. Service-account secrets are
salted and stretched with scrypt; a verified (username, secret) pair is remembered as a
keyed digest for a short while so that high-volume importers do not pay scrypt on every
request.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

_LOOKUP_CONTEXT = b"footfall-credential-lookup-v1"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


class Role:
    OWNER = "owner"
    ADMIN = "admin"
    ANALYST = "analyst"
    CONSUMER = "consumer"

    ALL = (OWNER, ADMIN, ANALYST, CONSUMER)
    CAN_IMPORT = (OWNER, ADMIN)


def new_token() -> str:
    """A project token: 32 hex characters, like the interface's tokens."""
    return secrets.token_hex(16)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def new_username(project_id: int) -> str:
    return f"footfall-sa.{project_id}.{secrets.token_hex(4)}"


def lookup_key(value: str) -> str:
    """Deterministic keyed hash used to find a token or project secret without storing it."""
    return hmac.new(_LOOKUP_CONTEXT, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def hash_secret(secret: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode("utf-8", "surrogatepass"), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def verify_secret(secret: str, stored: str) -> bool:
    try:
        scheme, salt_hex, digest_hex = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    digest = hashlib.scrypt(secret.encode("utf-8", "surrogatepass"), salt=bytes.fromhex(salt_hex), **_SCRYPT)
    return hmac.compare_digest(digest.hex(), digest_hex)


@functools.cache
def decoy_hash() -> str:
    """A stored-hash look-alike checked when a username is unknown, so that an unknown username
    costs the same scrypt as a wrong secret (no user enumeration by timing)."""
    return hash_secret(secrets.token_urlsafe(32))


@dataclass
class VerifiedCache:
    """Remembers recently verified service-account secrets (as keyed digests) for `ttl` seconds."""

    ttl: float = 300.0

    def __post_init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._seen: dict[str, tuple[str, float]] = {}

    def _digest(self, stored_hash: str, secret: str) -> str:
        material = stored_hash.encode() + b"\0" + secret.encode("utf-8", "surrogatepass")
        return hmac.new(self._key, material, hashlib.sha256).hexdigest()

    def verify(self, secret: str, stored_hash: str) -> bool:
        digest = self._digest(stored_hash, secret)
        now = time.monotonic()
        hit = self._seen.get(stored_hash)
        if hit is not None and hit[1] > now and hmac.compare_digest(hit[0], digest):
            return True
        if not verify_secret(secret, stored_hash):
            return False
        if len(self._seen) > 10_000:
            self._seen.clear()
        self._seen[stored_hash] = (digest, now + self.ttl)
        return True
