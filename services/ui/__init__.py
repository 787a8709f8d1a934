"""The web UI (`/ui`): sign-in, server-side sessions, and pages drawn from the HTTP interface's answers."""

from __future__ import annotations

from footfall.services.ui.app import UI, ui_routes
from footfall.services.ui.sessions import Session, SessionStore
from footfall.services.ui.settings import UiSettings

__all__ = ["UI", "Session", "SessionStore", "UiSettings", "ui_routes"]
