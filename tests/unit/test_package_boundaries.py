"""The tree is the data flow: which service package may import which (STYLE "explicit wiring").

Only the composition roots (`standalone`, each service's `main.py`, the CLI) assemble other
services' routes; otherwise a service imports `footfall.shared` and itself, with the few
documented exceptions below (the embedded path runs the worker's store step; the query
service's own `main.py` also serves management). `footfall.shared` imports no service.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> the other service packages it may import (anything under footfall.shared is fine)
ALLOWED: dict[str, set[str]] = {
    "gateway": set(),
    "worker": set(),
    "query": set(),
    "app": set(),
    "migrate": set(),
    "ui": set(),  # the web UI reaches the other services only through HTTP (in-process)
    "standalone": {"gateway", "worker", "query", "app", "migrate", "ui"},  # the embedded composition root
}
# composition roots outside `standalone`: module -> extra packages it wires in
ROOTS: dict[str, set[str]] = {
    "services/query/main.py": {"app", "ui"},  # `footfall query` also serves management and the web UI
    "services/migrate/main.py": {"gateway"},  # `footfall migrate` publishes through the Kafka sink
    "services/cli.py": {"standalone", "gateway", "worker", "query", "app", "migrate"},
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def service_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["footfall", "services"] and len(parts) > 2:
        return parts[2]
    return None


def source_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", source_files("services"), ids=lambda p: str(p.relative_to(ROOT)))
def test_services_import_only_what_their_package_may(path: Path) -> None:
    relative = str(path.relative_to(ROOT))
    parts = path.relative_to(ROOT / "services").parts
    own = parts[0] if len(parts) > 1 else None
    allowed = ROOTS.get(relative, set()) | (ALLOWED.get(own, set()) if own else set())
    wrong = sorted(
        m for m in imports_of(path) if (svc := service_of(m)) is not None and svc != own and svc not in allowed
    )
    assert not wrong, f"{relative} imports {wrong}"


@pytest.mark.parametrize("path", source_files("shared"), ids=lambda p: str(p.relative_to(ROOT)))
def test_shared_imports_no_service(path: Path) -> None:
    assert not [m for m in imports_of(path) if service_of(m) is not None or m.startswith("services")]


def test_the_boundaries_check_real_files() -> None:
    assert len(source_files("services")) > 50 and len(source_files("shared")) > 30
    assert service_of("footfall.services.query.app") == "query"
