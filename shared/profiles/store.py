"""Storing a batch of profile (or group) updates: the log insert, then the materialised state.

`store_updates` is the store step of the profile and group streams (the worker and the
embedded path both run it through `store_batch`). A batch is first prepared outside any
lock (in-batch duplicates dropped, dedup keys, places, the log's JSON values), then
committed:

1. every update gets its arrival `seq` (`SeqClock`: increasing within the process, from
   the wall clock in 1/10,000 ms);
2. per project and group key, one query reads the current states (`profiles`) and
   the newest logged arrival of each profile (`profile_heads`): a state behind its log (a
   crash between the log and the state insert) is noticed there. With a state cache (the
   warehouse's `StateCache`, which `serve` gives its store: `footfall.shared.profiles.cache`)
   only the profiles it does not hold are read, and the states written go into it;
3. the profiles with an update no newer than their newest applied `$time` (only those can
   be replays: a replay has its original's `$time`), and the profiles behind their log,
   have their whole log read in one query: replays are dropped, the rest inserted into
   `profile_updates`;
4. a profile whose new updates are all newer than everything its state has seen advances in
   place; any other profile (it is one of step 3's) is replayed from its log and the new
   updates;
5. the new states are inserted (one row per profile; the highest `version` wins).

Updates of one profile are serialised. In a worker a profile's updates come from one
partition. In one process, commits take turns under one lock, and a commit takes every
batch that is waiting (a group commit, up to `_GROUP_MAX` updates): the concurrent
requests of the embedded path share one set of statements, in arrival order, and each
returns only after the commit that holds its updates (so a 200 still means stored).
Every read goes through the SQL layer's project-scoped sources; the id lists travel as one
JSON string parameter (binding thousands of separate values costs more in the client than
the query in the engine), and `profile_id IN (…)` under a fixed `group_key` is a prefix of
every profile table's sorting key.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from footfall.shared.ingest import Locator, Place, Stored
from footfall.shared.profiles.apply import Entry, ProfileState, advance, replay
from footfall.shared.profiles.cache import Cached, StateCache, state_cache
from footfall.shared.profiles.updates import ProfileUpdate, update_dedup_key
from footfall.shared.schema.catalog import PROFILE_HEADS, PROFILE_UPDATES, PROFILES
from footfall.shared.sql import Params, Scope, Sql, render, source, sql
from footfall.shared.warehouse import Warehouse

__all__ = ["SEQ", "SeqClock", "store_updates"]

_FIRST_ARRIVAL = 2**63  # version of the log rows: the highest is the lowest seq
_GROUP_MAX = 20_000  # updates in one group commit (a batch is never split)


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


def _geo(place: Place) -> tuple[tuple[str, str], ...]:
    if not (place.city or place.region or place.country_code):
        return ()
    found = (("$city", place.city), ("$region", place.region), ("mp_country_code", place.country_code))
    return tuple((name, value) for name, value in found if value)


def _position(entry: Entry) -> tuple[int, int]:
    return (entry.time_ms, entry.seq)


@dataclass(slots=True)
class _Batch:
    """One call's updates, prepared outside the commit lock: the first arrival of each
    duplicate only, with its dedup key, place and logged JSON value."""

    warehouse: Warehouse
    locator: Locator
    now_ms: int
    updates: list[ProfileUpdate]
    indexes: list[int]  # position of each in the call's batch
    dedups: list[bytes]
    places: list[Place]
    geos: list[tuple[tuple[str, str], ...]]  # the properties each one's place sets
    values: list[str]
    result: Stored = field(default_factory=Stored)
    done: bool = False
    error: BaseException | None = None


class _Pending(NamedTuple):
    """One update of a commit (a named tuple: one is made per update, in the commit)."""

    batch: _Batch
    at: int  # position in its call's batch
    update: ProfileUpdate
    dedup: bytes
    entry: Entry
    place: Place
    value: str  # its value as the log stores it (JSON)


def _prepare(warehouse: Warehouse, locator: Locator, updates: Sequence[ProfileUpdate], now_ms: int) -> _Batch:
    batch = _Batch(warehouse, locator, now_ms, [], [], [], [], [], [])
    seen: set[bytes] = set()
    places: dict[str | None, tuple[Place, tuple[tuple[str, str], ...]]] = {}
    dumps = orjson.dumps
    for i, u in enumerate(updates):
        dedup = update_dedup_key(u)
        if dedup in seen:
            continue
        seen.add(dedup)
        found = places.get(u.ip)
        if found is None:
            place = locator.place(u.ip)
            found = places[u.ip] = (place, _geo(place))
        batch.updates.append(u)
        batch.indexes.append(i)
        batch.dedups.append(dedup)
        batch.places.append(found[0])
        batch.geos.append(found[1])
        batch.values.append(dumps(u.value).decode())
    batch.result.dropped = len(updates) - len(batch.updates)
    return batch


def _json_list(values: Sequence[str], binds: Params) -> Sql:
    """A list of strings as one bound JSON string, unpacked by the engine into a set."""
    return sql(
        "(SELECT arrayJoin(JSONExtract({}, 'Array(String)')))", binds.add(orjson.dumps(list(values)).decode(), "String")
    )


class _ProfileStore:
    """The warehouse reads and writes of the profiles of one project and group key."""

    def __init__(self, warehouse: Warehouse, project_id: int, group_key: str) -> None:
        self.warehouse = warehouse
        self.scope = Scope(project_id)
        self.group_key = group_key

    def _ids(self, ids: Sequence[str], binds: Params) -> Sql:
        return sql("group_key = {} AND profile_id IN {}", binds.add(self.group_key, "String"), _json_list(ids, binds))

    def states(self, ids: Sequence[str]) -> dict[str, ProfileState]:
        """The current state of each profile that has one, marked `behind` when the log holds
        a newer arrival than the state includes (`profile_heads`). The rows of unmerged parts
        are read without FINAL (cheaper in the engine): the highest `version` of each wins."""
        b = Params()
        profiles = self._ids(ids, b)  # bound once, read by both scans
        text = sql(
            "SELECT profile_id, properties, deleted, toUnixTimestamp64Milli(last_time), last_seq, seen_seq, version, "
            "0 AS head FROM {} "
            "UNION ALL SELECT profile_id, '', 0, 0, 0, 0, 0, max(max_seq) FROM {} GROUP BY profile_id",
            source(PROFILES, self.scope, b, keys=profiles),
            source(PROFILE_HEADS, self.scope, b, keys=profiles),
        )
        newest: dict[str, tuple[Any, ...]] = {}
        heads: dict[str, int] = {}
        for row in self.warehouse.query(render(text), b.values):
            profile_id, head, version = row[0], row[7], row[6]
            if head:
                heads[profile_id] = int(head)
                continue
            seen = newest.get(profile_id)
            if seen is None or version > seen[6]:
                newest[profile_id] = row
        loads = orjson.loads
        found: dict[str, ProfileState] = {}
        for profile_id, properties, deleted, last_time, last_seq, seen_seq, _, _ in newest.values():
            props = None if deleted else loads(properties)
            found[profile_id] = ProfileState(props, int(last_time), int(last_seq), int(seen_seq))
        for profile_id, head in heads.items():
            state = found.get(profile_id)
            if state is None:
                state = found[profile_id] = ProfileState()
            state.behind = head > state.seen_seq
        return found

    def logs(self, ids: Sequence[str]) -> dict[str, dict[bytes, Entry]]:
        """Every logged update of the profiles by dedup key, one per key (its first arrival)."""
        b = Params()
        text = sql(
            "SELECT profile_id, op, value, toUnixTimestamp64Milli(time), seq, ignore_time, city, region, "
            "country_code, hex(dedup_hash) FROM {}",
            source(PROFILE_UPDATES, self.scope, b, keys=self._ids(ids, b)),
        )
        logs: dict[str, dict[bytes, Entry]] = defaultdict(dict)
        for profile_id, op, value, at, seq, ignore_time, city, region, cc, dedup in self.warehouse.query(
            render(text), b.values
        ):
            entry = Entry(op, orjson.loads(value), int(at), int(seq), bool(ignore_time), _geo(Place(city, region, cc)))
            log = logs[profile_id]
            key = bytes.fromhex(dedup)
            if key not in log or entry.seq < log[key].seq:
                log[key] = entry
        return logs

    def insert_log(self, pending: Sequence[_Pending]) -> None:
        n = len(pending)
        seqs = [p.entry.seq for p in pending]
        columns = {
            "project_id": [self.scope.project_id] * n,
            "group_key": [self.group_key] * n,
            "profile_id": [p.update.profile_id for p in pending],
            "time": [p.update.time_ms for p in pending],
            "seq": seqs,
            "op": [p.update.op for p in pending],
            "value": [p.value for p in pending],
            "ignore_time": [int(p.update.ignore_time) for p in pending],
            "city": [p.place.city for p in pending],
            "region": [p.place.region for p in pending],
            "country_code": [p.place.country_code for p in pending],
            "dedup_hash": [p.dedup for p in pending],
            "first_arrival": [_FIRST_ARRIVAL - s for s in seqs],
            "ingested_at": [p.batch.now_ms for p in pending],
        }
        self.warehouse.insert(
            PROFILE_UPDATES.name,
            PROFILE_UPDATES.column_names,
            [columns[name] for name in PROFILE_UPDATES.column_names],  # type: ignore[misc]
            column_oriented=True,
        )

    def insert_states(self, states: dict[str, ProfileState], version: int, now_ms: int) -> list[str | None]:
        """Insert the states; their properties as the rows hold them (None: deleted)."""
        if not states:
            return []
        n = len(states)
        values = states.values()
        dumps = orjson.dumps
        texts = [dumps(s.properties).decode() if s.properties is not None else None for s in values]
        columns = {
            "project_id": [self.scope.project_id] * n,
            "group_key": [self.group_key] * n,
            "profile_id": list(states),
            "properties": [t if t is not None else "{}" for t in texts],
            "deleted": [int(t is None) for t in texts],
            "last_time": [s.last_time for s in values],
            "last_seq": [s.last_seq for s in values],
            "seen_seq": [s.seen_seq for s in values],
            "version": [version] * n,
            "updated_at": [now_ms] * n,
        }
        self.warehouse.insert(
            PROFILES.name,
            PROFILES.column_names,
            [columns[name] for name in PROFILES.column_names],  # type: ignore[misc]
            column_oriented=True,
        )
        return texts


def _store_profiles(
    warehouse: Warehouse,
    project_id: int,
    group_key: str,
    pending: list[_Pending],
    now_ms: int,
    cache: StateCache | None = None,
) -> None:
    """Log and apply the updates (in arrival order) of one project's profiles of one group key;
    record in each update's batch result whether it was stored or refused. With a `cache`,
    the states it holds are not read, and the states written go into it."""
    store = _ProfileStore(warehouse, project_id, group_key)
    ids = {p.update.profile_id for p in pending}
    if cache is None:
        _apply(store, pending, store.states(sorted(ids)), now_ms)
        return
    states, missing, epoch = cache.take(project_id, group_key, ids)
    try:
        if missing:
            states.update(store.states(sorted(missing)))
        written = _apply(store, pending, states, now_ms)
    except BaseException:
        cache.drop(project_id, group_key, ids)  # their stored states may be behind their logs now
        raise
    cache.put(project_id, group_key, written, epoch)


def _apply(
    store: _ProfileStore, pending: list[_Pending], states: dict[str, ProfileState], now_ms: int
) -> list[tuple[str, Cached]]:
    """The commit's steps after the state read (module docstring, 3 to 5); the states written,
    as a `StateCache` keeps them."""
    # The profiles that may have replays among their updates, and the only ones that can need
    # a replay from their log: an update no newer than the state's newest `$time`, or behind.
    suspects: set[str] = set()
    for p in pending:
        state = states.get(p.update.profile_id)
        if state is not None and (state.behind or p.update.time_ms <= state.last_time):
            suspects.add(p.update.profile_id)
    logs = store.logs(sorted(suspects)) if suspects else {}
    fresh = pending
    if logs:
        fresh = [p for p in pending if p.dedup not in logs.get(p.update.profile_id, ())]
        for p in pending:
            if p.dedup in logs.get(p.update.profile_id, ()):
                p.batch.result.dropped += 1
    if not fresh:
        return []
    store.insert_log(fresh)
    for p in fresh:
        p.batch.result.keys.append(p.dedup)

    by_profile: dict[str, list[Entry]] = defaultdict(list)
    for p in fresh:
        by_profile[p.update.profile_id].append(p.entry)
    refused: dict[int, str] = {}
    new_states: dict[str, ProfileState] = {}
    for profile_id, entries in by_profile.items():
        if len(entries) > 1:
            entries.sort(key=_position)
        state = states.get(profile_id)
        if state is None:
            state = ProfileState()
        elif state.behind or entries[0].position <= state.position:  # a suspect: its log was read
            state, verdict = replay([*logs.get(profile_id, {}).values(), *entries])
            refused.update(verdict.refused)  # refusals of logged updates are not reported again
            new_states[profile_id] = state
            continue
        refused.update(advance(state, entries).refused)
        new_states[profile_id] = state
    texts = store.insert_states(new_states, fresh[-1].entry.seq, now_ms)
    if refused:
        by_seq = {p.entry.seq: p for p in fresh}
        for seq, reason in refused.items():
            found = by_seq.get(seq)
            if found is not None:
                found.batch.result.refused[found.at] = reason
    return [
        (profile_id, (text, s.last_time, s.last_seq, s.seen_seq))
        for (profile_id, s), text in zip(new_states.items(), texts, strict=True)
    ]


def _commit(warehouse: Warehouse, batches: list[_Batch]) -> None:
    """Log and apply the batches as one, in their order; fill in each one's `result`."""
    chosen: list[tuple[_Batch, range | list[int]]] = [(batches[0], range(len(batches[0].dedups)))]
    seen = set(batches[0].dedups)  # a batch holds no duplicates of its own (`_prepare`)
    for batch in batches[1:]:
        kept: list[int] = []
        for k, dedup in enumerate(batch.dedups):
            if dedup in seen:  # a duplicate of an earlier batch's update in this commit
                batch.result.dropped += 1
                continue
            seen.add(dedup)
            kept.append(k)
        chosen.append((batch, kept))
    seq = SEQ.take(sum(len(ks) for _, ks in chosen))
    groups: dict[tuple[int, str], list[_Pending]] = defaultdict(list)
    for batch, ks in chosen:
        updates, indexes, dedups, places, geos, values = (
            batch.updates,
            batch.indexes,
            batch.dedups,
            batch.places,
            batch.geos,
            batch.values,
        )
        for k in ks:
            u = updates[k]
            entry = Entry(u.op, u.value, u.time_ms, seq, u.ignore_time, geos[k])
            groups[(u.project_id, u.group_key)].append(
                _Pending(batch, indexes[k], u, dedups[k], entry, places[k], values[k])
            )
            seq += 1
    now_ms = max(b.now_ms for b in batches)
    cache = state_cache(warehouse)
    for (project_id, group_key), members in groups.items():
        _store_profiles(warehouse, project_id, group_key, members, now_ms, cache)


