"""Storing a batch of profile (or group) updates: the log insert, then the materialised state.

`store_updates` is the store step of the profile and group streams (the worker and the
embedded path both run it through `store_batch`). Per batch:

1. drop in-batch duplicates (the first arrival is kept) and give every update its arrival
   `seq` (`SeqClock`: increasing within the process, from the wall clock in 1/10,000 ms);
2. per project, one query over the log of the batch's profiles finds the updates already
   logged (replays: dropped) and the newest logged `seq` of each profile; the rest are
   inserted into `profile_updates`;
3. the current states are read (`profiles` FINAL); a profile whose new updates are all
   newer than everything its state has seen, and whose state is not behind its log (a crash
   between the two inserts), advances in place; any other profile is replayed from its whole
   log;
4. the new states are inserted (one row per profile; the highest `version` wins).

Updates of one profile are serialised: in a worker a profile's updates come from one
partition, and `store_updates` holds a process-wide lock (the embedded path stores
concurrent requests). Every read goes through the SQL layer's project-scoped sources.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from footfall.shared.ingest import Locator, Place, Stored
from footfall.shared.profiles.apply import Entry, ProfileState, advance, replay
from footfall.shared.profiles.updates import ProfileUpdate, update_dedup_key
from footfall.shared.schema.catalog import PROFILE_UPDATES, PROFILES
from footfall.shared.sql import Params, Scope, render, source, sql
from footfall.shared.warehouse import Warehouse

__all__ = ["SEQ", "SeqClock", "store_updates"]

Key = tuple[str, str]  # (group_key, profile_id)
_FIRST_ARRIVAL = 2**63  # version of the log rows: the highest is the lowest seq
_LOCK = threading.Lock()


class SeqClock:
    """Arrival numbers: increasing within the process, and near `wall ms × 10,000` so that a
    process that starts later (after a restart or a rebalance) numbers after this one."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> int:
        """The first of `n` consecutive numbers."""
        with self._lock:
            first = max(self._last + 1, int(time.time() * 1000) * 10_000)
            self._last = first + n - 1
            return first


SEQ = SeqClock()


@dataclass(frozen=True)
class _Pending:
    index: int  # position in the batch given to store_updates
    update: ProfileUpdate
    dedup: bytes
    entry: Entry


def _geo(place: Place) -> tuple[tuple[str, str], ...]:
    found = (("$city", place.city), ("$region", place.region), ("mp_country_code", place.country_code))
    return tuple((name, value) for name, value in found if value)


def _ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def _keys_filter(keys: Sequence[Key], binds: Params) -> Any:
    return sql("(group_key, profile_id) IN {}", binds.add([tuple(k) for k in keys], "Array(Tuple(String, String))"))


class _ProjectStore:
    """The warehouse reads and writes of one project's profiles."""

    def __init__(self, warehouse: Warehouse, project_id: int) -> None:
        self.warehouse = warehouse
        self.scope = Scope(project_id)

    def logged(self, keys: Sequence[Key], hashes: Sequence[bytes]) -> tuple[dict[Key, int], set[bytes]]:
        """The newest logged seq of each profile, and which of `hashes` are logged already."""
        b = Params()
        wanted = b.add([h.hex().upper() for h in hashes], "Array(String)")
        text = sql(
            "SELECT group_key, profile_id, max(seq), groupArrayIf(hex(dedup_hash), has({}, hex(dedup_hash))) "
            "FROM {} GROUP BY group_key, profile_id",
            wanted,
            source(PROFILE_UPDATES, self.scope, b, keys=_keys_filter(keys, b)),
        )
        newest: dict[Key, int] = {}
        seen: set[bytes] = set()
        for group_key, profile_id, max_seq, found in self.warehouse.query(render(text), b.values):
            newest[(group_key, profile_id)] = int(max_seq)
            seen.update(bytes.fromhex(h) for h in found)
        return newest, seen

    def states(self, keys: Sequence[Key]) -> dict[Key, ProfileState]:
        b = Params()
        text = sql(
            "SELECT group_key, profile_id, properties, deleted, last_time, last_seq, seen_seq FROM {}",
            source(PROFILES, self.scope, b, final=True, keys=_keys_filter(keys, b)),
        )
        found: dict[Key, ProfileState] = {}
        for group_key, profile_id, properties, deleted, last_time, last_seq, seen_seq in self.warehouse.query(
            render(text), b.values
        ):
            props = None if deleted else orjson.loads(properties)
            found[(group_key, profile_id)] = ProfileState(props, _ms(last_time), int(last_seq), int(seen_seq))
        return found

    def logs(self, keys: Sequence[Key]) -> dict[Key, list[Entry]]:
        """Every logged update of the profiles, one per dedup hash (its first arrival)."""
        b = Params()
        text = sql(
            "SELECT group_key, profile_id, op, value, time, seq, ignore_time, city, region, country_code, "
            "hex(dedup_hash) FROM {}",
            source(PROFILE_UPDATES, self.scope, b, keys=_keys_filter(keys, b)),
        )
        first: dict[tuple[Key, str], Entry] = {}
        for group_key, profile_id, op, value, at, seq, ignore_time, city, region, cc, dedup in self.warehouse.query(
            render(text), b.values
        ):
            entry = Entry(op, orjson.loads(value), _ms(at), int(seq), bool(ignore_time), _geo(Place(city, region, cc)))
            key = ((group_key, profile_id), dedup)
            if key not in first or entry.seq < first[key].seq:
                first[key] = entry
        logs: dict[Key, list[Entry]] = defaultdict(list)
        for (profile, _), entry in first.items():
            logs[profile].append(entry)
        return logs

    def insert_log(self, pending: Sequence[_Pending], places: Sequence[Place], now_ms: int) -> None:
        rows = [
            [
                p.update.project_id,
                p.update.group_key,
                p.update.profile_id,
                p.entry.time_ms,
                p.entry.seq,
                p.update.op,
                orjson.dumps(p.update.value).decode(),
                int(p.update.ignore_time),
                place.city,
                place.region,
                place.country_code,
                p.dedup,
                _FIRST_ARRIVAL - p.entry.seq,
                now_ms,
            ]
            for p, place in zip(pending, places, strict=True)
        ]
        self.warehouse.insert(PROFILE_UPDATES.name, PROFILE_UPDATES.column_names, rows)

    def insert_states(self, states: dict[Key, ProfileState], version: int, now_ms: int) -> None:
        rows = [
            [
                self.scope.project_id,
                group_key,
                profile_id,
                orjson.dumps(state.properties).decode() if state.properties is not None else "{}",
                int(state.properties is None),
                state.last_time,
                state.last_seq,
                state.seen_seq,
                version,
                now_ms,
            ]
            for (group_key, profile_id), state in states.items()
        ]
        if rows:
            self.warehouse.insert(PROFILES.name, PROFILES.column_names, rows)


