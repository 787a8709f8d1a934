"""Independent reference ("oracle") for profile state: /engage and /groups update objects and their effect.

Written from shared/reference/semantics.md §6.2, §6.3, §6.1 (limits), §7 and the team's pinned decisions in
the brief; shares no code with services/ or shared/. Public API:

    parse_update(raw, *, received_ms, kind, seq, project_id=1) -> Update | Invalid    one update object
    parse_batch(raws, *, received_ms, kind, first_seq=0, project_id=1) -> list[Update | Invalid]
    apply(updates, *, geo=None) -> State     State.profiles: dict[ProfileKey, Profile]; .clashes, .over_limit,
                                             .duplicates (lists of seq)
    ProfileKey = (project_id, group_key or None for users, distinct_id or group_id)
    last_seen_text(ms) -> str                the `$last_seen` format

Validation (parse_update). The first failing check in this order is reported as Invalid(field, message,
reason=...); the caller's batch position is `seq` (Invalid.seq too):
 1. The update must be a JSON object (reason "malformed", field "").
 2. `$token`: a non-empty string. Which project it names is the caller's business (authentication is not
    modelled): `project_id=` says the project the token resolved to.
 3. Users: `$distinct_id` is a non-empty string or an integer (not a bool), stored as text and truncated to
    255 characters; the /import reserved values (`null`, `anon`, `0`, `-1`, ... compared case-insensitively
    after trimming whitespace) are rejected. Groups: `$group_key` is a non-empty string (not truncated: it is
    a property name), `$group_id` a non-empty string or integer, truncated to 255; the reserved list is
    documented for distinct_id only and is not applied to group ids.
 4. Exactly one operation. An operation of the other kind (`$add` or `$append` on /groups) is reported first,
    as field `$add` / `$append`; then none or several operations (field ""). Unknown members (e.g.
    `$device_id`, `$user_id`, `$had_persisted_distinct_id` that browser SDKs send, or `$ignore_alias` on a
    group) are ignored: neither stored nor an error.
 5. Value shapes: `$set`/`$set_once`/`$add`/`$union`/`$append`/`$remove` take an object; `$add` values are
    finite numbers (bool is not a number); `$union` values are lists; `$unset` is a list of strings; `$delete`
    takes any value (even null). Limits as /import (§6.1, tests/conformance/import_rules.json): an
    operation object has fewer than 255 keys; in every value a nested object has fewer than 255 keys, an
    array fewer than 255 elements, and nothing sits more than 3 path segments below the property
    (`a.b.c` ok, `a.b.c.d` or `a[0][0][0]` too deep; an empty container at the third segment is fine);
    `$unset` lists fewer than 255 names. Strings must be valid UTF-8 (no lone surrogates). String values
    at any depth are truncated to 255 characters (keys and `$unset` names are not) - so a `$remove` of a
    long string matches the stored truncated copy.
 6. `$time`: absent or null -> received_ms. Otherwise a number (not bool): >= 1e10 is milliseconds, else
    seconds, fractions of a ms truncated; before 1971-01-01 or more than 1 hour after received_ms is invalid
    (the /import rules).
 7. `$ignore_time`, `$ignore_alias`: booleans (null/absent = false). `$ignore_alias` has no effect (ids are
    compared literally; there is no alias resolution in the oracle).
 8. `$ip`: a string (null/absent = none), or the integer 0 (= "0": mixpanel-utils sends `"$ip": 0` on every
    update, semantics §7.2); only used by the geo hook.

Application (apply). Decisions:
 - Order: valid updates apply in ($time, seq) order, so arrival order only matters for equal $time values.
   Invalid items in the input are skipped.
 - Duplicates: identity = (project, group key, profile id, operation, value, $time); `$token`, `$ignore_time`,
   `$ignore_alias` and `$ip` are not part of it. Values are compared after normalisation (truncation) as JSON
   values: object key order is ignored, list order matters, numbers compare by value (1 == 1.0), booleans
   are not numbers. The copy that arrived first (lowest seq) is the one applied; later copies are ignored
   entirely (State.duplicates), so a replay can never change anything. An update without `$time` gets its
   received time, so a re-send of it at a later time is NOT a duplicate.
 - Operations: `$set` overwrites keys; `$set_once` sets only keys that are absent (a key holding null is set);
   `$add` adds (a missing key counts as 0; int+int stays an exact int, otherwise a double); `$union` appends
   the elements not already present, in the given order, after the existing ones (existing duplicates are
   kept; onto a missing key: the given list deduplicated); `$append` pushes the value as one element (a list
   is one element; onto a missing key: [value]); `$remove` removes every element equal to the value (an
   emptied list stays []; a missing key is left alone); `$unset` removes keys; `$delete` removes the profile.
   Element equality for `$union`/`$remove` is the JSON value equality of the duplicate rule. null is stored.
 - Type clash: `$add` onto an existing non-number (null and booleans included) or with a non-finite sum,
   `$union`/`$append`/`$remove` onto an existing non-list (null included). The whole update changes nothing
   (not even `$last_seen`) and its seq is listed in State.clashes. Whether an update clashes is decided
   against the state at its own position in ($time, seq) order - the state produced by every earlier-in-time
   applied update - never against arrival order. So an update that clashed when it arrived can stop
   clashing once an older-$time update arrives (and vice versa); the oracle reports the verdict after all
   updates are in, which is what the server's strict=1 answer is for in-order delivery only.
 - Existence: `$unset` and `$remove` on a missing or deleted profile do nothing (no profile, no `$last_seen`).
   Every other operation creates a missing profile, even when it writes no property (`$set: {}`,
   `$add: {}`, `$union: {}` ...); the new profile then holds only `$last_seen` (or nothing with
   `$ignore_time`). A profile whose keys were all unset still exists. `$delete` of a missing profile does
   nothing; an update later in $time order than a `$delete` recreates the profile from scratch.
 - `$last_seen`: after its operation, every applied update other than `$delete` sets `$last_seen` to its
   `$time` as UTC `YYYY-MM-DDTHH:MM:SS` (seconds truncated), unless `$ignore_time` is true (then
   `$last_seen` is left as the operation left it: `$set`/`$unset` of `$last_seen` with `$ignore_time` do
   stick). It follows the LAST APPLIED update in ($time, seq) order, which - updates being applied in time
   order - is the latest $time among the applied updates without `$ignore_time` since the profile was last
   (re)created. No `$created` is added.
 - Limits on the stored profile: after an update, the profile must have fewer than 255 properties
   (`$last_seen` not counted) and every stored value must satisfy the nested limits above (e.g. `$union`
   may not grow a list to 255 elements, `$append` of an object may not push a value past 3 segments). An
   update that would break them changes nothing (like a type clash) and is listed in State.over_limit.
 - Geolocation is out of scope: `geo(ip) -> {"$city": ..., "$region": ..., "mp_country_code": ...}` is an
   optional hook (default None: no geo properties). When given, an applied update (not `$delete`, not a no-op
   `$unset`/`$remove` on a missing profile, not a rejected one) whose `$ip` is set and not "0" writes the
   hook's properties after its operation, except keys the operation itself names (explicit values win);
   strings truncated like values. The request IP (`ip=1`) is not modelled: put it in `$ip` to model it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

__all__ = [
    "GROUP_OPS",
    "USER_OPS",
    "Invalid",
    "Profile",
    "ProfileKey",
    "State",
    "Update",
    "apply",
    "last_seen_text",
    "parse_batch",
    "parse_update",
]

ProfileKey = tuple[int, "str | None", str]

MAX_STR = 255  # strings are truncated to this many characters
MAX_KEYS = 255  # objects (and profiles) hold fewer than this many keys
MAX_ITEMS = 255  # arrays hold fewer than this many elements
MAX_DEPTH = 3  # path segments below the property
MIN_TIME_MS = 31_536_000_000  # 1971-01-01T00:00:00Z
MAX_AHEAD_MS = 3_600_000
LAST_SEEN = "$last_seen"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

USER_OPS = ("$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete")
GROUP_OPS = ("$set", "$set_once", "$unset", "$remove", "$union", "$delete")
OBJECT_OPS = frozenset({"$set", "$set_once", "$add", "$union", "$append", "$remove"})
RESERVED_IDS = frozenset(
    {
        "00000000-0000-0000-0000-000000000000",
        "anon",
        "anonymous",
        "nil",
        "none",
        "null",
        "n/a",
        "na",
        "undefined",
        "unknown",
        "<nil>",
        "0",
        "-1",
        "true",
        "false",
        "[]",
        "{}",
    }
)

GeoHook = Callable[[str], dict]


# ------------------------------------------------------------------------------------------------- types
@dataclass(frozen=True)
class Invalid:
    """A rejected update object. `reason` is one of: malformed, token, distinct_id, group, operation, value,
    too_many_properties, nested_keys, array_len, depth, utf8, time, flag, ip. `seq` = the caller's position."""

    field: str  # e.g. "$distinct_id", "$add.score", "$set.a.b" ("" = the object itself)
    message: str
    reason: str = ""
    seq: int = -1


