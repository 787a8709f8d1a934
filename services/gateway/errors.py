"""Errors the gateway answers with; each carries its HTTP status and interface status text."""

from __future__ import annotations

STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


class GatewayError(Exception):
    """Root of the gateway's client-facing errors."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


class SinkUnavailableError(GatewayError):
    """The sink could not durably accept the events (broker down, slow, or storage failing)."""

    def __init__(self, message: str = "service temporarily unavailable, retry with backoff", retry_after: int = 2):
        super().__init__(503, message, retry_after=retry_after)
