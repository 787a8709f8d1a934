"""Storing a batch of profile (or group) updates: the log insert, then the materialised state.

`store_updates` is the store step of the profile and group streams (the worker and the
embedded path both run it through `store_batch`). Per batch:

1. drop in-batch duplicates (the first arrival is kept) and give every update its arrival
   `seq` (`SeqClock`: increasing within the process, from the wall clock in 1/10,000 ms);
2. per project and group key, one query reads the current states (`profiles` FINAL) and
   the newest logged arrival of each profile (`profile_heads`): a state behind its log (a
   crash between the log and the state insert) is noticed there;
3. the updates no newer than their profile's newest applied `$time` (only those can be
   replays: a replay has its original's `$time`), and the updates of profiles behind their
   log, are checked against the log; replays are dropped, the rest inserted into
   `profile_updates`;
4. a profile whose new updates are all newer than everything its state has seen advances in
   place; any other profile is replayed from its whole log;
5. the new states are inserted (one row per profile; the highest `version` wins).

Updates of one profile are serialised: in a worker a profile's updates come from one
partition, and `store_updates` holds a process-wide lock (the embedded path stores
concurrent requests). Every read goes through the SQL layer's project-scoped sources; the
id lists travel as one JSON string parameter (binding thousands of separate values costs
more in the client than the query in the engine), and `profile_id IN (…)` under a fixed
`group_key` is a prefix of every profile table's sorting key.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from footfall.shared.ingest import Locator, Place, Stored
from footfall.shared.profiles.apply import Entry, ProfileState, advance, replay
from footfall.shared.profiles.updates import ProfileUpdate, update_dedup_key
from footfall.shared.schema.catalog import PROFILE_HEADS, PROFILE_UPDATES, PROFILES
from footfall.shared.sql import Params, Scope, Sql, render, source, sql
from footfall.shared.warehouse import Warehouse

__all__ = ["SEQ", "SeqClock", "store_updates"]

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
    place: Place


def _geo(place: Place) -> tuple[tuple[str, str], ...]:
    if not (place.city or place.region or place.country_code):
        return ()
    found = (("$city", place.city), ("$region", place.region), ("mp_country_code", place.country_code))
    return tuple((name, value) for name, value in found if value)


def _ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


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
        a newer arrival than the state includes (`profile_heads`)."""
        b = Params()
        profiles = self._ids(ids, b)  # bound once, read by both scans
        text = sql(
            "SELECT profile_id, properties, deleted, last_time, last_seq, seen_seq, 0 AS head FROM {} "
            "UNION ALL SELECT profile_id, '', 0, toDateTime64(0, 3, 'UTC'), 0, 0, max(max_seq) FROM {} "
            "GROUP BY profile_id",
            source(PROFILES, self.scope, b, final=True, keys=profiles),
            source(PROFILE_HEADS, self.scope, b, keys=profiles),
        )
        found: dict[str, ProfileState] = {}
        heads: dict[str, int] = {}
        for profile_id, properties, deleted, last_time, last_seq, seen_seq, head in self.warehouse.query(
            render(text), b.values
        ):
            if head:
                heads[profile_id] = int(head)
                continue
            props = None if deleted else orjson.loads(properties)
            found[profile_id] = ProfileState(props, _ms(last_time), int(last_seq), int(seen_seq))
        for profile_id, head in heads.items():
            state = found.setdefault(profile_id, ProfileState())
            state.behind = head > state.seen_seq
        return found

    def logged(self, ids: Sequence[str], hashes: Sequence[bytes]) -> set[bytes]:
        """Which of `hashes` (updates of the profiles `ids`) are in the log already."""
        b = Params()
        keys = sql("{} AND hex(dedup_hash) IN {}", self._ids(ids, b), _json_list([h.hex().upper() for h in hashes], b))
        text = sql("SELECT DISTINCT hex(dedup_hash) FROM {}", source(PROFILE_UPDATES, self.scope, b, keys=keys))
        return {bytes.fromhex(row[0]) for row in self.warehouse.query(render(text), b.values)}

    def logs(self, ids: Sequence[str]) -> dict[str, list[Entry]]:
        """Every logged update of the profiles, one per dedup hash (its first arrival)."""
        b = Params()
        text = sql(
            "SELECT profile_id, op, value, time, seq, ignore_time, city, region, country_code, hex(dedup_hash) FROM {}",
            source(PROFILE_UPDATES, self.scope, b, keys=self._ids(ids, b)),
        )
        first: dict[tuple[str, str], Entry] = {}
        for profile_id, op, value, at, seq, ignore_time, city, region, cc, dedup in self.warehouse.query(
            render(text), b.values
        ):
            entry = Entry(op, orjson.loads(value), _ms(at), int(seq), bool(ignore_time), _geo(Place(city, region, cc)))
            key = (profile_id, dedup)
            if key not in first or entry.seq < first[key].seq:
                first[key] = entry
        logs: dict[str, list[Entry]] = defaultdict(list)
        for (profile_id, _), entry in first.items():
            logs[profile_id].append(entry)
        return logs

    def insert_log(self, pending: Sequence[_Pending], now_ms: int) -> None:
        updates = [p.update for p in pending]
        entries = [p.entry for p in pending]
        places = [p.place for p in pending]
        columns = {
            "project_id": [u.project_id for u in updates],
            "group_key": [u.group_key for u in updates],
            "profile_id": [u.profile_id for u in updates],
            "time": [e.time_ms for e in entries],
            "seq": [e.seq for e in entries],
            "op": [u.op for u in updates],
            "value": [orjson.dumps(u.value).decode() for u in updates],
            "ignore_time": [int(u.ignore_time) for u in updates],
            "city": [place.city for place in places],
            "region": [place.region for place in places],
            "country_code": [place.country_code for place in places],
            "dedup_hash": [p.dedup for p in pending],
            "first_arrival": [_FIRST_ARRIVAL - e.seq for e in entries],
            "ingested_at": [now_ms] * len(pending),
        }
        self.warehouse.insert(
            PROFILE_UPDATES.name,
            PROFILE_UPDATES.column_names,
            [columns[name] for name in PROFILE_UPDATES.column_names],  # type: ignore[misc]
            column_oriented=True,
        )

    def insert_states(self, states: dict[str, ProfileState], version: int, now_ms: int) -> None:
        rows = [
            [
                self.scope.project_id,
                self.group_key,
                profile_id,
                orjson.dumps(state.properties).decode() if state.properties is not None else "{}",
                int(state.properties is None),
                state.last_time,
                state.last_seq,
                state.seen_seq,
                version,
                now_ms,
            ]
            for profile_id, state in states.items()
        ]
        if rows:
            self.warehouse.insert(PROFILES.name, PROFILES.column_names, rows)


