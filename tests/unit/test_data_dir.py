"""The data folder is created as 0700, and an existing one tightened to 0700 (issue 15)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from footfall.shared.config import StoreSettings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_data_folder_is_created_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = StoreSettings(data_dir=tmp_path / "a" / "data").make_data_dir()
    finally:
        os.umask(old)
    assert made == tmp_path / "a" / "data" and mode(made) == 0o700


def test_existing_data_folder_is_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "file").write_text("x")
    StoreSettings(data_dir=folder).make_data_dir()
    assert mode(folder) == 0o700
    StoreSettings(data_dir=folder).make_data_dir()  # idempotent
    assert mode(folder) == 0o700
