"""`footfall gateway` builds with or without the Rust extension: without it (a package installed
where no Rust toolchain was, as the Docker image) every request takes the Python path."""

from __future__ import annotations

import pytest

from footfall.services.gateway.main import build_gateway
from footfall.services.gateway.settings import GatewaySettings
from footfall.shared.events import fast_import


def _fast_path_of(app: object) -> object:
    endpoint = next(r.endpoint for r in app.routes if getattr(r, "path", "") == "/import")  # type: ignore[attr-defined]
    return endpoint.__self__.fast


def test_the_gateway_builds_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = GatewaySettings.from_env({"FOOTFALL_KAFKA_BOOTSTRAP": "127.0.0.1:1"})
    monkeypatch.setattr(fast_import, "_fastpath", None)
    assert _fast_path_of(build_gateway(settings)) is None


def test_the_gateway_takes_the_fast_path_with_the_extension_unless_turned_off() -> None:
    if not fast_import.available():
        pytest.skip("the Rust extension is not installed")
    on = GatewaySettings.from_env({"FOOTFALL_KAFKA_BOOTSTRAP": "127.0.0.1:1"})
    off = GatewaySettings.from_env({"FOOTFALL_KAFKA_BOOTSTRAP": "127.0.0.1:1", "FOOTFALL_IMPORT_FAST_PATH": "0"})
    assert _fast_path_of(build_gateway(on)) is not None
    assert _fast_path_of(build_gateway(off)) is None
