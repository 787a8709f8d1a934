"""`Packed`: fixed-width values read from their concatenation as a sequence of bytes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from footfall.shared.events.fast_import import Packed


@given(st.integers(1, 5).flatmap(lambda w: st.tuples(st.just(w), st.lists(st.binary(min_size=w, max_size=w)))))
def test_reads_like_the_list_of_its_values(case: tuple[int, list[bytes]]) -> None:
    width, values = case
    packed = Packed(b"".join(values), width)
    assert isinstance(packed, Sequence) and len(packed) == len(values)
    assert list(packed) == values and packed == values
    for i in range(-len(values), len(values)):
        assert packed[i] == values[i]
    for start, stop in [(0, 2), (1, None), (-2, None), (3, 1), (None, -1)]:
        part = packed[start:stop]
        assert isinstance(part, Packed) and list(part) == values[start:stop]


def test_refuses_what_is_not_values_of_its_width() -> None:
    with pytest.raises(ValueError):
        Packed(b"abc", 2)
    with pytest.raises(ValueError):
        Packed(b"", 0)
    with pytest.raises(IndexError):
        Packed(b"abcd", 2)[2]
    with pytest.raises(ValueError):
        Packed(b"abcd", 2)[::2]
