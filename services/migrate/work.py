"""The CPU-bound half of an Amplitude chunk, run in worker processes: a block of NDJSON lines →
mapped, validated events and the block's profile candidates, as one compact `marshal` blob.

The job's process stages the download, inflates it (bounded, `download.amplitude_blocks`) and
cuts it into line-aligned blocks of a few MiB; `amplitude_block` (pure, picklable, top-level)
does the rest: JSON decoding, the §14.4 mapping, the one validator (`EVENTS.validate`, strict,
the same call as `/import`), the step-6 retry without the copied user properties, and the
§14.5 profile candidate per user. What crosses back is plain data (tuples, dicts, strings,
numbers): `marshal` is the cheapest codec for it, and the job's process only rebuilds `Event`s
and publishes them — or, for a store that inserts rows, the events' table rows already encoded
as Native blocks, which nobody opens before the warehouse. With `workers = 0` the same function
runs in a thread of the job's process.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import marshal
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from footfall.services.migrate.download import MAX_LINE
from footfall.services.migrate.mapping import AmplitudeEvent, Malformed, amplitude_event, profile_update, truncated
from footfall.shared.config import ImportLimits
from footfall.shared.events import Event, fast_import
from footfall.shared.events.fast_import import FastImport, FastRows
from footfall.shared.streams import EVENTS, Intake, Locator
from footfall.shared.streams.events import build_event_rows
from footfall.shared.streams.stream import PackedRows

__all__ = ["Block", "BlockSpec", "amplitude_block", "decode_block", "watch_parent"]

_MARKER_SLACK = 4096  # what mapping may add to a source line: markers, renamed keys, a hashed $insert_id
_TIME = struct.Struct(">Q")
_OFFSET = 1 << 63
_IDENTITY_FIELDS = frozenset({"event", "properties.time", "properties.distinct_id", "properties.$insert_id"})


@dataclass(frozen=True)
class BlockSpec:
    """What a worker needs besides the block (picklable)."""

    job_id: str
    project_id: int
    limits: ImportLimits
    now_ms: int
    # With `open_locator` (a top-level function, pickled by name) the worker builds the events'
    # table rows (`build_event_rows`, addresses located in `geoip_db`) for a store that inserts
    # rows (the embedded one); without, the events cross as events.
    open_locator: Callable[[str], Locator] | None = None
    geoip_db: str = ""
    # Rows built by the `/import` fast path (`footfall.shared.events.fast_import`) when every
    # event of the block is plain and valid, and the extension is installed; with the values of
    # the store's hot columns `hot` ((property, column) pairs) when it can write them all.
    fast_path: bool = True
    hot: tuple[tuple[str, str], ...] = ()


@dataclass
class Block:
    """A block's outcome, rebuilt in the job's process."""

    read: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    first_ms: int | None = None
    last_ms: int | None = None
    valid: int = 0  # events that passed validation (`events` holds them, or `rows` their rows)
    rows: bytes | None = None  # the events' table rows, packed (`PackedRows.pack`)
    row_count: int = 0  # how many (in-block duplicates are one row)
    columns: tuple[str, ...] | None = None  # the rows' columns when more than the table's (hot ones)
    # uid -> `profile_candidate` of the latest record of each user in the block (§14.5; on a
    # tie the later line); the chunk keeps the latest over its blocks.
    profiles: dict[str, bytes] = field(default_factory=dict)


def profile_candidate(time_ms: int, values: dict[str, Any]) -> bytes:
    """What a user's latest record `$set`s on its profile, with the record's time in front (8
    bytes, offset to unsigned and big-endian, so that the prefixes of two candidates compare as
    their times). One bytes object rather than a tuple: the job keeps one per user for a whole
    chunk, and bytes are not tracked by the cyclic collector."""
    return _TIME.pack(time_ms + _OFFSET) + marshal.dumps(values)


def candidate_update(uid: str, candidate: bytes) -> dict[str, Any]:
    """The §14.5 `/engage` update of a user's winning candidate."""
    (stamp,) = _TIME.unpack_from(candidate)
    values = marshal.loads(memoryview(candidate)[_TIME.size :])  # noqa: S302 - our workers' output
    return profile_update(uid, stamp - _OFFSET, values)


def validate(items: list[Any], spec: BlockSpec, longest: int) -> tuple[list[Event], list[Any]]:
    """The one validator, strict. An event is its source line plus a few markers, so when the
    longest line is far under the event size limit the per-event size check is skipped (the
    validator does so for small bodies)."""
    limit = spec.limits.max_event_bytes
    body_bytes = longest + _MARKER_SLACK if longest + _MARKER_SLACK < limit else limit
    return EVENTS.validate(items, Intake(spec.project_id, True, spec.limits, spec.now_ms, body_bytes))


def map_lines(lines: list[bytes], spec: BlockSpec) -> Block:
    """Source lines → a `Block` (events validated, invalid lines counted by reason)."""
    out, mapped = map_records(lines, spec)
    validate_mapped(out, mapped, spec, max(map(len, lines), default=0))
    return out


def map_records(lines: list[bytes], spec: BlockSpec) -> tuple[Block, list[AmplitudeEvent]]:
    """Source lines → their events (not validated yet) and a `Block` holding the lines that did
    not map (by reason) and the profile candidates."""
    out = Block(read=len(lines))
    invalid = out.invalid
    mapped: list[AmplitudeEvent] = []
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    job_id = spec.job_id
    for line in lines:
        try:
            record = orjson.loads(line)
            event = amplitude_event(record, job_id)
        except orjson.JSONDecodeError:
            invalid["malformed"] = invalid.get("malformed", 0) + 1
            continue
        except Malformed as exc:
            invalid[exc.reason] = invalid.get(exc.reason, 0) + 1
            continue
        mapped.append(event)
        uid = event.uid
        if uid and event.profile is not None:
            seen = latest.get(uid)
            if seen is None or event.time_ms >= seen[0]:  # a later line wins a tie
                latest[uid] = (event.time_ms, event.profile)
    out.profiles = {uid: profile_candidate(t, values) for uid, (t, values) in latest.items()}
    return out, mapped


