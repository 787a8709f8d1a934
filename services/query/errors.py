"""Errors of the query interface. Body shape (semantics §0.4): {"request": ..., "error": ...}."""

from __future__ import annotations


class QueryError(Exception):
    """Root of the query service's client-facing errors; carries the HTTP status."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


class ParamError(QueryError):
    """A missing or invalid request parameter; the message names the parameter."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)
