"""Blocks (what the mapping workers get) hold exactly the lines that reading line by line gives:
across block ends, members, blank lines, a last line without its end and oversized lines
(at, just under and past `MAX_LINE`, inside a block and across its end)."""

from __future__ import annotations

import gzip
import io
import random
import zipfile

import orjson
import pytest

from footfall.services.migrate.download import MAX_LINE, amplitude_blocks, amplitude_lines
from footfall.services.migrate.work import split_lines


def export(members: dict[str, bytes]) -> io.BytesIO:
    file = io.BytesIO()
    with zipfile.ZipFile(file, "w") as archive:
        for name, body in members.items():
            archive.writestr(name, gzip.compress(body, 1) if name.endswith(".gz") else body)
    file.seek(0)
    return file


def body(rng: random.Random, lines: int) -> bytes:
    sizes = [MAX_LINE - 2, MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, 2 * MAX_LINE + 5]
    parts = []
    for i in range(lines):
        roll = rng.random()
        if roll < 0.05:
            parts.append(b"x" * rng.choice(sizes))  # near and past the bound
        elif roll < 0.1:
            parts.append(rng.choice([b"", b"  ", b"\r", b"\t "]))  # blank
        else:
            parts.append(b'{"event_type": "e%d", "pad": "%s"}' % (i, b"y" * rng.randrange(0, 300)))
    text = b"\n".join(parts)
    return text if rng.random() < 0.5 else text + b"\n"