def validate_mapped(out: Block, mapped: list[AmplitudeEvent], spec: BlockSpec, longest: int) -> None:
    """The one validator over mapped events, the retry without copied user properties, the
    failures counted by field: `out.events` and `out.valid` set."""
    invalid = out.invalid
    events, failures = validate([m.item for m in mapped], spec, longest)
    retry = [f for f in failures if mapped[f.index].user_keys and f.field not in _IDENTITY_FIELDS]
    failed_again: list[Any] = []
    if retry:
        again, failed_again = validate([truncated(mapped[f.index]) for f in retry], spec, longest)
        events += again
    for f in [f for f in failures if f not in retry] + failed_again:
        reason = f.field or f.reason
        invalid[reason] = invalid.get(reason, 0) + 1
    out.events = events
    out.valid = len(events)
    if events:
        times = [e.time_ms for e in events]
        out.first_ms, out.last_ms = min(times), max(times)


@functools.lru_cache(maxsize=4)
def _fast_import(limits: ImportLimits, geo: bool, hot: tuple[tuple[str, str], ...]) -> FastImport:
    # a block holds more events than a request may (its size is bounded by the block's bytes)
    return FastImport(dataclasses.replace(limits, max_events_per_request=1 << 30), geo=geo, hot_columns=lambda: hot)


def fast_rows(out: Block, mapped: list[AmplitudeEvent], spec: BlockSpec) -> FastRows | None:
    """The block's rows by the `/import` fast path when every mapped event is plain and valid
    (then the Python validator would accept each one unchanged: the fast path's tests hold it to
    that), setting `out.valid` and the time range; None otherwise (nothing set)."""
    if not (spec.fast_path and mapped and fast_import.available()):
        return None
    body = orjson.dumps([m.item for m in mapped])
    rows = _fast_import(spec.limits, bool(spec.geoip_db), spec.hot).rows(
        body, project_id=spec.project_id, now_ms=spec.now_ms, ingested_at_ms=int(time.time() * 1000)
    )
    if rows is not None:
        out.valid = rows.items
        times = [m.time_ms for m in mapped]  # = the validated times (milliseconds after 1971)
        out.first_ms, out.last_ms = min(times), max(times)
    return rows


def watch_parent(parent: int) -> None:
    """A worker's initializer: exit once the job's process is gone. A worker holds both ends of
    its queues' pipes, so it would never see them close after a SIGKILL of its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def split_lines(block: bytes) -> list[bytes]:
    """The lines of a line-aligned block, as `download.ndjson_lines` reads them: blank lines
    skipped, an oversized line (`MAX_LINE` bytes or more without its end) one bad line."""
    lines = []
    for line in block.split(b"\n"):
        if len(line) >= MAX_LINE:
            lines.append(b"\x00")
        elif line and not line.isspace():
            lines.append(line)
    return lines


@functools.lru_cache(maxsize=2)
def _locator(open_locator: Callable[[str], Locator], geoip_db: str) -> Locator:
    return open_locator(geoip_db)  # once per worker process


def amplitude_block(block: bytes, spec: BlockSpec) -> bytes:
    """Worker side: a block of NDJSON lines → the marshalled outcome (`decode_block` reads
    it): with `spec.open_locator` the events' table rows (Native blocks) and their count, else
    the events. Everything built here is plain data without cycles, so the cyclic collector
    (which the block's many new containers would trigger over and over) is paused meanwhile."""
    paused = gc.isenabled()
    gc.disable()
    try:
        lines = split_lines(block)
        out, mapped = map_records(lines, spec)
        fast = fast_rows(out, mapped, spec) if spec.open_locator is not None else None
        if fast is None:
            validate_mapped(out, mapped, spec, max(map(len, lines), default=0))
        payload: Any
        if fast is not None:
            columns = fast.columns if fast.columns != EVENTS.table.column_names else None
            payload = (fast.block, fast.rows, columns)  # inserted as they are
        elif spec.open_locator is not None:
            locator = _locator(spec.open_locator, spec.geoip_db)
            built, _dropped = build_event_rows(out.events, locator, int(time.time() * 1000))
            payload = (PackedRows.pack(EVENTS.table, built), len(built), None)  # inserted as they are
        else:
            payload = ([(e.event, e.time_ms, e.distinct_id, e.insert_id, e.properties, e.ip) for e in out.events],)
        head = (out.read, out.invalid, out.first_ms, out.last_ms, out.valid, out.profiles)
        return marshal.dumps((*head, payload))
    finally:
        if paused:
            gc.enable()


def decode_block(blob: bytes, project_id: int) -> Block:
    """The job's side: the `Block` of a worker's blob. It is plain data without cycles, so the
    cyclic collector, which the many new containers would otherwise trigger over and over
    (scanning the whole heap of the process each time it reaches the oldest generation), is
    paused while it is built."""
    paused = gc.isenabled()
    gc.disable()
    try:
        read, invalid, first_ms, last_ms, valid, profiles, payload = marshal.loads(blob)  # noqa: S302 - our workers' output
        if isinstance(payload[0], bytes):
            rows, count, columns = payload
            return Block(read, invalid, [], first_ms, last_ms, valid, rows, count, columns, profiles)
        events = [Event(project_id, *e) for e in payload[0]]
        return Block(read, invalid, events, first_ms, last_ms, valid, None, 0, None, profiles)
    finally:
        if paused:
            gc.enable()
