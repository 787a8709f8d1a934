"""The `/import` fast path: a request body → Native rows of the `events` table (`serve`) or the
events stream's Kafka records (`footfall gateway`), in Rust, off the GIL.

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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import overload

import structlog

from footfall.shared.config import ImportLimits
from footfall.shared.events.validate import RESERVED_IDS
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.schema.catalog import Table

try:
    from footfall.shared.events import _fastpath
except ImportError:  # installed without a Rust toolchain
    _fastpath = None  # type: ignore[assignment]

__all__ = ["FastEnvelopes", "FastImport", "FastRows", "Packed", "available", "usable"]

KEY_BYTES = 16


class Packed(Sequence[bytes]):
    """Fixed-width values as the extension hands them over, concatenated (dedup keys, content
    digests), read as a sequence without splitting them up front: the Redis layer sends the
    concatenation as it is (`blob`), so a batch's values are never made one object each."""

    __slots__ = ("blob", "width")

    def __init__(self, blob: bytes, width: int) -> None:
        if width < 1 or len(blob) % width:
            raise ValueError(f"{len(blob)} bytes are not values of {width} bytes")
        self.blob = blob
        self.width = width

    def __len__(self) -> int:
        return len(self.blob) // self.width

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Packed: ...

    def __getitem__(self, index: int | slice) -> bytes | Packed:
        w = self.width
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("packed values slice with step 1 only")
            return Packed(self.blob[start * w : max(stop, start) * w], w)
        i = range(len(self))[index]  # IndexError, negative indices
        return self.blob[i * w : (i + 1) * w]

    def __iter__(self) -> Iterator[bytes]:
        blob, w = self.blob, self.width
        return (blob[i : i + w] for i in range(0, len(blob), w))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Packed):
            return self.width == other.width and self.blob == other.blob
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Packed({len(self)} values of {self.width} bytes)"


def available() -> bool:
    return _fastpath is not None


def usable(wanted: bool) -> bool:
    """The fast path is wanted (FOOTFALL_IMPORT_FAST_PATH) and its extension is installed; a
    warning when it is wanted but missing (the package was installed without a Rust toolchain)."""
    if wanted and not available():
        log = structlog.get_logger(__name__)
        log.warning("import_fast_path_unavailable", reason="the Rust extension is not installed")
    return wanted and available()


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
        return set(Packed(self.keys, KEY_BYTES))


@dataclass(frozen=True, slots=True)
class FastEnvelopes:
    """One request's events as the events stream's Kafka records, in order (duplicates kept: the
    workers drop them): partition keys, record values — byte for byte what
    `streams.events.encode_event` writes for the Python path's events — and each key's
    partition hash (positive murmur2, as the Java client's)."""

    keys: list[bytes]
    values: list[bytes]
    hashes: list[int]

    @property
    def items(self) -> int:
        return len(self.values)


def _native_type(type_name: str) -> str:
    """The type a column is sent as: LowCardinality columns go as their plain type, which the
    engine converts on insert (the extension writes no dictionaries)."""
    if type_name.startswith("LowCardinality(") and type_name.endswith(")"):
        return type_name[len("LowCardinality(") : -1]
    return type_name


def native_columns(table: Table) -> list[tuple[str, str]]:
    """(name, type) of `table`'s columns as the extension writes them."""
    return [(c.name, _native_type(c.type)) for c in table.columns]


def no_hot_columns() -> Sequence[tuple[str, str]]:
    return ()


def extension() -> ModuleType:
    """The Rust extension; RuntimeError when the package was installed without it."""
    if _fastpath is None:
        raise RuntimeError("the fast path's extension is not installed")
    return _fastpath


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
        hot_columns: Callable[[], Sequence[tuple[str, str]]] = no_hot_columns,
    ) -> None:
        rust = extension()
        self._import_rows = rust.import_rows
        self._import_envelopes = rust.import_envelopes
        self.table = table
        self.geo = geo
        self.hot_columns = hot_columns
        self._columns = native_columns(table)
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

    def envelopes(self, body: bytes, *, project_id: int, now_ms: int) -> FastEnvelopes | None:
        """The Kafka records of `body`'s events, or None when any event needs the Python path. The
        gateway locates no address (`geo` does not apply): an `ip` travels in the envelope.
        Blocking, without the GIL: run it in a thread."""
        built = self._import_envelopes(body, project_id, now_ms, len(body), self._limits, self._reserved_ids)
        return None if built is None else FastEnvelopes(*built)