@dataclass(frozen=True)
class Update:
    seq: int  # arrival order (the batch position across the whole test)
    project_id: int
    group_key: str | None  # None for user profiles
    profile_id: str  # distinct_id or group_id
    op: str
    value: object  # normalised (strings truncated); `$unset`: list of names
    time_ms: int
    ignore_time: bool = False
    ignore_alias: bool = False
    ip: str | None = None

    @property
    def key(self) -> ProfileKey:
        return (self.project_id, self.group_key, self.profile_id)

    @property
    def identity(self) -> tuple:
        """The duplicate identity: project, profile key, operation, value (as a JSON value) and $time."""
        return (*self.key, self.op, _freeze(self.value), self.time_ms)


@dataclass
class Profile:
    properties: dict


@dataclass
class State:
    profiles: dict[ProfileKey, Profile] = field(default_factory=dict)
    clashes: list[int] = field(default_factory=list)  # seq of updates rejected for a type clash
    over_limit: list[int] = field(default_factory=list)  # seq of updates rejected by the profile limits
    duplicates: list[int] = field(default_factory=list)  # seq of ignored replays

    @property
    def rejected(self) -> list[int]:
        return sorted(self.clashes + self.over_limit)


class _Reject(Exception):
    def __init__(self, field: str, message: str, reason: str):
        super().__init__(message)
        self.field, self.message, self.reason = field, message, reason


