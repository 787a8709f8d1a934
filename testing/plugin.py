"""The pytest plugin (entry point `pytest11: footfall`): fixtures that start Footfall.

* `footfall` (session): an embedded `footfall serve` on a free port, its data in a temporary
  folder, project 1 with the fixed `Credentials()`; yields a `FootfallInstance`
  (`url`, `host`, `token`, `secret`, `auth`, `project_id`).
* `footfall_env` (session, `{}`): override it in a `conftest.py` to give the server settings,
  e.g. `{"FOOTFALL_QUERY_RATE_PER_HOUR": "0"}`.
* `footfall_credentials` (session, `Credentials()`): override it to choose the credentials.

Nothing here imports Footfall's services: the server is a child process of this interpreter.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from footfall.testing.server import Credentials, FootfallInstance, run_footfall


@pytest.fixture(scope="session")
def footfall_env() -> dict[str, str]:
    return {}


@pytest.fixture(scope="session")
def footfall_credentials() -> Credentials:
    return Credentials()


@pytest.fixture(scope="session")
def footfall(
    tmp_path_factory: pytest.TempPathFactory, footfall_env: dict[str, str], footfall_credentials: Credentials
) -> Iterator[FootfallInstance]:
    data_dir = tmp_path_factory.mktemp("footfall") / "data"
    with run_footfall(data_dir, credentials=footfall_credentials, env=footfall_env) as instance:
        yield instance
