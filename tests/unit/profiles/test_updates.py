"""The update-object validator (`footfall.shared.profiles.updates`) against the reference
(`tests/oracle/profiles.py`): the same objects are valid, normalised alike, refused at the
same member; the duplicate identity ignores member order and 1 vs 1.0."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from footfall.shared.config import ImportLimits
from footfall.shared.profiles.updates import ProfileUpdate, UpdateFailure, parse_update, update_dedup_key
from tests.oracle import profiles as oracle

NOW_MS = 1_760_000_000_000
LIMITS = ImportLimits()

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=300),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=12,
)
OPS = ["$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete"]


@st.composite
def update_objects(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {"$token": "tok"}  # tokens are the stream validator's business (tested there)
    if draw(st.integers(0, 9)):
        raw["$distinct_id"] = draw(st.one_of(st.sampled_from(["u1", "null", " Anon ", "", 7, True]), st.text()))
    if draw(st.integers(0, 3)):
        raw["$group_key"] = draw(st.sampled_from(["company", "", 3]))
        raw["$group_id"] = draw(st.sampled_from(["acme", 42, "", None]))
    for op in draw(st.lists(st.sampled_from(OPS), min_size=0, max_size=2, unique=True)):
        if op == "$unset":
            raw[op] = draw(st.one_of(st.lists(st.text(max_size=4), max_size=3), json_values))
        elif op == "$add":
            raw[op] = draw(
                st.one_of(
                    st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.floats()), max_size=3), json_values
                )
            )
        elif op == "$union":
            raw[op] = draw(
                st.one_of(st.dictionaries(st.text(max_size=4), st.lists(json_scalars), max_size=3), json_values)
            )
        else:
            raw[op] = draw(st.one_of(st.dictionaries(st.text(max_size=4), json_values, max_size=3), json_values))
    if draw(st.booleans()):
        raw["$time"] = draw(
            st.one_of(
                st.sampled_from([NOW_MS, NOW_MS // 1000, 1.5e9, NOW_MS + 7_200_000, 1000, True, "x"]),
                st.floats(allow_nan=False),
            )
        )
    if draw(st.booleans()):
        raw["$ignore_time"] = draw(st.sampled_from([True, False, None, 1]))
    if draw(st.booleans()):
        raw["$ip"] = draw(st.sampled_from(["81.2.69.160", "0", None, 5]))
    return raw


def _ours(raw: Any, group: bool) -> ProfileUpdate | UpdateFailure:
    return parse_update(raw, 0, project_id=1, group=group, limits=LIMITS, now_ms=NOW_MS)


def _theirs(raw: Any, group: bool) -> oracle.Update | oracle.Invalid:
    return oracle.parse_update(raw, received_ms=NOW_MS, kind="group" if group else "user", seq=0)


@settings(max_examples=600, deadline=None)
@given(update_objects(), st.booleans())
# found by this test: a huge negative $time made `value * 1000` infinite (an OverflowError, a 500)
@example({"$token": "tok", "$distinct_id": "u1", "$set": {}, "$time": -1.797693134862316e305}, False)
def test_validator_agrees_with_the_reference(raw: dict[str, Any], group: bool) -> None:
    ours, theirs = _ours(raw, group), _theirs(raw, group)
    assert isinstance(ours, ProfileUpdate) == isinstance(theirs, oracle.Update), (raw, ours, theirs)
    if isinstance(ours, ProfileUpdate) and isinstance(theirs, oracle.Update):
        assert (ours.group_key or None, ours.profile_id, ours.op, ours.time_ms, ours.ignore_time) == (
            theirs.group_key,
            theirs.profile_id,
            theirs.op,
            theirs.time_ms,
            theirs.ignore_time,
        )
        if ours.op != "$delete":
            assert ours.value == theirs.value
    elif isinstance(ours, UpdateFailure) and isinstance(theirs, oracle.Invalid):
        assert ours.field == theirs.field, (raw, ours, theirs)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"$set": {"a": 1, "b": 2}}, {"$set": {"b": 2, "a": 1}}, True),
        ({"$set": {"a": 1}}, {"$set": {"a": 1.0}}, True),
        ({"$set": {"a": 1}}, {"$set": {"a": True}}, False),
        ({"$set": {"a": [1, 2]}}, {"$set": {"a": [2, 1]}}, False),
        ({"$set": {"a": 1}, "$ip": "1.2.3.4", "$ignore_time": True}, {"$set": {"a": 1}}, True),
        ({"$set": {"a": 1}, "$time": NOW_MS}, {"$set": {"a": 1}, "$time": NOW_MS - 1}, False),
    ],
    ids=["member-order", "int-float", "bool-is-not-1", "list-order", "flags-and-ip", "time"],
)
def test_duplicate_identity(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    ua = _ours({"$distinct_id": "u", "$time": NOW_MS, **a}, False)
    ub = _ours({"$distinct_id": "u", "$time": NOW_MS, **b}, False)
    assert isinstance(ua, ProfileUpdate) and isinstance(ub, ProfileUpdate)
    assert (update_dedup_key(ua) == update_dedup_key(ub)) is same


def test_failures_name_the_member_and_the_profile() -> None:
    failure = _ours({"$distinct_id": "u9", "$add": {"n": "five"}}, False)
    assert isinstance(failure, UpdateFailure)
    assert failure.as_record() == {
        "index": 0,
        "$distinct_id": "u9",
        "field": "$add.n",
        "message": "$add.n must be a finite number",
    }
    group_add = _ours({"$group_key": "company", "$group_id": "acme", "$add": {"n": 1}}, True)
    assert isinstance(group_add, UpdateFailure) and group_add.field == "$add"
    two = _ours({"$distinct_id": "u", "$set": {}, "$unset": []}, False)
    assert isinstance(two, UpdateFailure) and two.field == "" and "exactly one" in two.message


def test_an_update_pickles_as_itself() -> None:
    """Updates cross from serve's migration job process to serve pickled (as their fields)."""
    import pickle

    for update in (
        ProfileUpdate(1, "", "u1", "$set", {"plan": "pro", "n": [1, 2]}, 5),
        ProfileUpdate(7, "company", "acme", "$unset", ["x"], 9, True, "10.0.0.1"),
    ):
        again = pickle.loads(pickle.dumps(update))  # noqa: S301 - our own bytes
        assert again == update and type(again) is ProfileUpdate and again.is_group == update.is_group
