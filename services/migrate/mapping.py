"""Source records → the `/import` items and profile updates they become (§14.4–14.6). Pure.

An Amplitude export line becomes an `/import` event object (`{"event", "properties"}` with
`time` in ms, `distinct_id` and `$insert_id` set), which then passes the one validator with
`strict=1` like any import; the profile candidate of §14.5 is kept per chunk and user.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pycountry

from footfall.shared.events.validate import RESERVED_IDS

__all__ = [
    "MARKER_SOURCE",
    "AmplitudeEvent",
    "Malformed",
    "amplitude_event",
    "amplitude_insert_id",
    "country_code",
    "mixpanel_event",
    "parse_time",
    "profile_update",
]

MARKER_SOURCE = "amplitude-to-mixpanel"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_INSERT_ID = re.compile(r"[A-Za-z0-9-]{1,36}")
_TIME_FIELDS = ("event_time", "client_event_time", "server_received_time", "server_upload_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)  # the epoch of naive (UTC) export times

# Top-level fields renamed onto Footfall's properties (events' and profiles').
_MAPPED = {
    "city": "$city",
    "region": "$region",
    "os_name": "$os",
    "os_version": "$os_version",
    "device_brand": "$brand",
    "device_manufacturer": "$manufacturer",
    "device_model": "$model",
    "version_name": "$app_version_string",
}
_CONSUMED = frozenset(
    {
        "event_type",
        "event_properties",
        "user_properties",
        "groups",
        "country",
        "ip_address",
        "uuid",
        "$insert_id",
        "user_id",
        "device_id",
        "event_time",
        "client_event_time",
        "client_upload_time",
        "server_received_time",
        "server_upload_time",
        "processed_time",
        "user_creation_time",
        "data",
        "global_user_properties",
        "group_properties",
        "$schema",
        "$insert_key",
        "amplitude_attribution_ids",
    }
    | set(_MAPPED)
)
# Country names the export uses (MaxMind's short names) that ISO 3166's names do not match.
_COUNTRY_ALIASES = {
    "russia": "RU",
    "south korea": "KR",
    "north korea": "KP",
    "iran": "IR",
    "syria": "SY",
    "vietnam": "VN",
    "laos": "LA",
    "bolivia": "BO",
    "venezuela": "VE",
    "tanzania": "TZ",
    "moldova": "MD",
    "czech republic": "CZ",
    "macedonia": "MK",
    "turkey": "TR",
    "hong kong": "HK",
    "macao": "MO",
    "palestine": "PS",
    "republic of korea": "KR",
    "taiwan": "TW",
    "brunei": "BN",
    "cape verde": "CV",
    "ivory coast": "CI",
    "swaziland": "SZ",
    "the netherlands": "NL",
    "kosovo": "XK",
}


class Malformed(ValueError):
    """A line that is no event: counted under `events_invalid[reason]`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.lru_cache(maxsize=4096)
def country_code(name: str) -> str | None:
    """ISO 3166-1 alpha-2 of a country name (or code), or None."""
    text = name.strip()
    if not text:
        return None
    alias = _COUNTRY_ALIASES.get(text.lower())
    if alias:
        return alias
    try:
        return str(pycountry.countries.lookup(text).alpha_2)
    except LookupError:
        return None


