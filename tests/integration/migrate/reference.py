"""Plain-Python reference of the Amplitude mapping (semantics-2.md §14.4, §14.5), written from the
notes and sharing no code with `footfall.services.migrate`.

`expected_events(records, job_id)` → (the `/import` events the records become, keyed by insert
id; invalid counts by reason). `expected_profiles(chunks)` → uid → properties after every chunk's
update was applied with "newest `$time` wins per property".
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

RESERVED = {
    "00000000-0000-0000-0000-000000000000", "anon", "anonymous", "nil", "none", "null", "n/a", "na",
    "undefined", "unknown", "<nil>", "0", "-1", "true", "false", "[]", "{}",
}  # fmt: skip
COUNTRY = {"United States": "US", "Germany": "DE", "Russia": "RU", "France": "FR"}
RENAMED = {
    "city": "$city", "region": "$region", "os_name": "$os", "os_version": "$os_version",
    "device_brand": "$brand", "device_manufacturer": "$manufacturer", "device_model": "$model",
    "version_name": "$app_version_string",
}  # fmt: skip
DROPPED = {
    "uuid", "$insert_id", "user_id", "device_id", "event_time", "client_event_time", "client_upload_time",
    "server_received_time", "server_upload_time", "processed_time", "user_creation_time", "data",
    "global_user_properties", "group_properties", "$schema", "$insert_key", "amplitude_attribution_ids",
    "event_type", "event_properties", "user_properties", "groups", "country", "ip_address",
}  # fmt: skip
TIMES = ("event_time", "client_event_time", "server_received_time", "server_upload_time")


def ms(text: Any) -> int | None:
    if not isinstance(text, str) or not text:
        return None
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            moment = datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return int(moment.timestamp()) * 1000 + moment.microsecond // 1000
    return None


def ident(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return None if text == "" or text.strip().lower() in RESERVED else text


def insert_id(r: dict[str, Any]) -> str:
    u = r.get("uuid")
    if isinstance(u, str) and re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", u):
        return u.lower()
    own = r.get("$insert_id")
    if isinstance(own, str) and re.fullmatch(r"[A-Za-z0-9-]{1,36}", own) and own.lower() not in RESERVED:
        return own
    keys = ("app", "$insert_id", "event_type", "event_time", "device_id", "user_id", "event_id", "session_id")
    text = "\n".join(["amplitude"] + ["" if r.get(k) is None else str(r.get(k)) for k in keys])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def event_time(r: dict[str, Any]) -> int | None:
    return next((t for t in (ms(r.get(k)) for k in TIMES) if t is not None), None)


def expected_events(records: list[dict[str, Any]], job_id: str) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    out: dict[str, dict[str, Any]] = {}
    invalid: dict[str, int] = {}
    for r in records:
        if not r.get("event_type"):
            invalid["malformed"] = invalid.get("malformed", 0) + 1
            continue
        t = event_time(r)
        if t is None:
            invalid["properties.time"] = invalid.get("properties.time", 0) + 1
            continue
        uid, did = ident(r.get("user_id")), ident(r.get("device_id"))
        props: dict[str, Any] = {}
        for k, v in r.items():
            if k not in DROPPED and k not in RENAMED and v is not None:
                props[k] = v
        for part in ("user_properties", "groups", "event_properties"):
            props.update({k: v for k, v in (r.get(part) or {}).items() if v is not None})
        for k, target in RENAMED.items():
            if r.get(k) not in (None, ""):
                props[target] = r[k]
        country = r.get("country")
        if country:
            if country in COUNTRY:
                props["mp_country_code"] = COUNTRY[country]
            else:
                props["country"] = country
        ip = None
        if not r.get("city") and not r.get("region") and not r.get("country"):
            ip = r.get("ip_address")
        if uid:
            props["$user_id"] = uid
        if did:
            props["$device_id"] = did
        props.update({"$import": True, "$source": "amplitude-to-mixpanel", "$migration_job_id": job_id})
        iid = insert_id(r)
        out[iid] = {
            "event": r["event_type"],
            "time_ms": t,
            "distinct_id": uid or did or "",
            "insert_id": iid,
            "properties": props,
            "ip": ip,
        }
    return out, invalid


def as_import(e: dict[str, Any]) -> dict[str, Any]:
    """The reference event as an `/import` body item (the report oracles' input)."""
    props = {**e["properties"], "time": e["time_ms"], "distinct_id": e["distinct_id"], "$insert_id": e["insert_id"]}
    return {"event": e["event"], "properties": props}


def expected_profiles(chunks: list[list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per chunk and user the latest record's update; then per property the newest `$time` wins."""
    newest: dict[str, dict[str, tuple[int, Any]]] = {}
    for records in chunks:
        latest: dict[str, tuple[int, dict[str, Any]]] = {}
        for r in records:
            uid, t = ident(r.get("user_id")), event_time(r)
            if not uid or t is None or not r.get("event_type"):
                continue
            if uid not in latest or t >= latest[uid][0]:
                latest[uid] = (t, r)
        for uid, (t, r) in latest.items():
            values = {
                k: v
                for k, v in (r.get("user_properties") or {}).items()
                if v is not None and not (k.startswith("initial_") and v == "EMPTY")
            }
            for k, target in RENAMED.items():
                if r.get(k) not in (None, ""):
                    values[target] = r[k]
            if r.get("country") in COUNTRY:
                values["$country_code"] = COUNTRY[r["country"]]
            slot = newest.setdefault(uid, {})
            for k, v in values.items():
                if k not in slot or t >= slot[k][0]:
                    slot[k] = (t, v)
    return {uid: {k: v for k, (_, v) in props.items()} for uid, props in newest.items()}
