"""The body of `POST {migrate_url}/<source_tool>` (§14.1), parsed into a `MigrationRequest`.

Pure: the clock is passed in. Field names match case-insensitively, unknown fields are ignored,
every error names its field (400, the App error shape). Source credentials stay in
`credentials` and are never part of what a job returns or logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlsplit

import orjson

from footfall.shared.errors import NotFoundError, ParamError

__all__ = ["SOURCE_TOOLS", "MigrationRequest", "parse_request"]

SOURCE_TOOLS = ("amplitude", "mixpanel")
REGIONS = ("US", "EU", "IN")
DEFAULT_DAYS = 30
MAX_DAYS = 366


@dataclass(frozen=True)
class MigrationRequest:
    source_tool: str
    token: str  # the destination project's token
    start: date
    end: date
    dry_run: bool
    region: str
    source_region: str  # resolved: SOURCE_REGION, else REGION, else US
    region_explicit: bool  # the source region came from SOURCE_REGION (no fallback to the other host)
    source_url: str | None
    credentials: dict[str, Any] = field(repr=False)  # never returned or logged


def _text(fields: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = fields.get(name.lower())
    if value is None or value == "":
        if required:
            raise ParamError(f"{name} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ParamError(f"{name} must be a string")
    return str(value)


def _flag(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name.lower())
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    raise ParamError(f"{name} must be true or false")


def _date(fields: dict[str, Any], name: str) -> date | None:
    raw = _text(fields, name)
    if raw is None:
        return None
    try:
        if len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise ParamError(f"{name} must be a date YYYY-MM-DD, got {raw[:40]!r}") from None


def _region(fields: dict[str, Any], name: str) -> str | None:
    raw = _text(fields, name)
    if raw is None:
        return None
    region = raw.upper()
    if region not in REGIONS:
        raise ParamError(f"{name} must be one of US, EU, IN")
    return region


def window(start: date | None, end: date | None, today: date) -> tuple[date, date]:
    """The inclusive UTC window (§14.1 Decision)."""
    if end is None:
        end = today
        if start is None:
            start = today - timedelta(days=DEFAULT_DAYS - 1)
    elif start is None:
        start = end - timedelta(days=DEFAULT_DAYS - 1)
    if end > today:
        raise ParamError("END_DATE must not be after today (UTC)")
    if start > end:
        raise ParamError("START_DATE must not be after END_DATE")
    if (end - start).days + 1 > MAX_DAYS:
        raise ParamError(f"START_DATE: the window spans more than {MAX_DAYS} days")
    return start, end


def parse_request(
    source_tool: str, body: bytes, *, today: date, allowlist: frozenset[str] = frozenset()
) -> MigrationRequest:
    if source_tool not in SOURCE_TOOLS:
        raise NotFoundError(f"unknown source tool {source_tool[:40]!r}: use amplitude or mixpanel")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ParamError("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ParamError("the body must be a JSON object")
    fields = {str(k).lower(): v for k, v in data.items()}
    token = _text(fields, "MIXPANEL_TOKEN") or _text(fields, "FOOTFALL_TOKEN")
    if token is None:
        raise ParamError("MIXPANEL_TOKEN is required (the destination project's token)")
    start, end = window(_date(fields, "START_DATE"), _date(fields, "END_DATE"), today)
    dry_run = _flag(fields, "DRY_RUN")
    region = _region(fields, "REGION")
    source_region = _region(fields, "SOURCE_REGION")
    resolved = source_region or region or "US"
    credentials: dict[str, Any]
    source_url: str | None = None
    if source_tool == "amplitude":
        if resolved == "IN":
            raise ParamError("REGION: Amplitude has no India residency (use SOURCE_REGION US or EU)")
        credentials = {
            "api_key": _text(fields, "AMPLITUDE_API_KEY", required=True),
            "api_secret": _text(fields, "AMPLITUDE_API_SECRET", required=True),
        }
    else:
        secret = _text(fields, "MIXPANEL_API_SECRET", required=True)
        username = _text(fields, "MIXPANEL_API_KEY")
        project_id = _text(fields, "MIXPANEL_PROJECT_ID")
        if project_id is not None and not project_id.isdigit():
            raise ParamError("MIXPANEL_PROJECT_ID must be an integer")
        if username is not None and project_id is None:
            raise ParamError("MIXPANEL_PROJECT_ID is required with MIXPANEL_API_KEY (a service account)")
        credentials = {"username": username, "secret": secret, "project_id": project_id}
        source_url = _source_url(_text(fields, "SOURCE_URL"), allowlist)
    return MigrationRequest(
        source_tool,
        token,
        start,
        end,
        dry_run,
        region or "US",
        resolved,
        source_region is not None,
        source_url,
        credentials,
    )


def _source_url(raw: str | None, allowlist: frozenset[str]) -> str | None:
    if raw is None:
        return None
    parts = urlsplit(raw)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise ParamError("SOURCE_URL must be an http(s) URL")
    if host not in allowlist:
        raise ParamError(f"SOURCE_URL: host {host[:100]!r} is not on FOOTFALL_MIGRATE_SOURCE_ALLOWLIST")
    if parts.scheme == "http" and host not in ("127.0.0.1", "localhost", "::1"):
        raise ParamError("SOURCE_URL must use https (plain http only on loopback)")
    return raw.rstrip("/")
