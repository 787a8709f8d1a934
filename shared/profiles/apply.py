"""The profile engine: what a sequence of updates makes of a profile. Pure: no IO, no clock.

Entries apply in (`$time`, arrival `seq`) order, so the same updates give the same profile
whatever order they arrived in; `replay` rebuilds a profile from its whole log, `advance`
applies newer entries to a known state. Decisions (semantics §6.3 and the issue's pins):

* `$set` overwrites; `$set_once` sets only absent keys (a key holding null is set); `$add`
  adds numbers (a missing key counts as 0; integers stay exact); `$union` appends the
  elements not yet in the list, in the given order (onto a missing key: the list without
  repeats); `$append` pushes its value as one element; `$remove` removes every equal
  element (an emptied list stays `[]`); `$unset` removes keys; `$delete` removes the profile.
  Elements and values compare as JSON values: member order does not matter, 1 equals 1.0,
  `true` is not 1.
* A type clash — `$add` onto a non-number (null and booleans included) or to a non-finite
  sum, `$union`/`$append`/`$remove` onto a non-list — makes the whole update change nothing;
  so does an update after which the profile would break the property limits (255
  properties, `$last_seen` not counted; the nesting rules of event properties). Whether an
  update clashes is decided at its place in time order. Entries carry validated values
  (`footfall.shared.profiles.updates`), so the values an operation leaves as sent (`$set`,
  `$set_once`) are not checked again: only what an operation computes (`$add`, the lists).
* `$unset` and `$remove` on a missing or deleted profile do nothing; every other operation
  creates it (`$delete` of a missing profile does nothing). A profile whose keys were all
  unset still exists; an update later than a `$delete` recreates the profile from nothing.
* After its operation, every applied update but `$delete` sets `$last_seen` to its `$time`
  (UTC `YYYY-MM-DDTHH:MM:SS`) unless `$ignore_time`; the place found for its `$ip` is
  written as `$city`, `$region`, `mp_country_code`, except where the operation itself named
  those keys.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import PropertyProblem, check_value

__all__ = ["LAST_SEEN", "Entry", "ProfileState", "Verdict", "advance", "last_seen_text", "replay"]

LAST_SEEN = "$last_seen"
_LIMITS = ImportLimits()


class Entry(NamedTuple):
    """One logged update of one profile, as the engine needs it (immutable; a named tuple, as
    `ProfileUpdate`, for the cost of construction)."""

    op: str
    value: Any
    time_ms: int
    seq: int
    ignore_time: bool = False
    geo: tuple[tuple[str, str], ...] = ()  # (property, value) pairs found for its address

    @property
    def position(self) -> tuple[int, int]:
        return (self.time_ms, self.seq)


@dataclass(slots=True)
class ProfileState:
    """A profile (`properties` None: none, or deleted), the newest log position ($time, seq) it
    includes and the latest arrival (`seen_seq`) it includes."""

    properties: dict[str, Any] | None = None
    last_time: int = 0
    last_seq: int = 0
    seen_seq: int = 0
    behind: bool = False  # its log holds arrivals it does not include (set by the store)

    @property
    def position(self) -> tuple[int, int]:
        return (self.last_time, self.last_seq)


@dataclass
class Verdict:
    """The updates (by seq) that changed nothing because of a type clash or the limits."""

    refused: dict[int, str] = field(default_factory=dict)  # seq -> "type_clash" | "limit"


class _Clash(Exception):
    pass


def last_seen_text(time_ms: int) -> str:
    return _second_text(time_ms // 1000)


@functools.lru_cache(maxsize=8192)
def _second_text(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _json_key(value: Any) -> Any:
    """A hashable form under which two JSON values are equal exactly when they are the same value."""
    if value is None:
        return ("z",)
    if type(value) is bool:
        return ("b", value)
    if type(value) in (int, float):
        return ("n", value)  # Python's 1 == 1.0, and their hashes agree
    if type(value) is str:
        return ("s", value)
    if type(value) is list:
        return ("l", tuple(_json_key(v) for v in value))
    if type(value) is dict:
        return ("d", frozenset((k, _json_key(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _list_at(props: dict[str, Any], name: str) -> list[Any] | None:
    """The list a list operation works on: None when the key is missing; a clash when it is not a list."""
    if name not in props:
        return None
    current = props[name]
    if type(current) is not list:
        raise _Clash
    return current


def _operate(props: dict[str, Any], op: str, value: Any) -> set[str]:
    """Apply one operation to `props` in place; return the keys it named (a new set). Raises `_Clash`."""
    if op == "$unset":
        for name in value:
            props.pop(name, None)
        return set(value)
    if op == "$set":
        props.update(value)
    elif op == "$set_once":
        for name, member in value.items():
            props.setdefault(name, member)
    elif op == "$add":
        for name, amount in value.items():
            current = props.get(name, 0)
            if not _is_number(current):
                raise _Clash
            total = current + amount
            if not math.isfinite(total):
                raise _Clash
            props[name] = total
    elif op == "$union":
        for name, members in value.items():
            existing = _list_at(props, name)
            merged = list(existing) if existing is not None else []
            seen = {_json_key(v) for v in merged}
            for member in members:
                key = _json_key(member)
                if key not in seen:
                    seen.add(key)
                    merged.append(member)
            props[name] = merged
    elif op == "$append":
        for name, member in value.items():
            existing = _list_at(props, name)
            props[name] = [*(existing or []), member]
    elif op == "$remove":
        for name, member in value.items():
            existing = _list_at(props, name)
            if existing is not None:
                key = _json_key(member)
                props[name] = [v for v in existing if _json_key(v) != key]
    else:
        raise ValueError(f"unknown operation {op}")
    return set(value)


# Operations that leave every value they name exactly as sent (or remove it). The validator
# checked those values against these limits when the update was ingested, so only the property
# count and the values the place adds are checked when one applies.
_AS_SENT = frozenset({"$set", "$set_once", "$unset"})


def _within_limits(props: dict[str, Any], changed: Iterable[str], limits: ImportLimits) -> bool:
    if len(props) - (LAST_SEEN in props) >= limits.max_properties:
        return False
    try:
        for name in changed:
            if name in props:
                check_value(props[name], limits)
    except PropertyProblem:
        return False
    return True


def _apply_one(props: dict[str, Any] | None, entry: Entry, limits: ImportLimits) -> tuple[dict[str, Any] | None, str]:
    """The profile after `entry` and "" — or the profile unchanged and why it was refused."""
    if entry.op == "$delete":
        return None, ""
    if props is None and entry.op in ("$unset", "$remove"):
        return None, ""
    after = dict(props) if props is not None else {}
    try:
        named = _operate(after, entry.op, entry.value)
    except _Clash:
        return props, "type_clash"
    placed = []
    for name, place in entry.geo:  # distinct names: adding one does not change the test of another
        if name not in named:
            after[name] = place
            named.add(name)
            placed.append(name)
    if not _within_limits(after, placed if entry.op in _AS_SENT else named, limits):
        return props, "limit"
    if not entry.ignore_time:
        after[LAST_SEEN] = last_seen_text(entry.time_ms)
    return after, ""


def advance(state: ProfileState, entries: Sequence[Entry], *, limits: ImportLimits = _LIMITS) -> Verdict:
    """Apply `entries` — each later (in time, then seq) than every entry `state` has seen, and in
    that order — to `state`, in place."""
    verdict = Verdict()
    props = state.properties
    last_time, last_seq, seen_seq = state.last_time, state.last_seq, state.seen_seq
    for entry in entries:
        time_ms, seq = entry.time_ms, entry.seq
        if time_ms < last_time or (time_ms == last_time and seq <= last_seq):
            raise ValueError("advance() takes entries newer than the state; replay() the log instead")
        props, refused = _apply_one(props, entry, limits)
        if refused:
            verdict.refused[seq] = refused
        last_time, last_seq = time_ms, seq
        if seq > seen_seq:
            seen_seq = seq
    state.properties, state.last_time, state.last_seq, state.seen_seq = props, last_time, last_seq, seen_seq
    return verdict


def replay(log: Iterable[Entry], *, limits: ImportLimits = _LIMITS) -> tuple[ProfileState, Verdict]:
    """The profile its whole log makes (duplicates already removed), and the refused entries."""
    state = ProfileState()
    verdict = advance(state, sorted(log, key=lambda e: e.position), limits=limits)
    return state, verdict
