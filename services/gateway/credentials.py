"""The gateway's view of credentials: an `Authenticator` fed by the directory topic.

Until the first snapshot has arrived the gateway cannot tell a good credential from a
bad one, so it answers 503 (retry later), not 401.
"""

from __future__ import annotations

from footfall.shared.auth import Authenticator, Principal
from footfall.shared.config import RegionSettings
from footfall.shared.errors import UnavailableError
from footfall.shared.metadata import Directory, Project


class FollowedAuthenticator(Authenticator):
    def __init__(self, region: RegionSettings | None = None) -> None:
        super().__init__(Directory(), region=region)
        self.loaded = False

    def replace(self, directory: Directory) -> None:
        super().replace(directory)
        self.loaded = True

    def for_import(self, header: str | None, project_id_param: str | None) -> Principal:
        if not self.loaded:
            raise UnavailableError("credentials not loaded yet, retry with backoff")
        return super().for_import(header, project_id_param)

    def project_for_token(self, token: str) -> Project | None:
        if not self.loaded:
            raise UnavailableError("credentials not loaded yet, retry with backoff")
        return super().project_for_token(token)
