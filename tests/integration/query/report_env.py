"""A query service over the session's chDB store, loaded with a generated dataset.

Used by the breakdown tests (segmentation, events, properties): the gateway's `/import`
and the query routes in one Starlette app, driven in-process through
`httpx.ASGITransport`. Each project of `tests.factories.make_dataset` gets its own time
zone and project secret. Events go through the real `/import` (strict=1) in request
order; a batch is cut before a repeated dedup key so every copy of a duplicate is its
own request (the last copy is then the most recently ingested, as the oracle assumes).
Background merges of `events` are stopped while the module runs, so the duplicates stay
in separate parts and the reports must collapse them themselves. `serving` does all of
it for a module's `loaded` fixture, with the reports' clock set to the dataset's `now`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from footfall.services.app.cohorts import cohort_routes
from footfall.services.app.data_groups import data_group_routes
from footfall.services.app.saved import MANAGEMENT, saved_routes
from footfall.services.gateway.app import INGESTION, ingestion_routes
from footfall.services.query import app as query_app
from footfall.services.query.endpoints import QUERY
from footfall.services.query.reports import _common
from footfall.services.query.settings import ExportLimits, QuerySettings
from footfall.services.standalone.sink import EmbeddedSink
from footfall.services.worker.enrich import Enricher
from footfall.shared.auth import Authenticator
from footfall.shared.config import ImportLimits
from footfall.shared.metadata import MetadataRepository
from footfall.shared.saved import WarehouseSavedStore
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.web import build_starlette
from tests.factories import Dataset, ProjectSpec, normalize_key
from tests.integration.conftest import truncate_all

SA_USER, SA_SECRET = "report-sa", "report-sa-secret"


def secret_of(project_id: int) -> str:
    return f"report-secret-{project_id}"


@dataclass
class ReportEnv:
    """The app, its in-process client and the projects (id -> time zone)."""

    warehouse: ClickHouseWarehouse
    app: Any
    projects: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://footfall.test", timeout=120)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self._runner.run(self._client.request(method, url, **kwargs))

    def query(
        self, project_id: int, path: str, params: dict[str, str], *, prefix: str = "/api/query"
    ) -> httpx.Response:
        """GET `prefix + path` with the project's secret (Basic `secret:`)."""
        return self.request("GET", prefix + path, params=params, auth=(secret_of(project_id), ""))

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


def build_env(
    warehouse: ClickHouseWarehouse,
    zones: dict[int, str],
    settings: QuerySettings | None = None,
    *,
    keep_data: bool = False,
) -> ReportEnv:
    """Empty the store (unless `keep_data`), create the projects and credentials, build
    the app (no query limits unless `settings` says otherwise)."""
    if not keep_data:
        truncate_all(warehouse)
    repo = MetadataRepository(warehouse)
    sa_id = repo.create_service_account(SA_USER, SA_SECRET, sa_id=1)
    for pid, tz in sorted(zones.items()):
        repo.create_project(f"project {pid}", tz, project_id=pid)
        repo.add_project_credential(pid, "secret", secret_of(pid))
        repo.add_project_credential(pid, "token", f"report-token-{pid}")
        repo.grant(sa_id, pid, "owner")
    return app_for(warehouse, zones, settings)


def app_for(warehouse: ClickHouseWarehouse, zones: dict[int, str], settings: QuerySettings | None = None) -> ReportEnv:
    """The app over a store whose projects and credentials exist already."""
    authenticator = Authenticator(MetadataRepository(warehouse).load_directory())
    settings = settings or QuerySettings(rate_per_hour=0, concurrency=0, export=ExportLimits(0, 0, 0))
    routes = ingestion_routes(authenticator, EmbeddedSink(warehouse, Enricher(None)), ImportLimits())
    counter = query_app.cohort_counter(warehouse, settings)
    routes += query_app.query_routes(authenticator, warehouse, settings, counter)
    routes += saved_routes(authenticator, WarehouseSavedStore(warehouse)) + data_group_routes(authenticator, warehouse)
    routes += cohort_routes(authenticator, counter.store, counter.count_of)
    app = build_starlette("report-test", routes, interfaces=[INGESTION, QUERY, MANAGEMENT])
    return ReportEnv(warehouse, app, dict(zones))


def _batches(events: list[dict[str, Any]], size: int = 1000) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    keys: set[tuple[str, int, str, str]] = set()
    for raw in events:
        key = normalize_key(raw)
        if len(batch) >= size or key in keys:
            yield batch
            batch, keys = [], set()
        batch.append(raw)
        keys.add(key)
    if batch:
        yield batch


