"""Parse a warehouse DSN: `chdb:///abs/path` or `http(s)://user:pass@host:port/db`."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


class DsnError(ValueError):
    pass


@dataclass(frozen=True)
class Dsn:
    scheme: str  # "chdb" | "http" | "https"
    path: str = ""  # chdb data folder
    host: str = ""
    port: int = 0
    username: str = "default"
    password: str = ""
    database: str = "default"

    @property
    def embedded(self) -> bool:
        return self.scheme == "chdb"


def parse_dsn(text: str) -> Dsn:
    parts = urlsplit(text)
    if parts.scheme == "chdb":
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise DsnError(f"chdb DSN needs an absolute path: {text!r}")
        return Dsn(scheme="chdb", path=path)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise DsnError(f"DSN has no host: {text!r}")
        default_port = 8443 if parts.scheme == "https" else 8123
        return Dsn(
            scheme=parts.scheme,
            host=parts.hostname,
            port=parts.port or default_port,
            username=unquote(parts.username or "default"),
            password=unquote(parts.password or ""),
            database=parts.path.strip("/") or "default",
        )
    raise DsnError(f"unsupported warehouse DSN scheme {parts.scheme!r} (use chdb:// or http(s)://)")
