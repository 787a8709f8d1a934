"""The stored experiment (semantics-2.md §16.4) and the errors of the experiments API.

An `Experiment` is one version of one experiment: its definition (name, description, hypothesis,
tags, variants, metrics, settings — already validated by `definitions`), its lifecycle state
(`status`, `start_date`, `end_date`, the decision inside `settings`), the archive flag, who made
and last changed it, and the caches frozen at conclusion. It is stored as one JSON object
(`to_json` / `from_json`); every instant is UTC.

Errors: the experiments API answers `{"status": "error", "type": <kind>, "error": <message>}`
for validation problems (`validation_error`), illegal transitions (`invalid_state`) and unknown
ids (`not_found`); 401/403 keep the plain management shape. An `ExperimentError` carries its kind
to the management interface's renderer in the `ERROR_TYPE_HEADER` entry of its headers (the
renderer moves it into the body and does not send it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from footfall.services.app.saved import ERROR_TYPE_HEADER
from footfall.shared.errors import FootfallError

__all__ = [
    "ACTIVE",
    "CONCLUDED",
    "DECIDED",
    "DRAFT",
    "FAIL",
    "STATUSES",
    "SUCCESS",
    "Experiment",
    "ExperimentError",
    "ExperimentNotFoundError",
    "InvalidStateError",
    "ValidationError",
    "iso",
    "parse_iso",
]

DRAFT, ACTIVE, CONCLUDED, SUCCESS, FAIL = "draft", "active", "concluded", "success", "fail"
STATUSES = (DRAFT, ACTIVE, CONCLUDED, SUCCESS, FAIL)
DECIDED = (SUCCESS, FAIL)
_ISO = "%Y-%m-%dT%H:%M:%SZ"


class ExperimentError(FootfallError):
    """An error of the experiments API: `kind` becomes the body's `type`."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(status, message)
        self.kind = kind

    @property
    def headers(self) -> dict[str, str]:
        return {**super().headers, ERROR_TYPE_HEADER: self.kind}


class ValidationError(ExperimentError):
    """A request member is missing or invalid (400 `validation_error`); the message names it."""

    def __init__(self, member: str, problem: str) -> None:
        super().__init__(400, "validation_error", f"{member}: {problem}" if member else problem)


class InvalidStateError(ExperimentError):
    """A transition the lifecycle does not allow (400 `invalid_state`)."""

    def __init__(self, action: str, status: str) -> None:
        super().__init__(400, "invalid_state", f"cannot {action} an experiment in state {status}")


class ExperimentNotFoundError(ExperimentError):
    """No such experiment (or workspace) for the caller (404 `not_found`)."""

    def __init__(self, message: str) -> None:
        super().__init__(404, "not_found", message)


def iso(moment: datetime | None) -> str | None:
    """`YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds), or None."""
    return None if moment is None else moment.astimezone(UTC).strftime(_ISO)


def parse_iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.strptime(text, _ISO).replace(tzinfo=UTC)


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


@dataclass(frozen=True)
class Experiment:
    """One version of a stored experiment. `settings` holds what the client set (plus the
    decision); `variants` and `metrics` are their canonical JSON lists."""

    id: str
    project_id: int
    name: str
    created_at: datetime
    updated_at: datetime
    creator_id: int | None
    creator_name: str | None
    modifier_id: int | None
    modifier_name: str | None
    description: str | None = None
    hypothesis: str | None = None
    tags: tuple[str, ...] = ()
    variants: tuple[dict[str, Any], ...] = ()
    metrics: tuple[dict[str, Any], ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    status: str = DRAFT
    archived: bool = False
    start_date: datetime | None = None
    end_date: datetime | None = None
    exposures_cache: dict[str, Any] | None = None  # frozen at conclusion; None while draft/active
    results_cache: dict[str, Any] | None = None
    deleted_at: datetime | None = None

    @property
    def control(self) -> str | None:
        return next((v["key"] for v in self.variants if v["is_control"]), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project_id": self.project_id,
            "name": self.name,
            "created_at": _micro(self.created_at),
            "updated_at": _micro(self.updated_at),
            "creator_id": self.creator_id,
            "creator_name": self.creator_name,
            "modifier_id": self.modifier_id,
            "modifier_name": self.modifier_name,
            "description": self.description,
            "hypothesis": self.hypothesis,
            "tags": list(self.tags),
            "variants": list(self.variants),
            "metrics": list(self.metrics),
            "settings": self.settings,
            "status": self.status,
            "archived": self.archived,
            "start_date": iso(self.start_date),
            "end_date": iso(self.end_date),
            "exposures_cache": self.exposures_cache,
            "results_cache": self.results_cache,
            "deleted_at": None if self.deleted_at is None else _micro(self.deleted_at),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Experiment:
        deleted = data.get("deleted_at")
        return cls(
            id=data["id"],
            project_id=int(data["project_id"]),
            name=data["name"],
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            creator_id=data["creator_id"],
            creator_name=data["creator_name"],
            modifier_id=data["modifier_id"],
            modifier_name=data["modifier_name"],
            description=data["description"],
            hypothesis=data["hypothesis"],
            tags=tuple(data["tags"]),
            variants=tuple(data["variants"]),
            metrics=tuple(data["metrics"]),
            settings=dict(data["settings"]),
            status=data["status"],
            archived=bool(data["archived"]),
            start_date=parse_iso(data["start_date"]),
            end_date=parse_iso(data["end_date"]),
            exposures_cache=data["exposures_cache"],
            results_cache=data["results_cache"],
            deleted_at=None if deleted is None else datetime.fromisoformat(deleted),
        )
