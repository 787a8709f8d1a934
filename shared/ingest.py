"""What storing an ingested item needs, for every stream: where an address is (`Place`, found by
a `Locator`, the worker's GeoIP enricher) and what storing a batch did (`Stored`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Locator", "Place", "Stored"]


@dataclass(frozen=True, slots=True)
class Place:
    """Where an address is: what enrichment adds to an item."""

    city: str = ""
    region: str = ""
    country_code: str = ""


class Locator(Protocol):
    """Address → place (the worker's GeoIP enricher; a no-op without a database)."""

    def place(self, ip: str | None) -> Place: ...


@dataclass
class Stored:
    """What storing one batch did: the dedup keys of the stored items, the in-batch (or
    already stored) duplicates dropped, and the items the store refused (index → reason)."""

    keys: list[bytes] = field(default_factory=list)
    dropped: int = 0
    refused: dict[int, str] = field(default_factory=dict)
