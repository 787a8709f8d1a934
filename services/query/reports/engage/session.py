"""Paging sessions: the `session_id` that page 0 hands out and later pages bring back.

Two kinds, told apart by the id itself:

* snapshot `<created ms>-S<20 hex>`: the result had more than one page; its ordered members
  are rows of `engage_sessions` under this id (one `INSERT … SELECT`), so the id is only
  valid while those rows are there;
* single page `<created ms>-P<total>-<12 hex>`: the whole result fitted on page 0 and
  nothing was stored; a later page lies past the end (`results: []`, the same `total`).

A session lives `SESSION_HOURS` of wall-clock time (`session_clock`) from its page 0
(the table's TTL is an hour longer, so rows
never vanish while their session is valid; reads check `created_at` themselves, as a TTL
deletes only on merges). The random part makes ids unguessable; a single-page id carries
no data, so a made-up one can only ever read an empty page.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from footfall.shared.errors import ParamError

__all__ = [
    "SESSION_HOURS",
    "Session",
    "parse_session",
    "session_clock",
    "single_page_session",
    "snapshot_session",
    "unknown",
]

SESSION_HOURS = 24
_ID = re.compile(r"([0-9]{1,15})-(?:S([0-9a-f]{20})|P([0-9]{1,10})-([0-9a-f]{12}))")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Session:
    session_id: str
    created: datetime
    snapshot: bool
    total: int | None  # single-page sessions carry their total; a snapshot's is counted in the table


def session_clock() -> datetime:
    """Wall-clock time for session lifetimes (not the reports' clock, which tests move to
    their data: a session's rows must not look expired to the table's TTL)."""
    return datetime.now(UTC)


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def snapshot_session(created: datetime) -> Session:
    created = _EPOCH + timedelta(milliseconds=_ms(created))
    return Session(f"{_ms(created)}-S{secrets.token_hex(10)}", created, True, None)


def single_page_session(created: datetime, total: int) -> Session:
    created = _EPOCH + timedelta(milliseconds=_ms(created))
    return Session(f"{_ms(created)}-P{total}-{secrets.token_hex(6)}", created, False, total)


def unknown(session_id: str) -> ParamError:
    shown = session_id if len(session_id) <= 60 else session_id[:60] + "..."
    return ParamError(
        f"Error in session_id: unknown or expired session {shown!r} (sessions last {SESSION_HOURS} hours); "
        "ask for page 0 again to start a new one"
    )


def parse_session(session_id: str, now: datetime) -> Session:
    """The session a later page names; a malformed, expired or future id is a 400 saying so."""
    m = _ID.fullmatch(session_id)
    if m is None:
        raise unknown(session_id)
    created = _EPOCH + timedelta(milliseconds=int(m.group(1)))
    if not now - timedelta(hours=SESSION_HOURS) <= created <= now + timedelta(minutes=5):
        raise unknown(session_id)
    if m.group(2) is not None:
        return Session(session_id, created, True, None)
    return Session(session_id, created, False, int(m.group(3)))
