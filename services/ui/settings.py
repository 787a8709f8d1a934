"""The web UI's settings: how many signed-in sessions one process keeps and how long an idle one lives."""

from __future__ import annotations

from dataclasses import dataclass

from footfall.shared.config import ConfigError, Env


@dataclass(frozen=True)
class UiSettings:
    max_sessions: int = 1000  # FOOTFALL_UI_MAX_SESSIONS: beyond it the least recently used is signed out
    idle_seconds: float = 1800.0  # FOOTFALL_UI_SESSION_IDLE_SECONDS: a session unused this long is gone

    @classmethod
    def from_env(cls, env: Env) -> UiSettings:
        settings = cls(
            max_sessions=env.integer("UI_MAX_SESSIONS", cls.max_sessions),
            idle_seconds=env.number("UI_SESSION_IDLE_SECONDS", cls.idle_seconds),
        )
        if settings.max_sessions < 1:
            raise ConfigError(f"FOOTFALL_UI_MAX_SESSIONS must be at least 1, got {settings.max_sessions}")
        if not settings.idle_seconds > 0:
            raise ConfigError(f"FOOTFALL_UI_SESSION_IDLE_SECONDS must be positive, got {settings.idle_seconds}")
        return settings