class _GroupCommit:
    """Commits take turns under one lock; whoever holds it commits every batch waiting for the
    same warehouse and locator (oldest first, up to `_GROUP_MAX` updates), so the batches
    that queued behind one commit share the next. A failed commit fails all its batches."""

    def __init__(self) -> None:
        self._turn = threading.Lock()
        self._waiting_lock = threading.Lock()
        self._waiting: list[_Batch] = []

    def _take(self, batch: _Batch) -> list[_Batch]:
        with self._waiting_lock:
            taken: list[_Batch] = []
            rest: list[_Batch] = []
            size = 0
            for other in self._waiting:
                same = other.warehouse is batch.warehouse and other.locator is batch.locator
                if same and (not taken or size + len(other.updates) <= _GROUP_MAX):
                    taken.append(other)
                    size += len(other.updates)
                else:
                    rest.append(other)
            self._waiting = rest
            return taken

    def store(self, batch: _Batch) -> Stored:
        with self._waiting_lock:
            self._waiting.append(batch)
        while True:  # until a commit (this call's or another's) has taken this batch
            with self._turn:
                if batch.done:
                    break
                group = self._take(batch)
                try:
                    _commit(batch.warehouse, group)
                except BaseException as exc:
                    for b in group:
                        b.error = exc
                finally:
                    for b in group:
                        b.done = True
        if batch.error is not None:
            raise batch.error
        return batch.result


_GROUP_COMMIT = _GroupCommit()


def store_updates(
    warehouse: Warehouse, locator: Locator, updates: Sequence[ProfileUpdate], ingested_at_ms: int | None = None
) -> Stored:
    """Log and apply a batch of updates (blocking: run it in the warehouse's thread pool);
    `Stored.refused` holds the updates the engine refused (index → reason)."""
    now_ms = ingested_at_ms if ingested_at_ms is not None else int(time.time() * 1000)
    batch = _prepare(warehouse, locator, updates, now_ms)
    if not batch.updates:
        return batch.result
    return _GROUP_COMMIT.store(batch)
