"""The one event validator for `POST /import` (and `/track`): a decoded JSON item → `Event` or `Failure`.

Used by the gateway (strict 400 bodies), the worker and the embedded service, so every
layer agrees on what an acceptable event is. Pure: no IO, no clock (the caller passes
`now_ms`), never raises for any JSON-like input, never mutates its input.

Rules (interface "Event (import)", "Errors", "Limits"; semantics §6.1; decisions.md):

* The item is an object with exactly the members `event` (non-empty string) and
  `properties` (object).
* `properties.time` is a number (int or float, not bool, not string). Values ≥ 1e10 are
  milliseconds, smaller ones seconds; fractions of a millisecond are truncated. Stored as
  integer `time_ms`. Rejected before 1971-01-01T00:00:00Z and more than
  `limits.max_future_seconds` after `now_ms`. Future times inside the tolerance are kept
  as sent (not clamped to the server clock).
* `properties.distinct_id` is a string, or an int converted with `str()`; the empty string
  is allowed. Reserved values (`RESERVED_IDS`) are rejected after `strip()` and `lower()`
  (checked on the whole value, before truncation).
* `properties.$insert_id` is a non-empty string of at most 36 bytes made of `[A-Za-z0-9-]`,
  not a reserved value (compared case-insensitively; the empty string is rejected, a
  string of only `-` is accepted). Required when `strict`. Without
  `strict`, a missing or invalid one is replaced by `derive_insert_id()` of the normalised
  event, so a retried request deduplicates.
* Every string anywhere (event name, keys, values, nested) must be valid UTF-8. Decoders
  hand invalid bytes over as lone surrogates (U+D800–U+DFFF); any surrogate is a failure.
* Limits (`ImportLimits`): serialised event size under `max_event_bytes` (measured with
  `orjson.dumps` of the raw item, stdlib `json` for what orjson refuses, and only when
  the whole body is at least that big);
  fewer than `max_properties` keys in `properties` (every key counts, `time`,
  `distinct_id`, `$insert_id`, `token` and `ip` included); fewer than `max_nested_keys`
  keys per nested object; fewer than `max_array_len` elements per array (nested too).
* Nesting depth convention: the depth of a value is the number of keys and array indices
  on its path from `properties`. `properties.a` is depth 1, `properties.a.b` depth 2,
  `properties.a.b.c` depth 3, `properties.a[0][1]` depth 3 (arrays are levels too). Every
  value must have depth ≤ `max_depth` (3): `{"a": {"b": {"c": 1}}}` is allowed,
  `{"a": {"b": {"c": {"d": 1}}}}` is rejected at `properties.a.b.c.d`. An empty object or
  array at depth 3 is allowed (it holds nothing deeper).
* Strings longer than `max_string_len` characters (code points) are truncated to that many:
  every string value at any depth, the event name, `distinct_id` and `ip` too. Keys are
  truncated the same way, at every depth (issue 15: the interface stores no longer
  names). Two keys of one object that agree on their first `max_string_len` characters
  become one key, which keeps the later member's value (as for duplicate keys in JSON).
* `token` is dropped (the credentials name the project). `ip` is removed from the
  properties; a string becomes `Event.ip`, any other value (`0`, `null`, ...) means "no
  geolocation" and gives `ip=None`.

Decisions beyond the spec (all documented here):

* Integers must fit orjson's range [-2**63, 2**64 - 1] and floats must be finite
  (stdlib `json`, used for the invalid-UTF-8 fallback, accepts `NaN` and huge integers);
  otherwise the event fails with reason "number", since it could not be serialised again.
  Values of any non-JSON Python type fail with reason "type".
* One failure per event: the first rule broken, checked in this order: shape, `event`,
  `properties`, size, property count, `time`, `distinct_id`, `$insert_id`, other
  properties (in key order, depth first).
* `Failure.reason` is one of: malformed (item not an object), event, properties,
  unknown_field, size, too_many_properties, time, distinct_id, insert_id, utf8,
  nested_keys, depth, array_len, number, type.
* `Failure.field` is the JSON path of the offending value: `event`, `properties`,
  `properties.time`, `properties.a.b`, `properties.list[3]`; a top-level member's own
  name for an unknown member; and `""` for problems with the whole item (not an object,
  too big). Field names and the echoed `$insert_id` have lone surrogates replaced by
  U+FFFD so the 400 body can always be encoded; `Failure.insert_id` is otherwise the raw
  `$insert_id` whenever that is a string.

`/track` (client-side ingestion, semantics §6.2) uses the same rules and limits, with the
keyword-only option `track=TrackRules(...)` adding its own (see `TrackRules`): a missing
`time` is the receive time (`now_ms`), events older than `max_age_seconds` (5 days) fail
with reason "time" ("use /import for events older than 5 days"), a missing `$insert_id`
is derived even with `strict` (a present but invalid one still fails under `strict`), and
`client_ip` (the request's address, `ip=1`) becomes `Event.ip` when the event has no `ip`
property. The request address is never part of a derived `$insert_id`: the same event
retried from another network keeps its id.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

from footfall.shared.config import ImportLimits
from footfall.shared.events.model import Event, Failure

__all__ = ["RESERVED_IDS", "TIME_FLOOR_MS", "TrackRules", "derive_insert_id", "validate_batch", "validate_event"]

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

TIME_FLOOR_MS = 31_536_000_000  # 1971-01-01T00:00:00Z
_MS_THRESHOLD = 10_000_000_000  # time values >= 1e10 are milliseconds
_INSERT_ID_MAX_BYTES = 36
_INSERT_ID_RE = re.compile(r"[A-Za-z0-9-]+")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_INF = float("inf")
_LIFTED = frozenset({"time", "distinct_id", "$insert_id", "token", "ip"})
_LIFTED_ORDER = tuple(sorted(_LIFTED))
_TOP_KEYS = frozenset({"event", "properties"})
_UTF8 = "string should be valid utf8"
_INT_RANGE = "integer out of range (must fit in 64 bits)"
_FINITE = "number must be finite"


@dataclass(frozen=True, slots=True)
class TrackRules:
    """What `/track` adds to the import rules (`validate_event(..., track=TrackRules(...))`).

    * a missing `time` is `now_ms`, the server's receive time;
    * an event more than `max_age_seconds` older than `now_ms` fails (`/import` takes those);
    * a missing `$insert_id` is derived from the content even with `strict`;
    * `client_ip` (the request's address when the client sent `ip=1`) becomes `Event.ip`
      when the event has no `ip` property (an `ip` property, even `0`, wins).
    """

    max_age_seconds: int = 5 * 86400
    client_ip: str | None = None


class _Reject(Exception):
    """Raised inside the property walk; `path` collects keys/indices while unwinding."""

    def __init__(self, problem: str, reason: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.reason = reason
        self.path: list[str | int] = []  # innermost first


def _valid_utf8(s: str) -> bool:
    """False when `s` holds a lone surrogate, i.e. came from bytes that were not UTF-8."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(s: str) -> str:
    """`s` with lone surrogates replaced, so it can be sent back in a JSON body."""
    if s.isascii() or _valid_utf8(s):
        return s
    return _SURROGATE_RE.sub("\ufffd", s)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is str:
        return "string"
    if t is list:
        return "array"
    if t is dict:
        return "object"
    return t.__name__


def _fail(index: int, insert_id: Any, field: str, problem: str, reason: str) -> Failure:
    field = _printable(field)
    iid = _printable(insert_id) if type(insert_id) is str else None
    return Failure(index, iid, field, f"'{field}' is invalid: {problem}" if field else problem, reason)


def _render_path(path: list[str | int]) -> str:
    """`path` innermost first → `properties.a.b[3]`."""
    out = "properties"
    for part in reversed(path):
        out += f"[{part}]" if type(part) is int else f".{part}"
    return out


def _too_deep(lim: ImportLimits, first: str | int) -> _Reject:
    """The reject of a non-empty object or array at the depth limit, at its first member."""
    r = _Reject(f"nested deeper than {lim.max_depth} levels", "depth")
    r.path.append(first)
    return r


def _check_value(v: Any, depth: int, lim: ImportLimits) -> Any:
    """Check the value `v` of a member or element of a container found at `depth`; return it,
    or a copy with strings truncated."""
    t = type(v)
    if t is str:
        if not v.isascii() and not _valid_utf8(v):
            raise _Reject(_UTF8, "utf8")
        maxlen = lim.max_string_len
        return v if len(v) <= maxlen else v[:maxlen]
    if t is int:
        if v < _INT_MIN or v > _INT_MAX:
            raise _Reject(_INT_RANGE, "number")
        return v
    if t is float:
        if v - v != 0.0:  # NaN or ±inf
            raise _Reject(_FINITE, "number")
        return v
    if t is bool or v is None:
        return v
    if t is dict:
        return _walk_dict(v, depth + 1, lim)
    if t is list:
        return _walk_list(v, depth + 1, lim)
    raise _Reject(f"unsupported value type {t.__name__}", "type")


def _walk_dict(d: dict[Any, Any], depth: int, lim: ImportLimits) -> dict[Any, Any]:
    """Check the object `d` found at `depth`; return it, or a copy with strings truncated."""
    n = len(d)
    if n >= lim.max_nested_keys:
        raise _Reject(f"object has {n} keys; nested objects must have fewer than {lim.max_nested_keys}", "nested_keys")
    if n and depth >= lim.max_depth:
        raise _too_deep(lim, next(iter(d)))
    maxlen = lim.max_string_len
    out: dict[Any, Any] | None = None
    long_keys = False
    for k, v in d.items():
        if type(k) is not str:
            raise _Reject(f"object keys must be strings, got {type(k).__name__}", "type")
        if len(k) > maxlen:
            long_keys = True
        try:
            if not k.isascii() and not _valid_utf8(k):
                raise _Reject("property name should be valid utf8", "utf8")
            if type(v) is str and v.isascii() and len(v) <= maxlen:
                continue  # the common case, without a call
            nv = _check_value(v, depth, lim)
        except _Reject as r:
            r.path.append(k)
            raise
        if nv is not v:
            if out is None:
                out = dict(d)
            out[k] = nv
    result = d if out is None else out
    if long_keys:
        result = {k[:maxlen]: v for k, v in result.items()}
    return result


def _walk_list(a: list[Any], depth: int, lim: ImportLimits) -> list[Any]:
    """Check the array `a` found at `depth`; return it, or a copy with strings truncated."""
    n = len(a)
    if n >= lim.max_array_len:
        raise _Reject(f"array has {n} elements; arrays must have fewer than {lim.max_array_len}", "array_len")
    if n and depth >= lim.max_depth:
        raise _too_deep(lim, 0)
    maxlen = lim.max_string_len
    out: list[Any] | None = None
    for i, v in enumerate(a):
        if type(v) is str and v.isascii() and len(v) <= maxlen:
            continue  # the common case, without a call
        try:
            nv = _check_value(v, depth, lim)
        except _Reject as r:
            r.path.append(i)
            raise
        if nv is not v:
            if out is None:
                out = list(a)
            out[i] = nv
    return a if out is None else out


def _serialised_size(raw: Any) -> int:
    """Bytes of `raw` as compact JSON; orjson first, stdlib for what orjson refuses."""
    try:
        return len(orjson.dumps(raw))
    except (TypeError, ValueError):  # lone surrogates, integers beyond 64 bits, ...
        pass
    try:
        text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        return len(text.encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        return 0  # not serialisable at all: the checks below say what is wrong


def derive_insert_id(event: str, time_ms: int, distinct_id: str, ip: str | None, properties: dict[str, Any]) -> str:
    """32 hex chars identifying the normalised content of an event (non-strict imports).

    The same event sent twice (a retried request) gets the same id and so deduplicates;
    any difference in name, time, distinct_id, ip or properties gives a different id.
    Keys are sorted at every level, so member order does not matter.
    """
    canon = orjson.dumps([event, time_ms, distinct_id, ip, properties], option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canon, digest_size=16).hexdigest()


def _plain_keys(props: dict[Any, Any], maxlen: int, known: set[str]) -> bool:
    """True when every key of `props` is an exact `str` of ASCII characters, at most `maxlen`
    of them, so that no key needs a check or a truncation. `known` holds keys found so (the
    events of one request mostly share their names): one subset test per event instead of
    checks per key. (A key equal to a known one is taken for an exact `str`: JSON decoders
    make no `str` subclasses.)"""
    if props.keys() <= known:
        return True
    for k in props:
        if k not in known:
            if type(k) is not str or not k.isascii() or len(k) > maxlen:
                return False
            known.add(k)
    return True


def _plain_properties(props: dict[str, Any], limits: ImportLimits) -> dict[str, Any]:
    """`_any_properties` for an object whose keys `_plain_keys` accepted: only values are
    checked, in key order, with the same problems and paths."""
    maxlen = limits.max_string_len
    out = props.copy()
    for lifted in _LIFTED_ORDER:
        if lifted in out:
            del out[lifted]
    changed: dict[str, Any] | None = None
    for k, v in out.items():
        vt = type(v)
        try:
            if vt is str:
                if v.isascii():
                    if len(v) <= maxlen:
                        continue
                elif not _valid_utf8(v):
                    raise _Reject(_UTF8, "utf8")
                elif len(v) <= maxlen:
                    continue
                nv: Any = v[:maxlen]
            elif vt is int:
                if _INT_MIN <= v <= _INT_MAX:
                    continue
                raise _Reject(_INT_RANGE, "number")
            elif vt is float:
                if v - v == 0.0:  # not NaN or ±inf
                    continue
                raise _Reject(_FINITE, "number")
            elif vt is bool or v is None:
                continue
            elif vt is dict:
                nv = _walk_dict(v, 1, limits)
            elif vt is list:
                nv = _walk_list(v, 1, limits)
            else:
                raise _Reject(f"unsupported value type {vt.__name__}", "type")
        except _Reject as r:
            r.path.append(k)
            raise
        if nv is not v:
            if changed is None:
                changed = {}
            changed[k] = nv
    if changed:
        out.update(changed)  # same keys: the order stays
    return out


def _any_properties(props: dict[Any, Any], limits: ImportLimits) -> dict[str, Any]:
    """The event's own properties (`_LIFTED` ones left out), checked in key order, depth
    first; strings and keys truncated. Raises `_Reject`."""
    maxlen = limits.max_string_len
    out: dict[str, Any] = {}
    for k, v in props.items():
        if k in _LIFTED:
            continue
        try:
            if type(k) is not str:
                raise _Reject(f"property names must be strings, got {type(k).__name__}", "type")
            if not k.isascii() and not _valid_utf8(k):
                raise _Reject("property name should be valid utf8", "utf8")
            # the checks of `_check_value`, inline: this loop runs for every property of every event
            vt = type(v)
            if vt is str:
                if not v.isascii() and not _valid_utf8(v):
                    raise _Reject(_UTF8, "utf8")
                if len(v) > maxlen:
                    v = v[:maxlen]
            elif vt is int:
                if v < _INT_MIN or v > _INT_MAX:
                    raise _Reject(_INT_RANGE, "number")
            elif vt is float:
                if v - v != 0.0:  # NaN or ±inf
                    raise _Reject(_FINITE, "number")
            elif vt is bool or v is None:
                pass
            elif vt is dict:
                v = _walk_dict(v, 1, limits)
            elif vt is list:
                v = _walk_list(v, 1, limits)
            else:
                raise _Reject(f"unsupported value type {vt.__name__}", "type")
        except _Reject as r:
            r.path.append(k)
            raise
        if len(k) > maxlen:
            k = k[:maxlen]  # a later member under the same truncated name wins
        out[k] = v
    return out


def validate_event(
    raw: Any,
    index: int,
    *,
    project_id: int,
    strict: bool,
    limits: ImportLimits,
    now_ms: int,
    body_bytes: int,
    track: TrackRules | None = None,
    known_keys: set[str] | None = None,
) -> Event | Failure:
    """Validate and normalise one decoded `/import` item, or with `track` one `/track` item
    (see the module docstring). `known_keys`, shared by the calls for one request's items
    (`validate_batch`), only saves work: property names already found plain."""
    # --- shape -------------------------------------------------------------------------
    if type(raw) is not dict:
        return _fail(index, None, "", f"each event must be a JSON object, got {_type_name(raw)}", "malformed")
    props = raw.get("properties")
    raw_iid: Any = props.get("$insert_id") if type(props) is dict else None

    name = raw.get("event")
    if type(name) is not str:
        if name is None and "event" not in raw:
            return _fail(index, raw_iid, "event", "is required", "event")
        return _fail(index, raw_iid, "event", f"must be a string, got {_type_name(name)}", "event")
    if not name:
        return _fail(index, raw_iid, "event", "must not be empty", "event")
    if not name.isascii() and not _valid_utf8(name):
        return _fail(index, raw_iid, "event", _UTF8, "utf8")

    if type(props) is not dict:
        if "properties" not in raw:
            return _fail(index, raw_iid, "properties", "is required", "properties")
        return _fail(index, raw_iid, "properties", f"must be an object, got {_type_name(props)}", "properties")

    if len(raw) != 2:
        for k in raw:
            if k not in _TOP_KEYS:
                key = k if type(k) is str else repr(k)
                return _fail(
                    index, raw_iid, key, "unknown field; an event has only 'event' and 'properties'", "unknown_field"
                )

    # --- size and count ----------------------------------------------------------------
    if body_bytes >= limits.max_event_bytes:
        size = _serialised_size(raw)
        if size >= limits.max_event_bytes:
            return _fail(
                index, raw_iid, "", f"event is {size} bytes; an event must be under {limits.max_event_bytes}", "size"
            )
    if len(props) >= limits.max_properties:
        return _fail(
            index,
            raw_iid,
            "properties",
            f"has {len(props)} properties; an event must have fewer than {limits.max_properties}",
            "too_many_properties",
        )

    # --- time --------------------------------------------------------------------------
    t: Any = props.get("time")
    tt = type(t)
    if tt is int:
        time_ms = t if t >= _MS_THRESHOLD else t * 1000
    elif tt is float:
        if t != t or t == _INF or t == -_INF:
            return _fail(index, raw_iid, "properties.time", "must be a finite number", "time")
        # (a negative time is before the floor anyway; `t * 1000` of a huge one would be -inf)
        time_ms = int(t) if t >= _MS_THRESHOLD else int(t * 1000) if t >= 0.0 else -1
    elif t is None and "time" not in props:
        if track is None:
            return _fail(index, raw_iid, "properties.time", "is required (seconds or milliseconds since epoch)", "time")
        time_ms = now_ms
    else:
        return _fail(
            index,
            raw_iid,
            "properties.time",
            f"must be specified as seconds or milliseconds since epoch (a number), got {_type_name(t)}",
            "time",
        )
    if time_ms < TIME_FLOOR_MS:
        return _fail(index, raw_iid, "properties.time", "is before 1971-01-01T00:00:00Z", "time")
    if time_ms > now_ms + limits.max_future_seconds * 1000:
        return _fail(
            index,
            raw_iid,
            "properties.time",
            f"is more than {limits.max_future_seconds} seconds ahead of the server clock",
            "time",
        )
    if track is not None and time_ms < now_ms - track.max_age_seconds * 1000:
        days = f"{track.max_age_seconds / 86400:g} days"
        return _fail(
            index,
            raw_iid,
            "properties.time",
            f"is more than {days} old; use /import for events older than {days}",
            "time",
        )

    # --- distinct_id -------------------------------------------------------------------
    maxlen = limits.max_string_len
    did: Any = props.get("distinct_id")
    dt = type(did)
    if dt is int:
        try:
            did = str(did)
        except ValueError:  # more digits than int→str conversion allows
            return _fail(index, raw_iid, "properties.distinct_id", "integer is too large", "distinct_id")
    elif dt is not str:
        if did is None and "distinct_id" not in props:
            return _fail(index, raw_iid, "properties.distinct_id", "is required", "distinct_id")
        return _fail(
            index, raw_iid, "properties.distinct_id", f"must be a string, got {_type_name(did)}", "distinct_id"
        )
    elif not did.isascii() and not _valid_utf8(did):
        return _fail(index, raw_iid, "properties.distinct_id", _UTF8, "utf8")
    norm = did.strip().lower()
    if norm in RESERVED_IDS:
        return _fail(index, raw_iid, "properties.distinct_id", f"'{norm}' is a reserved value", "distinct_id")
    if len(did) > maxlen:
        did = did[:maxlen]

    # --- $insert_id --------------------------------------------------------------------
    iid_problem = None
    if raw_iid is None:
        iid_problem = "is required" if "$insert_id" not in props else "must be a string, got null"
    elif type(raw_iid) is not str:
        iid_problem = f"must be a string, got {_type_name(raw_iid)}"
    elif not raw_iid:
        iid_problem = "must not be empty"
    elif raw_iid.isascii():
        if len(raw_iid) > _INSERT_ID_MAX_BYTES:
            iid_problem = f"is {len(raw_iid)} bytes; at most {_INSERT_ID_MAX_BYTES} are allowed"
        elif not raw_iid.isalnum() and _INSERT_ID_RE.fullmatch(raw_iid) is None:  # (ASCII: isalnum = [A-Za-z0-9]+)
            iid_problem = "only alphanumeric characters and '-' are allowed"
        elif raw_iid.lower() in RESERVED_IDS:
            iid_problem = f"'{raw_iid.lower()}' is a reserved value"
    else:
        nbytes = len(raw_iid.encode("utf-8", "surrogatepass"))
        if nbytes > _INSERT_ID_MAX_BYTES:
            iid_problem = f"is {nbytes} bytes; at most {_INSERT_ID_MAX_BYTES} are allowed"
        else:
            iid_problem = "only alphanumeric characters and '-' are allowed"
    if iid_problem is not None and strict and (track is None or "$insert_id" in props):
        return _fail(index, raw_iid, "properties.$insert_id", iid_problem, "insert_id")

    # --- token, ip and the other properties --------------------------------------------
    tok = props.get("token")
    if type(tok) is str and not tok.isascii() and not _valid_utf8(tok):
        return _fail(index, raw_iid, "properties.token", _UTF8, "utf8")
    ip = props.get("ip")
    if type(ip) is str:
        if not ip.isascii() and not _valid_utf8(ip):
            return _fail(index, raw_iid, "properties.ip", _UTF8, "utf8")
        if len(ip) > maxlen:
            ip = ip[:maxlen]
    else:
        ip = None

    try:
        # the same answer either way; the first one makes fewer calls per property
        if _plain_keys(props, maxlen, set() if known_keys is None else known_keys):
            out = _plain_properties(props, limits)
        else:
            out = _any_properties(props, limits)
    except _Reject as r:
        return _fail(index, raw_iid, _render_path(r.path), r.problem, r.reason)

    if len(name) > maxlen:
        name = name[:maxlen]
    if iid_problem is None:
        iid: str = raw_iid
    else:
        iid = derive_insert_id(name, time_ms, did, ip, out)
    if track is not None and track.client_ip is not None and "ip" not in props:
        ip = track.client_ip
    return Event(project_id, name, time_ms, did, iid, out, ip)


def validate_batch(
    raws: list[Any],
    *,
    project_id: int,
    strict: bool,
    limits: ImportLimits,
    now_ms: int,
    body_bytes: int,
    track: TrackRules | None = None,
) -> tuple[list[Event], list[Failure]]:
    """Validate every item of a request; failures carry the item's position as `index`."""
    events: list[Event] = []
    failures: list[Failure] = []
    add_event = events.append
    add_failure = failures.append
    known_keys: set[str] = set()
    for i, raw in enumerate(raws):
        r = validate_event(
            raw,
            i,
            project_id=project_id,
            strict=strict,
            limits=limits,
            now_ms=now_ms,
            body_bytes=body_bytes,
            track=track,
            known_keys=known_keys,
        )
        if type(r) is Event:
            add_event(r)
        else:
            add_failure(r)  # type: ignore[arg-type]
    return events, failures


# -- the property walk, for other objects of properties (profile and group updates) ----------
PropertyProblem = _Reject  # `.problem`, `.reason`, `.path` (keys and indices, innermost first)


def check_properties(values: dict[Any, Any], limits: ImportLimits) -> dict[Any, Any]:
    """Check an object of properties by the rules of an event's `properties` (key count, nesting
    depth, array length, UTF-8, 64-bit integers, finite numbers); return it, or a copy with
    strings truncated. Raises `PropertyProblem`."""
    return _walk_dict(values, 0, limits)


def check_value(value: Any, limits: ImportLimits) -> Any:
    """`check_properties` for one property's value (the value of `{"name": value}`)."""
    return _check_value(value, 0, limits)
