"""A migration job (§14.2): its public record and the cursor it resumes from."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

__all__ = ["ACTIVE", "FINAL", "Counts", "Job", "JobError", "new_job", "utc_text"]

ACTIVE = ("queued", "running")
FINAL = ("succeeded", "failed", "cancelled")


def utc_text(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Counts:
    chunks_total: int = 0
    chunks_done: int = 0
    bytes_downloaded: int = 0
    events_read: int = 0
    events_imported: int = 0
    events_to_import: int = 0
    events_invalid: dict[str, int] = field(default_factory=dict)
    events_skipped: dict[str, int] = field(default_factory=dict)
    profiles_updated: int = 0
    profiles_to_update: int = 0
    first_event_time: int | None = None
    last_event_time: int | None = None
    source_retries: int = 0

    def invalid(self, reason: str, n: int = 1) -> None:
        self.events_invalid[reason] = self.events_invalid.get(reason, 0) + n

    def saw_time(self, ms: int) -> None:
        if self.first_event_time is None or ms < self.first_event_time:
            self.first_event_time = ms
        if self.last_event_time is None or ms > self.last_event_time:
            self.last_event_time = ms

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Counts:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class JobError:
    code: str
    message: str
    chunk: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "chunk": self.chunk}


@dataclass
class Job:
    id: str
    source_tool: str
    project_id: int
    dry_run: bool
    region: str
    source_region: str
    region_explicit: bool
    source_url: str | None
    start_date: date
    end_date: date
    created: datetime
    updated: datetime
    state: str = "queued"
    source_host: str | None = None
    finished: datetime | None = None
    counts: Counts = field(default_factory=Counts)
    error: JobError | None = None
    # The cursor: the first unfinished day (an index into the window's days) and, when that day
    # was split into hours after a 400 or 504, the first unfinished hour of it.
    next_day: int = 0
    next_hour: int | None = None
    profiles_done: bool = False  # the Mixpanel source's profile chunk

    def public(self) -> dict[str, Any]:
        """What the API returns (never the credentials)."""
        return {
            "id": self.id,
            "source_tool": self.source_tool,
            "project_id": self.project_id,
            "dry_run": self.dry_run,
            "state": self.state,
            "region": self.region,
            "source_host": self.source_host,
            "start_date": self.start_date.isoformat(),
            "end_date": self.end_date.isoformat(),
            "created": utc_text(self.created),
            "updated": utc_text(self.updated),
            "finished": utc_text(self.finished),
            "counts": self.counts.as_json(),
            "error": self.error.as_json() if self.error else None,
        }

    def record(self) -> dict[str, Any]:
        """The stored JSON: the public record plus the cursor."""
        return {
            **self.public(),
            "source_region": self.source_region,
            "region_explicit": self.region_explicit,
            "source_url": self.source_url,
            "next_day": self.next_day,
            "next_hour": self.next_hour,
            "profiles_done": self.profiles_done,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Job:
        def moment(text: str | None) -> datetime | None:
            return None if text is None else datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)

        err = data.get("error")
        created = moment(data["created"])
        updated = moment(data["updated"])
        if created is None or updated is None:
            raise ValueError("a job record needs created and updated")
        return cls(
            id=data["id"],
            source_tool=data["source_tool"],
            project_id=int(data["project_id"]),
            dry_run=bool(data["dry_run"]),
            region=data["region"],
            source_region=data["source_region"],
            region_explicit=bool(data["region_explicit"]),
            source_url=data.get("source_url"),
            start_date=date.fromisoformat(data["start_date"]),
            end_date=date.fromisoformat(data["end_date"]),
            created=created,
            updated=updated,
            state=data["state"],
            source_host=data.get("source_host"),
            finished=moment(data.get("finished")),
            counts=Counts.from_json(data["counts"]),
            error=JobError(err["code"], err["message"], err.get("chunk")) if err else None,
            next_day=int(data.get("next_day", 0)),
            next_hour=data.get("next_hour"),
            profiles_done=bool(data.get("profiles_done", False)),
        )

    @property
    def days(self) -> int:
        return (self.end_date - self.start_date).days + 1


def new_job(
    *,
    source_tool: str,
    project_id: int,
    dry_run: bool,
    region: str,
    source_region: str,
    region_explicit: bool,
    source_url: str | None,
    start: date,
    end: date,
    now: datetime,
) -> Job:
    return Job(
        id=str(uuid.uuid4()),
        source_tool=source_tool,
        project_id=project_id,
        dry_run=dry_run,
        region=region,
        source_region=source_region,
        region_explicit=region_explicit,
        source_url=source_url,
        start_date=start,
        end_date=end,
        created=now,
        updated=now,
    )
