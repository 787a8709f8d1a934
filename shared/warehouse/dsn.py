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
        # `chdb://data/chdb` would otherwise silently mean `/chdb`: the host part is not a path.
        if parts.netloc or not path.startswith("/"):
            raise DsnError(f"chdb DSN needs an absolute path, as in chdb:///abs/path: {text!r}")
        return Dsn(scheme="chdb", path=path)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise DsnError(f"DSN has no host: {text!r}")
        try:
            port = parts.port
        except ValueError:
            raise DsnError(f"DSN has an invalid port: {text!r}") from None
        database = unquote(parts.path.strip("/")) or "default"
        if "/" in database:
            raise DsnError(f"DSN path must be a single database name: {text!r}")
        default_port = 8443 if parts.scheme == "https" else 8123
        return Dsn(
            scheme=parts.scheme,
            host=parts.hostname,
            port=port or default_port,
            username=unquote(parts.username or "default"),
            password=unquote(parts.password or ""),
            database=database,
        )
    raise DsnError(f"unsupported warehouse DSN scheme {parts.scheme!r} (use chdb:// or http(s)://)")