def parse_time(value: Any) -> int | None:
    """Milliseconds of an Amplitude time text (UTC unless it names a zone), sub-ms truncated."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    delta = moment - (_NAIVE_EPOCH if moment.tzinfo is None else _EPOCH)  # naive: UTC
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _identity(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    text = str(value) if isinstance(value, int | float) else value
    if not isinstance(text, str) or not text or text.strip().lower() in RESERVED_IDS:
        return None
    return text


def _hash_part(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)  # decimal
    return str(value)


def amplitude_insert_id(record: dict[str, Any]) -> str:
    """§14.4 step 4: the uuid, else a valid `$insert_id`, else a hash of the record's identity."""
    uuid = record.get("uuid")
    if isinstance(uuid, str) and len(uuid) == 36 and _UUID.fullmatch(uuid):
        return uuid.lower()
    raw = record.get("$insert_id")
    if isinstance(raw, str) and _INSERT_ID.fullmatch(raw) and raw.lower() not in RESERVED_IDS:
        return raw
    parts = ["amplitude"] + [
        _hash_part(record.get(k))
        for k in ("app", "$insert_id", "event_type", "event_time", "device_id", "user_id", "event_id", "session_id")
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(slots=True)  # not frozen: built once per exported line, and a frozen init costs more
class AmplitudeEvent:
    item: dict[str, Any]  # the /import event object
    uid: str | None
    time_ms: int
    user: dict[str, Any] | None = None  # the record's user_properties and event_properties,
    own: dict[str, Any] | None = None  # read only when the event fails validation (rare)
    profile: dict[str, Any] | None = None  # what it `$set`s on its user's profile (with a user id)

    @property
    def user_keys(self) -> frozenset[str]:
        """Properties copied from user_properties (dropped first when too large): the non-null
        ones that no non-null event property overrides."""
        if not self.user:
            return frozenset()
        own = self.own or {}
        return frozenset(k for k, v in self.user.items() if v is not None and own.get(k) is None)


def amplitude_event(record: Any, job_id: str) -> AmplitudeEvent:
    """One export line (decoded JSON) → the event it imports as; raises `Malformed`.

    Properties, in order: the record's own fields (less the consumed ones), then
    `user_properties`, `groups`, `event_properties` (each overriding the earlier ones), the
    renamed fields, the country, the address, then the lifted fields and the markers; null
    values are dropped throughout."""
    if not isinstance(record, dict):
        raise Malformed("malformed")
    event = record.get("event_type")
    if not isinstance(event, str) or not event:
        raise Malformed("malformed")
    time_ms = parse_time(record.get("event_time"))
    if time_ms is None:
        for name in _TIME_FIELDS[1:]:
            time_ms = parse_time(record.get(name))
            if time_ms is not None:
                break
        else:
            raise Malformed("properties.time")
    uid, did = _identity(record.get("user_id")), _identity(record.get("device_id"))
    props: dict[str, Any] = {k: v for k, v in record.items() if v is not None and k not in _CONSUMED}
    # §14.5: what the record would `$set` on its user's profile, gathered in the same loops
    # (user properties but `initial_*` "EMPTY", the renamed fields, the country code).
    profile: dict[str, Any] | None = {} if uid else None
    user = record.get("user_properties")
    if isinstance(user, dict) and user:
        for k, v in user.items():
            if v is not None:
                props[k] = v
                if profile is not None and not (v == "EMPTY" and k.startswith("initial_")):
                    profile[k] = v
    else:
        user = None
    groups = record.get("groups")
    if isinstance(groups, dict):
        for k, v in groups.items():
            if v is not None:
                props[k] = v
    own = record.get("event_properties")
    if isinstance(own, dict) and own:
        for k, v in own.items():
            if v is not None:
                props[k] = v
    else:
        own = None
    for source, target in _MAPPED.items():
        value = record.get(source)
        if value is not None and value != "":
            props[target] = value
            if profile is not None:
                profile[target] = value
    country = record.get("country")
    if isinstance(country, str) and country:
        code = country_code(country)
        if code:
            props["mp_country_code"] = code
            if profile is not None:
                profile["$country_code"] = code
        else:
            props["country"] = country
    ip = record.get("ip_address")
    if isinstance(ip, str) and ip and not (record.get("city") or record.get("region") or country):
        props["ip"] = ip
    props["time"] = time_ms
    props["distinct_id"] = uid or did or ""
    props["$insert_id"] = amplitude_insert_id(record)
    if uid:
        props["$user_id"] = uid
    if did:
        props["$device_id"] = did
    props["$import"] = True
    props["$source"] = MARKER_SOURCE
    props["$migration_job_id"] = job_id
    return AmplitudeEvent({"event": event, "properties": props}, uid, time_ms, user, own, profile)


def truncated(event: AmplitudeEvent) -> dict[str, Any]:
    """The event without the properties copied from `user_properties` (§14.4 step 6)."""
    props = {k: v for k, v in event.item["properties"].items() if k not in event.user_keys}
    props["$migration_truncated"] = True
    return {"event": event.item["event"], "properties": props}


def profile_update(uid: str, time_ms: int, values: dict[str, Any]) -> dict[str, Any]:
    """§14.5: the `/engage` update of the record that is a user's latest in its chunk
    (`values`: its `AmplitudeEvent.profile`)."""
    return {"$distinct_id": uid, "$set": values, "$time": time_ms, "$ignore_time": True}


def mixpanel_event(record: Any) -> dict[str, Any]:
    """§14.6: an exported event as it is imported again (`time` in ms); raises `Malformed`."""
    if not isinstance(record, dict) or not isinstance(record.get("event"), str):
        raise Malformed("malformed")
    props = record.get("properties")
    if not isinstance(props, dict):
        raise Malformed("malformed")
    props = {k: v for k, v in props.items() if k != "mp_processing_time_ms"}
    iid = props.get("$insert_id")
    if not (isinstance(iid, str) and _INSERT_ID.fullmatch(iid) and iid.lower() not in RESERVED_IDS):
        parts = [record["event"], _hash_part(props.get("time")), _hash_part(props.get("distinct_id"))]
        props["$insert_id"] = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return {"event": record["event"], "properties": props}
