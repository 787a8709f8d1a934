"""The Rust `/import` fast path's tests need its extension: skipped without it, except in CI,
where the suite must test it (`make test` builds it)."""

from __future__ import annotations

import os

import pytest

from footfall.shared.events import fast_import


def require_extension() -> None:
    """Call at module level of a test module of the fast path."""
    if fast_import.available():
        return
    if os.environ.get("CI", "").lower() == "true":
        raise RuntimeError("CI=true: the Rust extension (shared/events/fastpath) must be built")
    pytest.skip("the Rust extension is not installed", allow_module_level=True)