def _suspects(pending: Sequence[_Pending], states: dict[str, ProfileState]) -> list[_Pending]:
    """The updates that may be replays of logged ones: no newer than their profile's newest
    applied `$time` (a replay has its original's), or of a profile behind its log."""
    out = []
    for p in pending:
        state = states.get(p.update.profile_id)
        if state is not None and (state.behind or p.entry.time_ms <= state.last_time):
            out.append(p)
    return out


def _store_profiles(
    warehouse: Warehouse, project_id: int, group_key: str, pending: list[_Pending], now_ms: int
) -> tuple[list[_Pending], dict[int, str]]:
    """Log and apply the updates of one project's profiles of one group key; return those
    logged and the refused ones (batch index → reason)."""
    store = _ProfileStore(warehouse, project_id, group_key)
    states = store.states(sorted({p.update.profile_id for p in pending}))
    suspects = _suspects(pending, states)
    logged: set[bytes] = set()
    if suspects:
        logged = store.logged(sorted({p.update.profile_id for p in suspects}), [p.dedup for p in suspects])
    fresh = [p for p in pending if p.dedup not in logged]
    if not fresh:
        return [], {}
    store.insert_log(fresh, now_ms)

    by_profile: dict[str, list[_Pending]] = defaultdict(list)
    for p in fresh:
        by_profile[p.update.profile_id].append(p)
    refused: dict[int, str] = {}
    index_of = {p.entry.seq: p.index for p in fresh}
    to_replay: list[str] = []
    for profile_id, items in by_profile.items():
        state = states.setdefault(profile_id, ProfileState())
        entries = sorted((p.entry for p in items), key=lambda e: e.position)
        if state.behind or entries[0].position <= state.position:
            to_replay.append(profile_id)
            continue
        for seq, reason in advance(state, entries).refused.items():
            refused[index_of[seq]] = reason
    if to_replay:
        for profile_id, log in store.logs(to_replay).items():
            state, verdict = replay(log)
            states[profile_id] = state
            for seq, reason in verdict.refused.items():
                if seq in index_of:  # report the refusals of this batch's updates only
                    refused[index_of[seq]] = reason
    store.insert_states({k: states[k] for k in by_profile}, max(p.entry.seq for p in fresh), now_ms)
    return fresh, refused


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
        groups: dict[tuple[int, str], list[_Pending]] = defaultdict(list)
        for n, (dedup, i) in enumerate(first_seen.items()):
            u = updates[i]
            place = locator.place(u.ip)
            entry = Entry(u.op, u.value, u.time_ms, first_seq + n, u.ignore_time, _geo(place))
            groups[(u.project_id, u.group_key)].append(_Pending(i, u, dedup, entry, place))
        for (project_id, group_key), pending in groups.items():
            logged, refused = _store_profiles(warehouse, project_id, group_key, pending, now_ms)
            result.keys.extend(p.dedup for p in logged)
            result.dropped += len(pending) - len(logged)
            result.refused.update(refused)
    return result
