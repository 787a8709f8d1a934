"""Upgrades in place: a store written at an earlier schema version opens with today's
release, migrates, and answers the same reports as a store built today (issue 16).

The earlier versions: the oldest, and each one right before a migration that changes
stored data (an `INSERT … SELECT` backfill or an `ALTER`), so every such migration runs over
a store with rows in every table that existed before it. A version followed by `CREATE`
statements only adds nothing to that: its new, empty tables are written by today's release
after the upgrade, as in the store of the next version.

The earlier stores are generated (tests/upgrade_driver.py): the migrations up to version K,
then the rows of a reference store written in the tables and columns that existed at K.
One process per store, since chDB opens one data folder per process.
"""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from footfall.shared.schema.migrate import discover
from tests.upgrade_driver import versions

pytestmark = [pytest.mark.warehouse, pytest.mark.timeout(240)]


def drive(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.upgrade_driver", *args], capture_output=True, timeout=200, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    return orjson.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("upgrade-reference")
    dump, answers = root / "rows.pickle", root / "answers.json"
    drive("reference", "--data", str(root / "data"), "--dump", str(dump), "--answers", str(answers))
    return dump, orjson.loads(answers.read_bytes())


def earlier_versions() -> list[int]:
    """The oldest version and each one whose next migration does more than CREATE."""
    found = discover()
    changes = [v for (v, _, _), (_, _, statements) in pairwise(found)
               if any(not s.lstrip().upper().startswith("CREATE") for s in statements)]  # fmt: skip
    return sorted({found[0][0], *changes})


@pytest.mark.parametrize("version", earlier_versions(), ids=lambda v: f"from-m{v:04d}")
def test_store_of_an_earlier_version_upgrades_and_answers_the_same(
    reference: tuple[Path, dict[str, Any]], version: int, tmp_path: Path
) -> None:
    dump, expected = reference
    answers = tmp_path / "answers.json"
    run = drive(
        "upgrade", "--data", str(tmp_path / "data"), "--dump", str(dump), "--answers", str(answers),
        "--from-version", str(version),
    )  # fmt: skip
    assert run["old"] and max(run["old"]) == version
    assert run["new"] == [v for v in versions() if v > version]
    got = orjson.loads(answers.read_bytes())
    assert all(status == 200 for status, _ in expected.values()), "the reference must answer every report"
    differ = [key for key in expected if got.get(key) != expected[key]]
    assert not differ, f"upgraded from m{version:04d}, these answers differ: {differ[:10]}"
