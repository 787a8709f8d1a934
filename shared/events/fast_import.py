"""The `/import` fast path: a request body → Native rows of the `events` table, in Rust, off the GIL.

Issue 17: with the Python path (`validate.py`, then `streams/events.py`) about 30 µs of every
event's CPU is Python — decoding, validating, dedup keys, rows — which runs on one core at a
time whatever the engine does. The extension (`fastpath/`, built by `setup.py` where a Rust
toolchain exists) does all of it for a JSON array whose every event is plain and valid: no
error, nothing to truncate, a valid `$insert_id`, no address to locate. For any other body it
answers None and the caller takes the Python path, which reports errors, truncates and derives
ids exactly as before: the fast path never decides anything the Python path would decide
differently, it only declines. The tests hold the two to the same rows, byte for byte.

Without the extension (`available()` false) every request takes the Python path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import RESERVED_IDS
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.schema.catalog import Table

try:
    from footfall.shared.events import _fastpath
except ImportError:  # installed without a Rust toolchain
    _fastpath = None  # type: ignore[assignment]

__all__ = ["FastImport", "FastRows", "available"]

KEY_BYTES = 16


def available() -> bool:
    return _fastpath is not None


@dataclass(frozen=True, slots=True)
class FastRows:
    """One request's events as one Native block of the events table (duplicates inside the
    request already dropped, the last copy winning in the first one's place)."""

    block: bytes
    keys: bytes  # the stored rows' dedup keys, 16 bytes each, in row order
    items: int  # events in the request
    rows: int  # rows in the block (items minus in-request duplicates)
    columns: tuple[str, ...]  # the block's: the table's, then the hot columns it fills, if any

    @property
    def dropped(self) -> int:
        return self.items - self.rows

    def key_set(self) -> set[bytes]:
        keys = self.keys
        return {keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)}


def _native_type(type_name: str) -> str:
    """The type a column is sent as: LowCardinality columns go as their plain type, which the
    engine converts on insert (the extension writes no dictionaries)."""
    if type_name.startswith("LowCardinality(") and type_name.endswith(")"):
        return type_name[len("LowCardinality(") : -1]
    return type_name


def _no_hot_columns() -> Sequence[tuple[str, str]]:
    return ()


class FastImport:
    """`rows(...)` for the events table of this process's catalog. `geo`: the locator finds
    places, so events carrying an `ip` are left to the Python path, which enriches them.

    `hot_columns` names the hot property columns in use, (property, column) pairs
    (`footfall.shared.schema.hot.in_use_columns`). Their values are `JSONExtractRaw(properties,
    property)`, which the engine computes on every insert, one JSON parse per column and row
    (about a fifth of the insert's CPU with the nine default ones); the extension writes them
    into the block itself when every one of a request's values is of a kind whose text it
    writes exactly as the engine's function does (printable ASCII text, integers, booleans,
    null, and arrays and objects of those — not floats, which the engine writes its own way),
    and otherwise leaves them to the engine. A hot column it does not know about is computed
    by the engine too."""

    def __init__(
        self,
        limits: ImportLimits,
        *,
        geo: bool,
        table: Table = EVENTS_TABLE,
        hot_columns: Callable[[], Sequence[tuple[str, str]]] = _no_hot_columns,
    ) -> None:
        if _fastpath is None:
            raise RuntimeError("the fast path's extension is not installed")
        self._import_rows = _fastpath.import_rows
        self.table = table
        self.geo = geo
        self.hot_columns = hot_columns
        self._columns = [(c.name, _native_type(c.type)) for c in table.columns]
        self._limits = (
            limits.max_events_per_request,
            limits.max_event_bytes,
            limits.max_properties,
            limits.max_nested_keys,
            limits.max_depth,
            limits.max_array_len,
            limits.max_string_len,
            limits.max_future_seconds,
        )
        self._reserved_ids = sorted(RESERVED_IDS)

    def rows(self, body: bytes, *, project_id: int, now_ms: int, ingested_at_ms: int) -> FastRows | None:
        """The rows of `body` (decompressed: a JSON array of events), or None when any event
        needs the Python path. Blocking, without the GIL: run it in a thread."""
        hot = list(self.hot_columns())
        built = self._import_rows(
            body,
            self._columns,
            project_id,
            now_ms,
            ingested_at_ms,
            len(body),
            self.geo,
            self._limits,
            self._reserved_ids,
            hot,
        )
        if built is None:
            return None
        block, keys, items, rows, hot_given = built
        columns = self.table.column_names
        if hot_given:
            columns = (*columns, *(column for _, column in hot))
        return FastRows(block, keys, items, rows, tuple(columns))
