"""The profile and group update streams (`/engage` and `/groups`): both log into
`profile_updates` and keep `profiles` current (`footfall.shared.profiles.store`).

Kafka envelope (the topics `profiles.raw` and `groups.raw`):

    key   = b"<project_id>:<group_key>:<profile_id>"   (one profile's updates stay in order)
    value = {"v": 1, "p": project_id, "g": group_key, "d": profile_id, "o": op, "x": value,
             "t": time_ms, "it": ignore_time, "ip": ip | null}

The value depends only on the update, so a retry is byte-for-byte the same record (the
workers' Redis layer drops it); decoding is strict, anything else is a `CodecError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from footfall.shared.profiles.store import store_updates
from footfall.shared.profiles.updates import (
    GROUP_OPERATIONS,
    USER_OPERATIONS,
    ProfileUpdate,
    UpdateFailure,
    parse_update,
    update_dedup_key,
)
from footfall.shared.schema.catalog import PROFILE_UPDATES
from footfall.shared.streams.stream import CodecError, Intake, Locator, Stored, Stream
from footfall.shared.warehouse import Warehouse

__all__ = ["GROUP_UPDATES", "USER_UPDATES", "decode_update", "encode_update", "validate_updates"]

VERSION = 1


def update_key(u: ProfileUpdate) -> bytes:
    return f"{u.project_id}:{u.group_key}:{u.profile_id}".encode()


def encode_update(u: ProfileUpdate) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            "p": u.project_id,
            "g": u.group_key,
            "d": u.profile_id,
            "o": u.op,
            "x": u.value,
            "t": u.time_ms,
            "it": u.ignore_time,
            "ip": u.ip,
        }
    )


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CodecError("field", f"envelope field {name!r} missing or not {kind.__name__}")
    return value


def decode_update(value: bytes | None) -> ProfileUpdate:
    if value is None:
        raise CodecError("empty", "record has no value")
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise CodecError("json", "record value is not JSON") from None
    if not isinstance(data, dict):
        raise CodecError("envelope", "record value is not a JSON object")
    if data.get("v") != VERSION:
        raise CodecError("version", f"unknown envelope version {data.get('v')!r}")
    project_id, group_key, op = _field(data, "p", int), _field(data, "g", str), _field(data, "o", str)
    if project_id <= 0:
        raise CodecError("field", "project id must be positive")
    if op not in (GROUP_OPERATIONS if group_key else USER_OPERATIONS):
        raise CodecError("field", f"unknown operation {op!r}")
    ip = data.get("ip")
    if ip is not None and not isinstance(ip, str):
        raise CodecError("field", "envelope field 'ip' is not a string")
    return ProfileUpdate(
        project_id,
        group_key,
        _field(data, "d", str),
        op,
        data.get("x"),
        _field(data, "t", int),
        _field(data, "it", bool),
        ip,
    )


def validate_updates(
    items: list[Any], intake: Intake, *, group: bool
) -> tuple[list[ProfileUpdate], list[UpdateFailure]]:
    """Validate every update object of a request. Each names its project by `$token` unless the
    credentials did (`intake.project_id`); a token of another project than the credentials'
    is a failure."""
    updates: list[ProfileUpdate] = []
    failures: list[UpdateFailure] = []
    last_token, last_named = "", None  # a request's updates usually all carry one token
    for i, raw in enumerate(items):
        project_id = intake.project_id
        token = raw.get("$token") if isinstance(raw, dict) else None
        if isinstance(token, str) and token and intake.project_of_token is not None:
            if token != last_token:
                last_token, last_named = token, intake.project_of_token(token)
            named = last_named
            if named is None or (project_id and named != project_id):
                failures.append(UpdateFailure(i, None, "$token", "$token does not name this project", "token"))
                continue
            project_id = named
        if not project_id:
            failures.append(UpdateFailure(i, None, "$token", "$token is required (the project's token)", "token"))
            continue
        parsed = parse_update(raw, i, project_id=project_id, group=group, limits=intake.limits, now_ms=intake.now_ms)
        (updates if isinstance(parsed, ProfileUpdate) else failures).append(parsed)  # type: ignore[arg-type]
    return updates, failures


def _store(warehouse: Warehouse, locator: Locator, items: Sequence[ProfileUpdate], ingested_at_ms: int) -> Stored:
    return store_updates(warehouse, locator, items, ingested_at_ms)


def _stream(name: str, group: bool) -> Stream[ProfileUpdate]:
    def validate(items: list[Any], intake: Intake) -> tuple[list[ProfileUpdate], list[Any]]:
        return validate_updates(items, intake, group=group)

    return Stream(
        name=name,
        table=PROFILE_UPDATES,
        validate=validate,
        encode=encode_update,
        decode=decode_update,
        partition_key=update_key,
        dedup_key=update_dedup_key,
        store=_store,
    )


USER_UPDATES = _stream("profiles", group=False)
GROUP_UPDATES = _stream("groups", group=True)
