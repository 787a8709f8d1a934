"""First start: create project 1 with a token, a secret and an Owner service account.

The credentials are printed once and written to `<data>/bootstrap.json` (mode 0600);
only their hashes are stored. `FOOTFALL_BOOTSTRAP_*` variables fix the values (tests,
scripted deployments).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from footfall.shared import credentials
from footfall.shared.config import BootstrapSettings
from footfall.shared.credentials import Role
from footfall.shared.metadata import MetadataRepository

BOOTSTRAP_FILE = "bootstrap.json"


def bootstrap_if_empty(
    repo: MetadataRepository, fixed: BootstrapSettings, data_dir: Path, *, region: str = ""
) -> dict[str, Any] | None:
    """Create the default project (in organization 1 and the deployment's `region`) when
    there is none; return the new credentials or None."""
    if repo.list_projects():
        return None
    project = repo.create_project("Default", "UTC", project_id=1, region=region)
    token = fixed.token or credentials.new_token()
    secret = fixed.secret or credentials.new_secret()
    username = fixed.sa_username or credentials.new_username(project.project_id)
    sa_secret = fixed.sa_secret or credentials.new_secret()
    repo.add_project_credential(project.project_id, "token", token)
    repo.add_project_credential(project.project_id, "secret", secret)
    sa_id = repo.create_service_account(username, sa_secret)
    repo.grant(sa_id, project.project_id, Role.OWNER)
    created = {
        "project_id": project.project_id,
        "project_name": project.name,
        "timezone": project.timezone,
        "project_token": token,
        "project_secret": secret,
        "service_account": {"id": sa_id, "username": username, "secret": sa_secret, "role": Role.OWNER},
    }
    write_bootstrap_file(data_dir / BOOTSTRAP_FILE, created)
    return created


def write_bootstrap_file(path: Path, content: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(orjson.dumps(content, option=orjson.OPT_INDENT_2) + b"\n")
    os.chmod(path, 0o600)
