"""Blocks (what the mapping workers get) hold exactly the lines that reading line by line gives:
across block ends, members, blank lines, a last line without its end and oversized lines
(at, just under and past `MAX_LINE`, inside a block and across its end)."""

from __future__ import annotations

import gzip
import io
import random
import zipfile

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


def test_a_member_inflating_past_its_bound_is_refused() -> None:
    members = {"1/a.json.gz": b"{}\n" * 100_000}
    with pytest.raises(ValueError, match="inflates past"):
        list(amplitude_blocks(export(members), max_bytes=10_000, max_ratio=10**6))