# ------------------------------------------------------------------------------------------ JSON values
def _freeze(v: object) -> object:
    """A hashable form with JSON value equality (key order ignored, 1 == 1.0, True != 1)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if isinstance(v, list):
        return ("l", tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, _freeze(x)) for k, x in v.items()))
    raise TypeError(f"not a JSON value: {v!r}")


def _same(a: object, b: object) -> bool:
    return _freeze(a) == _freeze(b)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _truncate(v: object) -> object:
    if isinstance(v, str):
        return v[:MAX_STR]
    if isinstance(v, list):
        return [_truncate(x) for x in v]
    if isinstance(v, dict):
        return {k: _truncate(x) for k, x in v.items()}
    return v


def _utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_value(v: object, path: str, segments: int = 1) -> None:
    """The /import nested limits and UTF-8 rule for one value that sits `segments` below the property."""
    if isinstance(v, str) and not _utf8_ok(v):
        raise _Reject(path, f"'{path}' is invalid: string should be valid utf8", "utf8")
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v <= 2**64 - 1:
        # /import's decision (shared/events/validate.py docstring): integers must fit 64 bits.
        raise _Reject(path, f"'{path}' is invalid: integer out of range (must fit in 64 bits)", "number")
    if isinstance(v, dict):
        if len(v) >= MAX_KEYS:
            raise _Reject(path, f"'{path}' has {len(v)} keys; nested objects hold fewer than {MAX_KEYS}", "nested_keys")
        children = [(f"{path}.{k}", k, x) for k, x in v.items()]
    elif isinstance(v, list):
        if len(v) >= MAX_ITEMS:
            raise _Reject(path, f"'{path}' has {len(v)} elements; arrays hold fewer than {MAX_ITEMS}", "array_len")
        children = [(f"{path}[{i}]", None, x) for i, x in enumerate(v)]
    else:
        return
    for child_path, key, child in children:
        if segments + 1 > MAX_DEPTH:
            raise _Reject(child_path, f"'{child_path}' is nested deeper than {MAX_DEPTH} levels", "depth")
        if key is not None and not _utf8_ok(key):
            raise _Reject(child_path, f"'{child_path}' is invalid: key should be valid utf8", "utf8")
        _check_value(child, child_path, segments + 1)


# ------------------------------------------------------------------------------------------- validation
def _time_ms(value: object) -> int:
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)  # type: ignore[arg-type]
    return int(exact) if exact >= Decimal(10) ** 10 else int(exact * 1000)


def _read_token(raw: dict) -> None:
    token = raw.get("$token")
    if not isinstance(token, str) or not token or not _utf8_ok(token):
        raise _Reject("$token", "'$token' is required: the project token as a non-empty string", "token")


def _read_id(raw: dict, name: str, reason: str, reserved: bool) -> str:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Reject(name, f"'{name}' is required: a non-empty string or an integer", reason)
    text = str(value)
    if not text:
        raise _Reject(name, f"'{name}' must not be empty", reason)
    if not _utf8_ok(text):
        raise _Reject(name, f"'{name}' is invalid: string should be valid utf8", "utf8")
    if reserved and text.strip().lower() in RESERVED_IDS:
        raise _Reject(name, f"'{name}' is invalid: {text!r} is a reserved value", reason)
    return text[:MAX_STR]


def _read_profile_key(raw: dict, kind: str) -> tuple[str | None, str]:
    if kind == "user":
        return None, _read_id(raw, "$distinct_id", "distinct_id", reserved=True)
    group_key = raw.get("$group_key")
    if not isinstance(group_key, str) or not group_key or not _utf8_ok(group_key):
        raise _Reject("$group_key", "'$group_key' is required: a non-empty string", "group")
    return group_key, _read_id(raw, "$group_id", "group", reserved=False)


def _read_op(raw: dict, kind: str) -> str:
    allowed = USER_OPS if kind == "user" else GROUP_OPS
    present = [op for op in USER_OPS if op in raw]
    for op in present:
        if op not in allowed:
            raise _Reject(op, f"'{op}' is not allowed in a group update (allowed: {', '.join(allowed)})", "operation")
    if len(present) != 1:
        found = ", ".join(present) or "none"
        raise _Reject("", f"exactly one operation per update ({', '.join(allowed)}); found {found}", "operation")
    return present[0]


def _read_object_value(op: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise _Reject(op, f"'{op}' takes an object of property names to values", "value")
    if len(value) >= MAX_KEYS:
        raise _Reject(
            op, f"'{op}' has {len(value)} properties; an update holds fewer than {MAX_KEYS}", "too_many_properties"
        )
    for key, item in value.items():
        path = f"{op}.{key}"
        if not _utf8_ok(key):
            raise _Reject(path, f"'{path}' is invalid: key should be valid utf8", "utf8")
        if op == "$add" and not (_is_number(item) and math.isfinite(item)):
            raise _Reject(path, f"'{path}' must be a number", "value")
        if op == "$union" and not isinstance(item, list):
            raise _Reject(path, f"'{path}' must be a list", "value")
        _check_value(item, path)
    return {k: _truncate(v) for k, v in value.items()}


def _read_unset(value: object) -> list[str]:
    if not isinstance(value, list):
        raise _Reject("$unset", "'$unset' takes a list of property names", "value")
    if len(value) >= MAX_ITEMS:
        raise _Reject("$unset", f"'$unset' lists {len(value)} names; fewer than {MAX_ITEMS} allowed", "array_len")
    for i, name in enumerate(value):
        if not isinstance(name, str):
            raise _Reject(f"$unset[{i}]", f"'$unset[{i}]' must be a property name (string)", "value")
        if not _utf8_ok(name):
            raise _Reject(f"$unset[{i}]", f"'$unset[{i}]' is invalid: string should be valid utf8", "utf8")
    return list(value)


def _read_value(op: str, value: object) -> object:
    if op in OBJECT_OPS:
        return _read_object_value(op, value)
    if op == "$unset":
        return _read_unset(value)
    return _truncate(value)  # $delete: any value


def _read_time(raw: dict, received_ms: int) -> int:
    value = raw.get("$time")
    if value is None:
        return received_ms
    message = "'$time' is invalid: must be specified as seconds or milliseconds since epoch"
    if not _is_number(value) or not math.isfinite(value):
        raise _Reject("$time", message, "time")
    ms = _time_ms(value)
    if ms < MIN_TIME_MS:
        raise _Reject("$time", f"'$time' is invalid: before 1971-01-01 ({value!r})", "time")
    if ms > received_ms + MAX_AHEAD_MS:
        raise _Reject("$time", f"'$time' is invalid: more than 1 hour ahead of the server clock ({value!r})", "time")
    return ms


def _read_flag(raw: dict, name: str) -> bool:
    value = raw.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _Reject(name, f"'{name}' must be true or false", "flag")
    return value


def _read_ip(raw: dict) -> str | None:
    value = raw.get("$ip")
    if value is None:
        return None
    if type(value) is int and value == 0:
        return "0"
    if not isinstance(value, str) or not _utf8_ok(value):
        raise _Reject("$ip", "'$ip' must be an IP address string (\"0\" = no geolocation)", "ip")
    return value


def parse_update(raw: object, *, received_ms: int, kind: str, seq: int, project_id: int = 1) -> Update | Invalid:
    """Validate and normalise one /engage (kind="user") or /groups (kind="group") update object."""
    if kind not in ("user", "group"):
        raise ValueError(f"kind must be 'user' or 'group', got {kind!r}")
    try:
        if not isinstance(raw, dict):
            raise _Reject("", "an update must be a JSON object", "malformed")
        _read_token(raw)
        group_key, profile_id = _read_profile_key(raw, kind)
        op = _read_op(raw, kind)
        value = _read_value(op, raw[op])
        time_ms = _read_time(raw, received_ms)
        ignore_time = _read_flag(raw, "$ignore_time")
        ignore_alias = _read_flag(raw, "$ignore_alias")
        ip = _read_ip(raw)
    except _Reject as rej:
        return Invalid(rej.field, rej.message, rej.reason, seq)
    return Update(seq, project_id, group_key, profile_id, op, value, time_ms, ignore_time, ignore_alias, ip)


def parse_batch(
    raws: Iterable[object], *, received_ms: int, kind: str, first_seq: int = 0, project_id: int = 1
) -> list[Update | Invalid]:
    """parse_update for each object of one request, numbered first_seq, first_seq + 1, ..."""
    return [
        parse_update(raw, received_ms=received_ms, kind=kind, seq=first_seq + i, project_id=project_id)
        for i, raw in enumerate(raws)
    ]


# -------------------------------------------------------------------------------------------- operations
class _Clash(Exception):
    pass


_MISSING = object()


def _op_set(props: dict, value: dict) -> None:
    for k, v in value.items():
        props[k] = copy.deepcopy(v)


def _op_set_once(props: dict, value: dict) -> None:
    for k, v in value.items():
        if k not in props:
            props[k] = copy.deepcopy(v)


def _op_add(props: dict, value: dict) -> None:
    for k, v in value.items():
        current = props.get(k, 0)
        if not _is_number(current):
            raise _Clash
        total = current + v
        if not math.isfinite(total):
            raise _Clash
        props[k] = total


def _existing_list(props: dict, key: str) -> list | None:
    """The list stored under key, None when the key is missing; a clash when it holds anything else."""
    current = props.get(key, _MISSING)
    if current is _MISSING:
        return None
    if not isinstance(current, list):
        raise _Clash
    return current


def _op_union(props: dict, value: dict) -> None:
    for k, items in value.items():
        merged = list(_existing_list(props, k) or [])
        for item in items:
            if not any(_same(item, have) for have in merged):
                merged.append(copy.deepcopy(item))
        props[k] = merged


def _op_append(props: dict, value: dict) -> None:
    for k, item in value.items():
        props[k] = [*list(_existing_list(props, k) or []), copy.deepcopy(item)]


def _op_remove(props: dict, value: dict) -> None:
    for k, item in value.items():
        current = _existing_list(props, k)
        if current is not None:
            props[k] = [have for have in current if not _same(have, item)]


def _op_unset(props: dict, names: list[str]) -> None:
    for name in names:
        props.pop(name, None)


_OPS: dict[str, Callable[[dict, object], None]] = {
    "$set": _op_set,
    "$set_once": _op_set_once,
    "$add": _op_add,
    "$union": _op_union,  # type: ignore[dict-item]
    "$append": _op_append,
    "$remove": _op_remove,
    "$unset": _op_unset,  # type: ignore[dict-item]
}


def _named_keys(update: Update) -> set[str]:
    if update.op == "$unset":
        return set(update.value)  # type: ignore[arg-type]
    return set(update.value) if isinstance(update.value, dict) else set()


def _add_geo(props: dict, update: Update, geo: GeoHook | None) -> None:
    if geo is None or update.ip is None or update.ip == "0":
        return
    named = _named_keys(update)
    for k, v in (geo(update.ip) or {}).items():
        if k not in named:
            props[k] = _truncate(v)


def _within_limits(props: dict) -> bool:
    if sum(1 for k in props if k != LAST_SEEN) >= MAX_KEYS:
        return False
    try:
        for k, v in props.items():
            _check_value(v, k)
    except _Reject:
        return False
    return True


def last_seen_text(ms: int) -> str:
    """`$last_seen` format: UTC `YYYY-MM-DDTHH:MM:SS`, milliseconds truncated."""
    return (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S")


def _apply_one(state: State, update: Update, geo: GeoHook | None) -> None:
    current = state.profiles.get(update.key)
    if update.op == "$delete":
        state.profiles.pop(update.key, None)
        return
    if current is None and update.op in ("$unset", "$remove"):
        return
    props = copy.deepcopy(current.properties) if current is not None else {}
    try:
        _OPS[update.op](props, update.value)
    except _Clash:
        state.clashes.append(update.seq)
        return
    _add_geo(props, update, geo)
    if not update.ignore_time:
        props[LAST_SEEN] = last_seen_text(update.time_ms)
    if not _within_limits(props):
        state.over_limit.append(update.seq)
        return
    state.profiles[update.key] = Profile(props)


def apply(updates: Iterable[Update | Invalid], *, geo: GeoHook | None = None) -> State:
    """The final profile state after every valid update, applied in ($time, seq) order, replays once."""
    ordered = sorted((u for u in updates if isinstance(u, Update)), key=lambda u: (u.time_ms, u.seq))
    state = State()
    seen: set[tuple] = set()
    for update in ordered:
        identity = update.identity
        if identity in seen:
            state.duplicates.append(update.seq)
            continue
        seen.add(identity)
        _apply_one(state, update, geo)
    return state
