"""`Stream`: one kind of ingested item, described once.

A stream names everything the three ingestion paths need about its items, so that the
gateway's sinks, the Kafka worker and the embedded path take a stream and hold no
knowledge of their own about events (or, later, profile and group updates):

* `validate`: decoded JSON items of one request → items and `Failure`s (the one validator);
* `encode` / `decode`: one item ↔ one Kafka record value (decoding is strict: a record may
  come from any producer; anything else is a `CodecError` and goes to the dead letters);
* `partition_key`: the Kafka key, which keeps one user's (or profile's) items in order on
  one partition and every retry on the partition that saw the original;
* `dedup_key`: 16 bytes naming what a duplicate is (Redis keys, in-batch dedup, the table);
* `rows`: deduplicated items → column-oriented rows of `table`, in its column order
  (pure; the `Locator` turns an address into a place);
* `table`: where the rows go (a catalog table).

The topic of a stream is `<prefix><name>.raw` (`footfall.shared.kafka.Topics.of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from footfall.shared.config import ImportLimits
from footfall.shared.events.model import Failure
from footfall.shared.schema.catalog import Table

__all__ = ["CodecError", "Intake", "Locator", "Place", "Rows", "Stream"]

T = TypeVar("T")


class CodecError(ValueError):
    """A record that is not a valid envelope of its stream; `reason` is a short metrics label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Place:
    """Where an address is: what enrichment adds to an item."""

    city: str = ""
    region: str = ""
    country_code: str = ""


class Locator(Protocol):
    """Address → place (the worker's GeoIP enricher; a no-op without a database)."""

    def place(self, ip: str | None) -> Place: ...


@dataclass(frozen=True)
class Intake:
    """What a stream's validator needs besides the items of a request.

    `project_id` is the project the request's credentials named (0: none did, so each item
    must name its own with a token, which `project_of_token` resolves — None for an unknown
    token)."""

    project_id: int
    strict: bool
    limits: ImportLimits
    now_ms: int
    body_bytes: int
    project_of_token: Callable[[str], int | None] | None = None


@dataclass(frozen=True)
class Rows:
    """Column-oriented rows of a stream's table, with each row's dedup key."""

    columns: list[list[Any]]
    keys: list[bytes]

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Stream(Generic[T]):
    name: str
    table: Table
    validate: Callable[[list[Any], Intake], tuple[list[T], list[Failure]]]
    encode: Callable[[T], bytes]
    decode: Callable[[bytes | None], T]
    partition_key: Callable[[T], bytes]
    dedup_key: Callable[[T], bytes]
    rows: Callable[[Sequence[T], Sequence[bytes], Locator, int], Rows]

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"
