"""The profile engine's limits: what an operation computes is checked when it applies; values
an operation leaves as sent were checked by the validator and only count towards the
property limit."""

from footfall.shared.profiles.apply import Entry, ProfileState, advance

T = 1_767_225_600_000


def applied(*ops: tuple[str, object]) -> tuple[ProfileState, dict[int, str]]:
    state = ProfileState()
    refused: dict[int, str] = {}
    for seq, (op, value) in enumerate(ops, start=1):
        refused.update(advance(state, [Entry(op, value, T + seq, seq, True)]).refused)
    return state, refused


def test_a_union_that_grows_a_list_past_the_array_limit_is_refused() -> None:
    state, refused = applied(("$set", {"l": list(range(254))}), ("$union", {"l": [1000]}))
    assert refused == {2: "limit"}
    assert state.properties == {"l": list(range(254))}


def test_an_add_beyond_64_bits_is_refused() -> None:
    state, refused = applied(("$set", {"n": 2**64 - 1}), ("$add", {"n": 1}))
    assert refused == {2: "limit"}
    assert state.properties == {"n": 2**64 - 1}


def test_an_append_that_nests_too_deep_is_refused() -> None:
    state, refused = applied(("$append", {"l": [[1]]}))
    assert refused == {1: "limit"}
    assert state.properties is None


def test_set_counts_towards_the_property_limit() -> None:
    many = {f"k{i}": i for i in range(254)}
    state, refused = applied(("$set", many), ("$set", {"one-more": 1}), ("$set_once", {"again": 1}))
    assert refused == {2: "limit", 3: "limit"}
    assert state.properties == many
