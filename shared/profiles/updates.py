"""Profile and group updates: the validated `ProfileUpdate` and the one validator of update objects.

An update object (semantics §6.3) is `{"$token", "$distinct_id", <one operation>: value,
["$time"], ["$ip"], ["$ignore_time"], ["$ignore_alias"]}` for a user profile, and
`{"$token", "$group_key", "$group_id", <one operation>: value, ...}` for a group profile.
Rules, checked in this order (the first one broken is the failure):

1. The item is a JSON object.
2. `$token`, when the request's credentials do not name the project: a non-empty string
   naming a project (resolved by the caller; see `Intake`).
3. Users: `$distinct_id` is a non-empty string or an integer (not a boolean), kept as text
   and truncated to 255 characters; the reserved ids of `/import` (`null`, `anon`, `0`, …,
   compared after trimming and lower-casing) are refused. Groups: `$group_key` is a non-empty
   string (a property name: never truncated), `$group_id` a non-empty string or integer,
   truncated to 255 characters.
4. Exactly one operation. Groups take `$set`, `$set_once`, `$unset`, `$remove`, `$union`,
   `$delete`; `$add` or `$append` on a group is reported as that member. Other members
   (`$device_id`, `$user_id`, `$ignore_alias` on a group, …) are ignored.
5. Values: `$set`, `$set_once`, `$add`, `$union`, `$append`, `$remove` take an object whose
   members follow the `/import` property rules (`check_properties`: fewer than 255 keys,
   nesting at most 3 levels below the property, arrays under 255 elements, valid UTF-8,
   strings truncated to 255 characters); `$add` values are finite numbers (not booleans);
   `$union` values are lists; `$unset` is a list of fewer than 255 property names; `$delete`
   takes any value.
6. `$time`: absent or null is the receive time; else a number (seconds, or milliseconds from
   1e10 on; fractions of a millisecond truncated), not before 1971 nor more than an hour
   ahead of the receive time.
7. `$ignore_time`, `$ignore_alias`: booleans (null or absent is false). `$ip`: a string or
   null (as absent); `"0"` means no geolocation, not even from the request's address, and so
   does the number `0`, which mixpanel-utils sends on every update (`"$ip": 0`).

The duplicate identity (`dedup_key`) is the project, the profile (group key and id), the
operation, its value as a JSON value (member order ignored, 1 equal to 1.0) and `$time`;
`$token`, `$ip` and the flags are not part of it, so a replayed update changes nothing.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import RESERVED_IDS, TIME_FLOOR_MS, PropertyProblem, check_properties

__all__ = [
    "GROUP_OPERATIONS",
    "USER_OPERATIONS",
    "ProfileUpdate",
    "UpdateFailure",
    "canonical_value",
    "parse_update",
    "update_dedup_key",
]

USER_OPERATIONS = ("$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete")
GROUP_OPERATIONS = ("$set", "$set_once", "$unset", "$remove", "$union", "$delete")
_ANY_OPERATION = frozenset(USER_OPERATIONS)
_CHANGEABLE = (float, dict, list)  # what canonical_value may rewrite
_OBJECT_VALUED = frozenset({"$set", "$set_once", "$add", "$union", "$append", "$remove"})
_MS_FROM = 10_000_000_000
_AHEAD_MS = 3_600_000


class ProfileUpdate(NamedTuple):
    """One validated update of one profile. `group_key` is "" for a user profile. Immutable;
    a named tuple rather than a frozen dataclass, whose constructor costs several times more
    (one is made per update on the ingestion path)."""

    project_id: int
    group_key: str
    profile_id: str  # the distinct id, or the group id
    op: str
    value: Any  # normalised: an object of properties, `$unset`'s list of names, or `$delete`'s value
    time_ms: int
    ignore_time: bool = False
    ip: str | None = None

    @property
    def is_group(self) -> bool:
        return self.group_key != ""

    def __reduce__(self) -> tuple[type[ProfileUpdate], tuple[Any, ...]]:
        # Pickled as its fields: a named tuple's default pickling costs ~2.5× as much both
        # ways (a migration job process sends serve hundreds of thousands of updates).
        return (ProfileUpdate, tuple(self))


@dataclass(frozen=True, slots=True)
class UpdateFailure:
    """One refused update: what a strict answer lists (`index`, `$distinct_id`, `field`, `message`)."""

    index: int
    profile_id: str | None
    field: str
    message: str
    reason: str  # short label for metrics

    def as_record(self) -> dict[str, Any]:
        return {"index": self.index, "$distinct_id": self.profile_id, "field": self.field, "message": self.message}


class _Refused(Exception):
    def __init__(self, field: str, message: str, reason: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.reason = reason


def _profile_id(raw: dict[str, Any], name: str, limits: ImportLimits, *, reserved: bool) -> str:
    value = raw.get(name)
    if type(value) is int:
        value = str(value)
    if type(value) is not str or not value:
        raise _Refused(name, f"{name} is required: a non-empty string", "profile_id")
    if reserved and value.strip().lower() in RESERVED_IDS:
        raise _Refused(name, f"'{value.strip().lower()}' is a reserved value", "profile_id")
    return value[: limits.max_string_len]


def _group_key(raw: dict[str, Any]) -> str:
    value = raw.get("$group_key")
    if type(value) is not str or not value:
        raise _Refused("$group_key", "$group_key is required: a non-empty string", "profile_id")
    return value


def _operation(raw: dict[str, Any], allowed: tuple[str, ...]) -> str:
    present = _ANY_OPERATION.intersection(raw)
    if len(present) == 1:  # the usual case, without the full checks below
        (op,) = present
        if op in allowed:
            return op
    for other in USER_OPERATIONS:
        if other in raw and other not in allowed:
            raise _Refused(other, f"{other} is not an operation of group profiles", "operation")
    found = [op for op in allowed if op in raw]
    if len(found) != 1:
        named = ", ".join(found) if found else "none"
        raise _Refused("", f"an update needs exactly one of {', '.join(allowed)} (found {named})", "operation")
    return found[0]


def _object_value(op: str, value: Any, limits: ImportLimits) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Refused(op, f"{op} takes an object of properties", "value")
    for name, member in value.items():
        if op == "$add" and (type(member) not in (int, float) or not math.isfinite(member)):
            raise _Refused(f"{op}.{name}", f"{op}.{name} must be a finite number", "value")
        if op == "$union" and type(member) is not list:
            raise _Refused(f"{op}.{name}", f"{op}.{name} must be a list", "value")
    try:
        return check_properties(value, limits)
    except PropertyProblem as problem:
        path = op + "".join(f"[{p}]" if type(p) is int else f".{p}" for p in reversed(problem.path))
        raise _Refused(path, f"{path} is invalid: {problem.problem}", problem.reason) from None


def _unset_value(value: Any, limits: ImportLimits) -> list[str]:
    if type(value) is not list:
        raise _Refused("$unset", "$unset takes a list of property names", "value")
    for i, name in enumerate(value):
        if type(name) is not str:
            raise _Refused(f"$unset[{i}]", f"$unset[{i}] must be a property name (a string)", "value")
    if len(value) >= limits.max_properties:
        raise _Refused("$unset", f"$unset names {len(value)} properties; at most {limits.max_properties - 1}", "value")
    return list(value)


def _time(raw: dict[str, Any], now_ms: int) -> int:
    value = raw.get("$time")
    if value is None:
        return now_ms
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Refused("$time", "$time must be seconds or milliseconds since the epoch", "time")
    # (a negative number is before 1971 at any scale; `value * 1000` of a huge one is infinite)
    time_ms = int(value) if value >= _MS_FROM else int(value * 1000) if value >= 0 else -1
    if time_ms < TIME_FLOOR_MS:
        raise _Refused("$time", "$time is before 1971-01-01T00:00:00Z", "time")
    if time_ms > now_ms + _AHEAD_MS:
        raise _Refused("$time", "$time is more than an hour ahead of the server clock", "time")
    return time_ms


def _flag(raw: dict[str, Any], name: str) -> bool:
    value = raw.get(name)
    if value is None:
        return False
    if type(value) is not bool:
        raise _Refused(name, f"{name} must be true or false", "flag")
    return value


def _ip(raw: dict[str, Any]) -> str | None:
    value = raw.get("$ip")
    if value is None or value == "":
        return None
    if type(value) is int and value == 0:  # mixpanel-utils sends the number 0
        return "0"
    if type(value) is not str:
        raise _Refused("$ip", "$ip must be an address (a string)", "ip")
    return value


def parse_update(
    raw: Any, index: int, *, project_id: int, group: bool, limits: ImportLimits, now_ms: int
) -> ProfileUpdate | UpdateFailure:
    """Validate one update object of a request (`group`: of `/groups`); `project_id` is the
    project its credentials or `$token` named."""
    if type(raw) is not dict:
        return UpdateFailure(index, None, "", "each update must be a JSON object", "malformed")
    label: str | None = None
    try:
        if group:
            group_key = _group_key(raw)
            profile_id = label = _profile_id(raw, "$group_id", limits, reserved=False)
        else:
            group_key = ""
            profile_id = label = _profile_id(raw, "$distinct_id", limits, reserved=True)
        op = _operation(raw, GROUP_OPERATIONS if group else USER_OPERATIONS)
        value: Any = raw[op]
        if op in _OBJECT_VALUED:
            value = _object_value(op, value, limits)
        elif op == "$unset":
            value = _unset_value(value, limits)
        else:  # $delete: its value means nothing (clients send "" or null)
            value = None
        return ProfileUpdate(
            project_id, group_key, profile_id, op, value, _time(raw, now_ms), _flag(raw, "$ignore_time"), _ip(raw)
        )
    except _Refused as refused:
        return UpdateFailure(index, label, refused.field, refused.message, refused.reason)


def canonical_value(value: Any) -> Any:
    """`value` as the duplicate identity compares it: integral floats as integers (1 equals 1.0)."""
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if type(value) is dict:
        if all(type(v) not in _CHANGEABLE for v in value.values()):  # the usual update: nothing to change
            return value
        return {k: canonical_value(v) for k, v in value.items()}
    if type(value) is list:
        if all(type(v) not in _CHANGEABLE for v in value):
            return value
        return [canonical_value(v) for v in value]
    return value


def update_dedup_key(u: ProfileUpdate) -> bytes:
    """16 bytes naming a duplicate: project, profile, operation, value and `$time`."""
    canon = orjson.dumps(
        ["profile-update", u.project_id, u.group_key, u.profile_id, u.op, canonical_value(u.value), u.time_ms],
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(canon, digest_size=16).digest()