@pytest.mark.parametrize("size", [1, 97, 4096, MAX_LINE + 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_blocks_hold_the_same_lines_as_reading_line_by_line(size: int, seed: int) -> None:
    rng = random.Random(seed)
    members = {f"1/1_2026-10-01_{h}#0.json.gz": body(rng, rng.randrange(0, 120)) for h in range(3)}
    members["1/1_2026-10-01_9#0.json"] = body(rng, 40)
    members["1/readme.txt"] = b"not a member"
    expected = [
        b"\x00" if line == b"\x00" else line.removesuffix(b"\n")
        for line in amplitude_lines(export(members), max_bytes=2**40, max_ratio=10**6)
    ]
    blocks = list(amplitude_blocks(export(members), max_bytes=2**40, max_ratio=10**6, size=size))
    got = [line for block in blocks for line in split_lines(block)]
    assert got == expected
    assert sum(1 for line in got if line == b"\x00") > 0  # the oversized lines were there
    assert all(len(block) < size + 2 * MAX_LINE for block in blocks)  # bounded by the block size


def test_a_corrupt_member_is_an_unreadable_answer() -> None:
    """A member whose deflate stream is damaged (its gzip header intact) fails as an OSError, which
    the runner reports as an unreadable source answer, as it does a bad header or a cut body."""
    packed = gzip.compress(b'{"event_type": "a"}\n' * 20_000, 1)
    damaged = packed[:30] + bytes(b ^ 0x5A for b in packed[30:60]) + packed[60:]
    file = io.BytesIO()
    with zipfile.ZipFile(file, "w") as archive:
        archive.writestr("1/a_2026-10-01_0#0.json.gz", damaged)
    file.seek(0)
    with pytest.raises(OSError, match="not valid gzip"):
        list(amplitude_blocks(file, max_bytes=1 << 30, max_ratio=10**6))


def test_a_member_inflating_past_its_bound_is_refused() -> None:
    members = {"1/a.json.gz": b"{}\n" * 100_000}
    with pytest.raises(ValueError, match="inflates past"):
        list(amplitude_blocks(export(members), max_bytes=10_000, max_ratio=10**6))


def test_members_are_read_in_upload_order_not_name_order() -> None:
    """Hours in export names are not zero-padded: hour 9 comes before hour 10 (§14.5's ties
    are decided by the later line)."""
    names = [f"187520/187520_2026-10-01_{h}#0.json.gz" for h in (10, 9, 0, 23, 2)] + ["187520_2026-10-02_0#0.json"]
    members = {name: b'{"n": "%s"}\n' % name.encode() for name in names}
    got = [orjson.loads(line)["n"] for line in amplitude_lines(export(members), max_bytes=1 << 30, max_ratio=200)]
    hours = [n for n in got if "10-01" in n]
    assert [int(n.rsplit("_", 1)[1].split("#")[0]) for n in hours] == [0, 2, 9, 10, 23]
    assert got[-1].endswith("2026-10-02_0#0.json")


def test_rows_built_by_a_worker_are_the_rows_the_store_builds() -> None:
    """A worker that builds the events' table rows (for the embedded store) builds exactly what
    the events stream's own store step would build from the events (but the ingestion time)."""
    from datetime import UTC, datetime

    from footfall.services.migrate.work import BlockSpec, amplitude_block, decode_block
    from footfall.services.worker.enrich import open_enricher
    from footfall.shared.config import ImportLimits
    from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
    from footfall.shared.streams.events import build_event_rows
    from footfall.shared.streams.stream import PackedRows
    from tests.integration.migrate.fake_amplitude import Dataset
    from tests.oracle._common import to_ms

    data = Dataset.generate(datetime(2026, 10, 1, tzinfo=UTC), 1, per_day=300)
    records = data.records
    records.append(dict(next(r for r in records if r.get("event_type") and r.get("event_time"))))  # one row
    block = b"".join(orjson.dumps(r) + b"\n" for r in records)
    spec = BlockSpec("job", 7, ImportLimits(), 1_800_000_000_000)  # after the generated days
    as_events = decode_block(amplitude_block(block, spec), 7)
    as_rows = decode_block(amplitude_block(block, BlockSpec(**{**spec.__dict__, "open_locator": open_enricher})), 7)
    assert as_rows.rows is not None and not as_rows.events and as_events.rows is None
    assert as_rows.valid == as_events.valid == len(as_events.events) > 250
    assert (as_rows.read, as_rows.invalid, as_rows.profiles) == (as_events.read, as_events.invalid, as_events.profiles)
    expected, dropped = build_event_rows(as_events.events, open_enricher(""), 0)
    got = PackedRows([as_rows.rows], as_rows.row_count).unpack()  # as the table reads them
    assert dropped == 1 and as_rows.row_count == len(expected) == as_rows.valid - 1
    assert list(got) == list(EVENTS_TABLE.column_names)
    assert got["dedup_hash"] == expected.keys
    for name, want in zip(EVENTS_TABLE.column_names, expected.columns, strict=True):
        if name == "time":
            assert [to_ms(t.replace(tzinfo=UTC)) for t in got[name]] == want
        elif name != "ingested_at":
            assert got[name] == want, name


def test_profile_candidates_compare_as_their_times() -> None:
    from footfall.services.migrate.work import candidate_update, profile_candidate

    times = [-86_400_000, -1, 0, 1, 255, 256, 65_536, 1_790_833_320_779, 2**45]
    for a in times:
        for b in times:
            assert (profile_candidate(a, {"x": a})[:8] >= profile_candidate(b, {})[:8]) == (a >= b)
    for t in (-1, 5, 1_790_833_320_779):
        update = {"$distinct_id": "u", "$set": {"plan": "pro", "n": [1, 2]}, "$time": t, "$ignore_time": True}
        assert candidate_update("u", profile_candidate(t, {"plan": "pro", "n": [1, 2]})) == update


def test_a_block_without_valid_lines_builds_no_rows() -> None:
    """Rows for the embedded store from a block whose every line is refused: no Native block at
    all (an empty one inside a publish's stream would make the engine refuse the insert)."""
    from footfall.services.migrate.work import BlockSpec, amplitude_block, decode_block
    from footfall.services.worker.enrich import open_enricher
    from footfall.shared.config import ImportLimits

    block = b'not json\n{"event_type": ""}\n{"event_type": "a"}\n'  # malformed, no name, no time
    spec = BlockSpec("job", 7, ImportLimits(), 1_800_000_000_000, open_locator=open_enricher)
    done = decode_block(amplitude_block(block, spec), 7)
    assert (done.read, done.valid, done.row_count, done.rows) == (3, 0, 0, b"")
    assert sum(done.invalid.values()) == 3


def test_a_block_of_plain_records_takes_the_fast_path_and_builds_the_python_paths_rows() -> None:
    """With the `/import` fast path's extension, a block whose every mapped event is plain and
    valid is turned into rows by it: the same rows, counts, time range and profile candidates as
    the Python path builds (but the ingestion time)."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from footfall.services.migrate.work import BlockSpec, amplitude_block, decode_block, fast_rows, map_records
    from footfall.services.worker.enrich import open_enricher
    from footfall.shared.config import ImportLimits
    from footfall.shared.streams import EVENTS
    from footfall.shared.streams.stream import PackedRows
    from tests.fastpath import require_extension
    from tests.integration.migrate.fake_amplitude import Dataset

    require_extension()
    spec = BlockSpec("job", 7, ImportLimits(), 1_800_000_000_000, open_locator=open_enricher)
    lines = [orjson.dumps(r) for r in Dataset.generate(datetime(2026, 10, 1, tzinfo=UTC), 1, per_day=300).records]
    taken = []
    for line in lines:
        out, mapped = map_records([line], spec)
        if fast_rows(out, mapped, spec) is not None:
            taken.append(line)
    assert len(taken) > 0.8 * len(lines)  # the generated records are mostly plain
    block = b"\n".join(taken + taken[:5]) + b"\n"  # five records twice: one row each
    fast = decode_block(amplitude_block(block, spec), 7)
    slow = decode_block(amplitude_block(block, replace(spec, fast_path=False)), 7)
    out, mapped = map_records(split_lines(block), spec)
    assert fast_rows(out, mapped, spec) is not None  # the whole block went the fast way
    head = ("read", "invalid", "valid", "first_ms", "last_ms", "profiles", "row_count")
    assert [getattr(fast, a) for a in head] == [getattr(slow, a) for a in head]
    assert fast.row_count == len(taken) and fast.valid == len(taken) + 5
    assert fast.rows is not None and slow.rows is not None
    fast_rows_, slow_rows_ = (PackedRows([b.rows], b.row_count).unpack() for b in (fast, slow))  # type: ignore[list-item]
    assert {k: v for k, v in fast_rows_.items() if k != "ingested_at"} == {
        k: v for k, v in slow_rows_.items() if k != "ingested_at"
    }

    # With the store's hot columns named, the fast block carries their values too (the store's
    # engine then need not compute them), and the same rows otherwise.
    props = orjson.loads(fast_rows_["properties"][0])
    names = [k for k, v in props.items() if isinstance(v, str) and v.isascii() and v.isprintable()][:2]
    pairs = ((names[0], "hp_a"), (names[1], "hp_b"), ("absent", "hp_c"))
    hot = decode_block(amplitude_block(block, replace(spec, hot=pairs)), 7)
    assert hot.columns == (*EVENTS.table.column_names, "hp_a", "hp_b", "hp_c")
    hot_rows = PackedRows([hot.rows], hot.row_count).unpack()  # type: ignore[list-item]
    assert {k: v for k, v in hot_rows.items() if k not in ("ingested_at", "hp_a", "hp_b", "hp_c")} == {
        k: v for k, v in fast_rows_.items() if k != "ingested_at"
    }
    for text, a, b, c in zip(hot_rows["properties"], hot_rows["hp_a"], hot_rows["hp_b"], hot_rows["hp_c"], strict=True):
        row = orjson.loads(text)
        want = [orjson.dumps(row[n]).decode() if n in row else "" for n in (*names, "absent")]
        assert [a, b, c] == want
    assert slow.columns is None and fast.columns is None  # no hot columns named: the table's
