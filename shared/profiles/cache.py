"""`StateCache`: exact copies of current profile states, kept by the one process that writes them.

A commit of the profile store (`footfall.shared.profiles.store`) starts by reading the
current state of every profile it touches; in `footfall serve` that process is the only
writer of its store's profiles, so after each commit it knows the state it wrote for each
of them. The cache keeps those (the least recently written is evicted beyond
`max_profiles`, or beyond about `max_bytes` of memory), and a commit reads from the
warehouse only the profiles it does not hold.
The distributed workers never use one: a topic's partitions move between workers, and a
worker's copy would miss what another wrote meanwhile.

It stays exact because:

* it is filled only after a commit's state insert succeeded, with the states inserted (a
  commit that fails forgets every profile it touched, whose state may now be behind its log,
  so the next commit reads them and their log heads from the warehouse);
* it holds each state as the warehouse row does (the properties as JSON text), and a
  commit works on objects built afresh from it (`take`), so a commit that fails half-way
  leaves no half-advanced state behind;
* every other writer of the profile tables (the data deletions of
  `footfall.services.app.data_deletion`) calls `forget_profiles(warehouse)` after it
  changed them, which empties the cache and advances its `epoch`: a commit that read before
  that and finishes after it leaves its states out (`put` checks the epoch it read under).

`complete` says that every profile stored in the warehouse is in the cache, so that a
profile it does not hold has no state and no log: true when the cache starts on a store with
no profile at all (a new `serve`), false for good after the first eviction, failed commit
or `forget_profiles`. While it holds, a commit whose profiles are all new reads nothing.

The cache belongs to one warehouse instance (`use_state_cache`; looked up by `state_cache`),
never to the process: tests and tools open many warehouses.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable

import orjson

from footfall.shared.profiles.apply import ProfileState
from footfall.shared.schema.catalog import PROFILE_HEADS, PROFILE_UPDATES, PROFILES
from footfall.shared.warehouse import Warehouse

__all__ = [
    "DEFAULT_BYTES",
    "DEFAULT_PROFILES",
    "Cached",
    "StateCache",
    "forget_profiles",
    "state_cache",
    "use_state_cache",
]

DEFAULT_PROFILES = 250_000
DEFAULT_BYTES = 256 * 2**20  # whatever the count, big profiles stop it here
_OVERHEAD = 250  # bytes around each state's text: its key, the entry, the ordered dict's node

_Key = tuple[int, str, str]  # project, group key, profile id
# A state as the warehouse row holds it: properties as JSON text (None: deleted), last_time,
# last_seq, seen_seq. Text and integers only: nothing the cyclic garbage collector walks, a
# third of the memory of the objects, and every `take` builds its own objects from it.
Cached = tuple[str | None, int, int, int]


class StateCache:
    """Current states by (project, group key, profile id), least recently written first."""

    def __init__(
        self, max_profiles: int = DEFAULT_PROFILES, *, max_bytes: int = DEFAULT_BYTES, complete: bool = False
    ) -> None:
        if max_profiles <= 0:
            raise ValueError("a state cache holds at least one profile")
        self.max_profiles = max_profiles
        self.max_bytes = max_bytes
        self.complete = complete
        self.epoch = 0
        self._states: OrderedDict[_Key, Cached] = OrderedDict()
        self._bytes = 0  # the states' sizes (`_size`)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def take(
        self, project_id: int, group_key: str, ids: Iterable[str]
    ) -> tuple[dict[str, ProfileState], list[str], int]:
        """Fresh states of the cached `ids` (each its own objects), the ids to read from the
        warehouse, and the epoch to `put` the commit's states under. With `complete`, no id
        needs reading."""
        found: dict[str, ProfileState] = {}
        missing: list[str] = []
        loads = orjson.loads
        with self._lock:
            get = self._states.get
            for profile_id in ids:
                cached = get((project_id, group_key, profile_id))
                if cached is not None:
                    text, last_time, last_seq, seen_seq = cached
                    props = loads(text) if text is not None else None
                    found[profile_id] = ProfileState(props, last_time, last_seq, seen_seq)
                elif not self.complete:
                    missing.append(profile_id)
            return found, missing, self.epoch

    def put(self, project_id: int, group_key: str, states: Iterable[tuple[str, Cached]], epoch: int) -> None:
        """Keep the states a commit has just stored, as `(profile id, (properties as JSON text or
        None when deleted, last_time, last_seq, seen_seq))`, unless the cache was emptied since
        `epoch`."""
        with self._lock:
            if epoch != self.epoch:
                return
            cached = self._states
            size = self._bytes
            for profile_id, entry in states:
                key = (project_id, group_key, profile_id)
                old = cached.get(key)
                if old is not None:
                    size -= _size(old)
                    cached.move_to_end(key)
                cached[key] = entry
                size += _size(entry)
            while len(cached) > self.max_profiles or (size > self.max_bytes and cached):
                self.complete = False
                size -= _size(cached.popitem(last=False)[1])
            self._bytes = size

    def drop(self, project_id: int, group_key: str, ids: Iterable[str]) -> None:
        """Forget `ids` (their commit failed: their stored state may be behind their log)."""
        with self._lock:
            self.complete = False
            for profile_id in ids:
                old = self._states.pop((project_id, group_key, profile_id), None)
                if old is not None:
                    self._bytes -= _size(old)

    def clear(self) -> None:
        """Forget everything; a commit under way keeps nothing it read before."""
        with self._lock:
            self._states.clear()
            self._bytes = 0
            self.complete = False
            self.epoch += 1


def _size(entry: Cached) -> int:
    """About the memory one cached state takes: its JSON text and the objects around it."""
    return len(entry[0] or "") + _OVERHEAD


_CACHES: weakref.WeakKeyDictionary[Warehouse, StateCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _store_has_profiles(warehouse: Warehouse) -> bool:
    """Whether any profile table holds a row (the parts' counts: no tenant row is read)."""
    rows = warehouse.query(
        "SELECT sum(rows) FROM system.parts WHERE active AND database = currentDatabase() "
        "AND table IN {tables:Array(String)}",
        {"tables": [PROFILES.name, PROFILE_UPDATES.name, PROFILE_HEADS.name]},
    )
    return bool(rows and rows[0][0])


def use_state_cache(warehouse: Warehouse, max_profiles: int = DEFAULT_PROFILES) -> StateCache | None:
    """Give `warehouse` a state cache (`max_profiles` 0: none). Only for a process that is
    the one writer of the store's profiles (blocking: call it while the process starts)."""
    with _CACHES_LOCK:
        if max_profiles <= 0:
            _CACHES.pop(warehouse, None)
            return None
        cache = StateCache(max_profiles, complete=not _store_has_profiles(warehouse))
        _CACHES[warehouse] = cache
        return cache


def state_cache(warehouse: Warehouse) -> StateCache | None:
    return _CACHES.get(warehouse)


def forget_profiles(warehouse: Warehouse) -> None:
    """Call after changing the profile tables other than through the store (a deletion)."""
    cache = _CACHES.get(warehouse)
    if cache is not None:
        cache.clear()
