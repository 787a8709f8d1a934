"""The one root of the errors a request can end in.

A `FootfallError` carries what every interface needs to answer: the HTTP status, a
message the client may read, and an optional `Retry-After` in seconds. Each interface
renders it in its own body shape through the Starlette exception handlers that
`footfall.shared.web.build_starlette` installs (query: `{"request", "error"}`;
management: `{"error", "status": "error"}`; ingestion: its documented answers).
Code raises the subclass that names the situation; nothing catches and re-wraps.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "FootfallError",
    "NotFoundError",
    "ParamError",
    "QueryTooCostlyError",
    "RateLimitedError",
    "UnavailableError",
]


class FootfallError(Exception):
    """A request that cannot be answered as asked: `status`, `message`, `retry_after`."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Picklable whatever a subclass's constructor takes: errors cross from a job process.
        return (_restore, (type(self), self.status, self.message, self.retry_after))


def _restore(cls: type[FootfallError], status: int, message: str, retry_after: int | None) -> FootfallError:
    error = cls.__new__(cls)
    FootfallError.__init__(error, status, message, retry_after=retry_after)
    return error


class ParamError(FootfallError):
    """A missing or invalid request value (400); the message names the parameter or member."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


class AuthError(FootfallError):
    """Authentication (401), authorisation (403) or login throttling (429)."""


class NotFoundError(FootfallError):
    """The addressed item does not exist in the caller's project (404)."""

    def __init__(self, message: str) -> None:
        super().__init__(404, message)


class RateLimitedError(FootfallError):
    """A per-project budget is spent (429); `retry_after` says when to come back."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(429, message, retry_after=retry_after)


class UnavailableError(FootfallError):
    """A dependency (broker, store) cannot durably serve the request now (503)."""

    def __init__(
        self, message: str = "service temporarily unavailable, retry with backoff", *, retry_after: int = 2
    ) -> None:
        super().__init__(503, message, retry_after=retry_after)


class QueryTooCostlyError(FootfallError):
    """A query stopped by its time or memory limit (400: the same query would fail again)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)