def import_events(env: ReportEnv, project_id: int, events: list[dict[str, Any]]) -> int:
    imported = 0
    for batch in _batches(events):
        r = env.request(
            "POST",
            f"/import?strict=1&project_id={project_id}",
            content=orjson.dumps(batch),
            headers={"Content-Type": "application/json"},
            auth=(secret_of(project_id), ""),
        )
        assert r.status_code == 200, r.text[:2000]
        imported += r.json()["num_records_imported"]
    return imported


def load_dataset(env: ReportEnv, dataset: Dataset) -> None:
    env.warehouse.command("SYSTEM STOP MERGES events")
    for pid, spec in sorted(dataset.projects.items()):
        import_events(env, pid, spec.events)


def release(env: ReportEnv) -> None:
    env.warehouse.command("SYSTEM START MERGES events")
    env.close()


@contextmanager
def serving(warehouse: ClickHouseWarehouse, dataset: Dataset) -> Iterator[ReportEnv]:
    """An env with `dataset` loaded and the reports' clock at `dataset.now`; released on exit
    (the body of the module-scoped `loaded` fixtures)."""
    env = build_env(warehouse, {pid: spec.tz for pid, spec in dataset.projects.items()})
    load_dataset(env, dataset)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_common, "utc_now", lambda: dataset.now)
        yield env
    release(env)


Case = Callable[[ProjectSpec], dict[str, str]]


def rng(spec: ProjectSpec, **extra: str) -> dict[str, str]:
    """The project's date range plus `extra` parameters."""
    return {"from_date": spec.from_date, "to_date": spec.to_date, **extra}


# -- comparison ----------------------------------------------------------------------------------
IGNORED = frozenset({"computed_at"})


def diff(ours: Any, oracle: Any, path: str = "$") -> list[str]:
    """Differences between two JSON bodies: exact, except floats within 1e-9 (relative to
    the magnitude, absolute below 1) and dict key order, which must match too."""
    out: list[str] = []
    if isinstance(oracle, dict) and isinstance(ours, dict):
        keys_o, keys_s = [k for k in oracle if k not in IGNORED], [k for k in ours if k not in IGNORED]
        if set(keys_o) != set(keys_s):
            missing, extra = sorted(set(keys_o) - set(keys_s))[:5], sorted(set(keys_s) - set(keys_o))[:5]
            return [f"{path}: keys differ; missing {missing}, extra {extra}"]
        if keys_o != keys_s:
            out.append(f"{path}: key order differs: ours {keys_s[:8]} oracle {keys_o[:8]}")
        for k in keys_o:
            out += diff(ours[k], oracle[k], f"{path}[{k!r}]")
        return out
    if isinstance(oracle, list) and isinstance(ours, list):
        if len(oracle) != len(ours):
            return [f"{path}: length {len(ours)} != oracle {len(oracle)}: {ours[:6]} vs {oracle[:6]}"]
        for i, (a, b) in enumerate(zip(ours, oracle, strict=True)):
            out += diff(a, b, f"{path}[{i}]")
        return out
    numbers = (int, float)
    if (
        isinstance(oracle, numbers)
        and isinstance(ours, numbers)
        and not isinstance(oracle, bool)
        and not isinstance(ours, bool)
    ):
        if isinstance(oracle, float) or isinstance(ours, float):
            if math.isclose(ours, oracle, rel_tol=1e-9, abs_tol=1e-9):
                return []
        elif ours == oracle:
            return []
        return [f"{path}: {ours!r} != oracle {oracle!r}"]
    if type(ours) is not type(oracle) or ours != oracle:
        return [f"{path}: {ours!r} != oracle {oracle!r}"]
    return []


def check_against_oracle(
    env: ReportEnv, dataset: Dataset, project_id: int, path: str, params: dict[str, str], oracle: Any
) -> None:
    """Call `path` on the service and compare the whole body with the oracle's."""
    spec = dataset.projects[project_id]
    expected = oracle(spec.events, spec.tz, params, dataset.now)
    r = env.query(project_id, path, params)
    assert r.status_code == 200, f"{path} {params}: {r.status_code} {r.text[:1000]}"
    problems = diff(r.json(), expected)
    assert not problems, f"{path} {params} (project {project_id}, {spec.tz}):\n" + "\n".join(problems[:20])
