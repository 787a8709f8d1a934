"""The worker's fast path: a batch of consumed event records → Native rows of the `events` table,
in Rust, off the GIL (issue 17: the worker's Python per event — decoding envelopes, dedup keys,
content digests, rows — was the bigger half of why the distributed shape stopped near 21k
events/s on two cores).

`FastRecords.decode(values)` reads every record value of a batch at once and answers None when
any of them is not an envelope that `streams.events.decode_event` takes as it is, or carries an
address to locate (the worker's locator finds places): the Python path then decodes, dead-letters
and enriches exactly as before. Otherwise it gives each record's dedup key and content digest
(for the Redis layer) and, for the records to store, one Native block — duplicates among them
dropped, the last copy winning in the first one's place, as `dedup_rows` does. The tests hold
the block to the Python path's rows, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from footfall.shared.events.fast_import import (
    KEY_BYTES,
    Packed,
    available,
    extension,
    native_columns,
    no_hot_columns,
)
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.schema.catalog import Table

if TYPE_CHECKING:
    from footfall.shared.events._fastpath import Envelopes

__all__ = ["DecodedRecords", "FastRecords", "StoredBlock", "available"]

DIGEST_BYTES = 8


@dataclass(frozen=True, slots=True)
class StoredBlock:
    """The rows to insert: one Native block, with the stored rows' dedup keys and content
    digests (what the Redis layer marks once the insert succeeded)."""

    block: bytes
    keys: Packed
    digests: Packed
    dropped: int  # fresh records left out as earlier copies of a later one
    columns: tuple[str, ...]  # the block's: the table's, then the hot columns it fills, if any

    @property
    def rows(self) -> int:
        return len(self.keys)


class DecodedRecords:
    """A batch's records, decoded: `keys` and `digests` in record order, then `block(fresh)`."""

    def __init__(self, envelopes: Envelopes, table: Table, hot: Sequence[tuple[str, str]]) -> None:
        self._envelopes = envelopes
        self._table = table
        self._hot = hot
        self._columns = native_columns(table)

    def __len__(self) -> int:
        return len(self._envelopes)

    def keys(self) -> Packed:
        return Packed(self._envelopes.keys(), KEY_BYTES)

    def digests(self) -> Packed:
        return Packed(self._envelopes.digests(), DIGEST_BYTES)

    def block(self, fresh: list[int], *, ingested_at_ms: int, hot: bool = True) -> StoredBlock:
        """The rows of the records at `fresh` (ascending indices), with the hot columns' values
        when every record's are known and `hot` (else the engine computes them). Blocking,
        without the GIL."""
        block, keys, digests, rows, hot_given = self._envelopes.block(fresh, self._columns, ingested_at_ms, hot)
        columns = self._table.column_names
        if hot_given:
            columns = (*columns, *(column for _, column in self._hot))
        return StoredBlock(block, Packed(keys, KEY_BYTES), Packed(digests, DIGEST_BYTES), len(fresh) - rows, columns)


class FastRecords:
    """`decode(values)` for the events table of this process's catalog. `geo`: the locator finds
    places, so records carrying an address are left to the Python path, which enriches them.
    `hot_columns`: (property, column) of the hot columns in use, filled as `FastImport` fills
    them (`footfall.shared.schema.hot.in_use_columns`)."""

    def __init__(
        self,
        *,
        geo: bool,
        table: Table = EVENTS_TABLE,
        hot_columns: Callable[[], Sequence[tuple[str, str]]] = no_hot_columns,
    ) -> None:
        self._decode = extension().decode_envelopes
        self.geo = geo
        self.table = table
        self.hot_columns = hot_columns

    def decode(self, values: list[bytes]) -> DecodedRecords | None:
        """Blocking, without the GIL for the parsing: run it in a thread for big batches."""
        hot = list(self.hot_columns())
        envelopes = self._decode(values, self.geo, hot)
        return None if envelopes is None else DecodedRecords(envelopes, self.table, hot)
