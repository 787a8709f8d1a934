"""Server-side sessions of the web UI, in memory.

A session holds what the browser signed in with (the `Authorization` header it stands for and
the project), a CSRF token and when it was last used. The browser holds only the session id,
an unguessable random value in an `HttpOnly`, `SameSite=Strict` cookie. The store keeps at
most `max_sessions` (the least recently used is dropped first) and forgets a session unused for
`idle_seconds`. Sessions live in one process: a restart signs everybody out.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Session:
    sid: str
    csrf: str
    authorization: str  # the Basic header the UI forwards to the HTTP interface
    project_id: int
    who: str  # shown in the header bar: the service account's name, or "project secret"
    last_used: float


class SessionStore:
    def __init__(self, max_sessions: int, idle_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, authorization: str, project_id: int, who: str) -> Session:
        self._expire()
        session = Session(
            sid=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            authorization=authorization,
            project_id=project_id,
            who=who,
            last_used=self.clock(),
        )
        self._sessions[session.sid] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session of `sid` (its idle clock restarts), or None."""
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None:
            return None
        now = self.clock()
        if now - session.last_used > self.idle_seconds:
            del self._sessions[sid]
            return None
        session.last_used = now
        self._sessions.move_to_end(sid)
        return session

    def drop(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    def _expire(self) -> None:
        """Forget idle sessions, oldest first (the order is least recently used first)."""
        now = self.clock()
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if now - session.last_used <= self.idle_seconds:
                return
            del self._sessions[sid]