def _store_project(
    warehouse: Warehouse, project_id: int, pending: list[_Pending], places: list[Place], now_ms: int
) -> tuple[list[_Pending], dict[int, str]]:
    """Log and apply one project's updates; return those logged and the refused ones (index → reason)."""
    store = _ProjectStore(warehouse, project_id)
    keys = sorted({(p.update.group_key, p.update.profile_id) for p in pending})
    newest, logged = store.logged(keys, [p.dedup for p in pending])
    fresh = [(p, place) for p, place in zip(pending, places, strict=True) if p.dedup not in logged]
    if not fresh:
        return [], {}
    store.insert_log([p for p, _ in fresh], [place for _, place in fresh], now_ms)

    by_profile: dict[Key, list[_Pending]] = defaultdict(list)
    for p, _ in fresh:
        by_profile[(p.update.group_key, p.update.profile_id)].append(p)
    states = store.states(list(by_profile))
    refused: dict[int, str] = {}
    index_of = {p.entry.seq: p.index for p, _ in fresh}
    to_replay: list[Key] = []
    for profile, items in by_profile.items():
        state = states.get(profile, ProfileState())
        entries = sorted((p.entry for p in items), key=lambda e: e.position)
        behind = newest.get(profile, 0) > state.seen_seq  # logged updates the state never saw
        if behind or entries[0].position <= state.position:
            to_replay.append(profile)
            continue
        states[profile] = state
        for seq, reason in advance(state, entries).refused.items():
            refused[index_of[seq]] = reason
    if to_replay:
        for profile, log in store.logs(to_replay).items():
            state, verdict = replay(log)
            states[profile] = state
            for seq, reason in verdict.refused.items():
                if seq in index_of:  # report the refusals of this batch's updates only
                    refused[index_of[seq]] = reason
    changed = {k: states[k] for k in by_profile}
    store.insert_states(changed, max(p.entry.seq for p, _ in fresh), now_ms)
    return [p for p, _ in fresh], refused


def store_updates(
    warehouse: Warehouse, locator: Locator, updates: Sequence[ProfileUpdate], ingested_at_ms: int | None = None
) -> Stored:
    """Log and apply a batch of updates (blocking: run it in the warehouse's thread pool);
    `Stored.refused` holds the updates the engine refused (index → reason)."""
    now_ms = ingested_at_ms if ingested_at_ms is not None else int(time.time() * 1000)
    result = Stored()
    with _LOCK:
        first_seen: dict[bytes, int] = {}
        for i, u in enumerate(updates):
            first_seen.setdefault(update_dedup_key(u), i)
        result.dropped = len(updates) - len(first_seen)
        first_seq = SEQ.take(len(first_seen))
        by_project: dict[int, tuple[list[_Pending], list[Place]]] = defaultdict(lambda: ([], []))
        for n, (dedup, i) in enumerate(first_seen.items()):
            u = updates[i]
            place = locator.place(u.ip)
            entry = Entry(u.op, u.value, u.time_ms, first_seq + n, u.ignore_time, _geo(place))
            pending, places = by_project[u.project_id]
            pending.append(_Pending(i, u, dedup, entry))
            places.append(place)
        for project_id, (pending, places) in by_project.items():
            logged, refused = _store_project(warehouse, project_id, pending, places, now_ms)
            result.keys.extend(p.dedup for p in logged)
            result.dropped += len(pending) - len(logged)
            result.refused.update(refused)
    return result
