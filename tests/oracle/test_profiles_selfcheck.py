"""Hand-written cases pinning the profile and /engage oracles (profiles.py, engage.py) to the pinned decisions.

Pure: no IO, no markers.
"""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import expr
from .engage import UNCACHED_PAGE_ERROR, EngageError, engage
from .profiles import Invalid, Profile, State, Update, apply, last_seen_text, parse_batch, parse_update

UTC = UTC
P = 7  # project id
T0 = int(datetime(2024, 3, 5, 12, 0, tzinfo=UTC).timestamp() * 1000)
RECEIVED = T0 + 86_400_000
_seq = itertools.count()


def raw(op: str, value: object, *, uid: object = "u1", t: int | None = T0, **extra) -> dict:
    out = {"$token": "tok", "$distinct_id": uid, op: value, **extra}
    if t is not None:
        out["$time"] = t
    return out


def graw(op: str, value: object, *, key: str = "company", gid: object = "acme", t: int | None = T0, **extra) -> dict:
    out = {"$token": "tok", "$group_key": key, "$group_id": gid, op: value, **extra}
    if t is not None:
        out["$time"] = t
    return out


def parsed(
    obj: dict, *, kind: str = "user", seq: int | None = None, received_ms: int = RECEIVED, project_id: int = P
) -> Update:
    out = parse_update(
        obj, received_ms=received_ms, kind=kind, seq=next(_seq) if seq is None else seq, project_id=project_id
    )
    assert isinstance(out, Update), out
    return out


def upd(op: str, value: object, *, t: int = T0, uid: str = "u1", **extra) -> Update:
    return parsed(raw(op, value, uid=uid, t=t, **extra))


def props(state: State, uid: str = "u1", project_id: int = P) -> dict | None:
    profile = state.profiles.get((project_id, None, uid))
    return None if profile is None else profile.properties


def without_last_seen(p: dict | None) -> dict | None:
    return None if p is None else {k: v for k, v in p.items() if k != "$last_seen"}


def at(minutes: float) -> int:
    return T0 + int(minutes * 60_000)


# ------------------------------------------------------------------------------------------ parse_update
def test_parse_valid_user_update_normalises():
    u = parse_update(
        raw("$set", {"a": 1}, uid=42, t=T0 // 1000), received_ms=RECEIVED, kind="user", seq=3, project_id=P
    )
    assert u == Update(3, P, None, "42", "$set", {"a": 1}, T0)
    assert u.key == (P, None, "42")


@pytest.mark.parametrize(
    ("t", "ms"),
    [
        (1_709_640_000, 1_709_640_000_000),
        (1_709_640_000_123, 1_709_640_000_123),
        (1_709_640_000.9876, 1_709_640_000_987),
        (9_999_999_999.5, None),
    ],
    ids=["seconds", "ms", "fraction-truncated", "just-below-1e10-is-seconds-too-far-ahead"],
)
def test_parse_time_seconds_or_ms(t, ms):
    u = parse_update(raw("$set", {}, t=t), received_ms=RECEIVED, kind="user", seq=0)
    if ms is None:
        assert isinstance(u, Invalid) and u.field == "$time"
    else:
        assert isinstance(u, Update) and u.time_ms == ms


def test_parse_missing_or_null_time_is_received_time():
    assert parsed(raw("$set", {}, t=None)).time_ms == RECEIVED
    assert parsed(raw("$set", {}, t=None, **{"$time": None})).time_ms == RECEIVED


def test_parse_truncates_values_not_keys_and_ids():
    long = "x" * 300
    u = parsed(raw("$set", {long: long, "n": {"s": [long]}}, uid="d" * 300))
    assert u.profile_id == "d" * 255
    assert u.value == {long: "x" * 255, "n": {"s": ["x" * 255]}}
    assert parsed(raw("$unset", [long])).value == [long]


def test_parse_flags_ip_and_unknown_members():
    u = parsed(
        raw(
            "$add",
            {"n": 1},
            **{
                "$ignore_time": True,
                "$ignore_alias": True,
                "$ip": "1.2.3.4",
                "$device_id": "d",
                "$user_id": "u",
                "$had_persisted_distinct_id": True,
            },
        )
    )
    assert (u.ignore_time, u.ignore_alias, u.ip) == (True, True, "1.2.3.4")


def test_parse_delete_takes_any_value():
    for value in ("", None, 0, [], {"x": 1}):
        assert parsed(raw("$delete", value)).op == "$delete"


def test_parse_group_update():
    u = parsed(graw("$union", {"tags": ["a"]}, gid=-5, **{"$ignore_alias": True}), kind="group")
    assert u.key == (P, "company", "-5") and u.op == "$union"


def _deep(n: int) -> object:
    value: object = 1
    for _ in range(n):
        value = {"k": value}
    return value


INVALID = [
    ("not-object", ["$set"], "user", "", "malformed"),
    ("token-missing", {"$distinct_id": "u1", "$set": {}}, "user", "$token", "token"),
    ("token-empty", raw("$set", {}, **{"$token": ""}), "user", "$token", "token"),
    ("token-number", raw("$set", {}, **{"$token": 5}), "user", "$token", "token"),
    ("distinct-id-missing", {"$token": "t", "$set": {}}, "user", "$distinct_id", "distinct_id"),
    ("distinct-id-bool", raw("$set", {}, uid=True), "user", "$distinct_id", "distinct_id"),
    ("distinct-id-float", raw("$set", {}, uid=1.5), "user", "$distinct_id", "distinct_id"),
    ("distinct-id-empty", raw("$set", {}, uid=""), "user", "$distinct_id", "distinct_id"),
    ("distinct-id-reserved", raw("$set", {}, uid=" Anonymous "), "user", "$distinct_id", "distinct_id"),
    ("distinct-id-reserved-int", raw("$set", {}, uid=-1), "user", "$distinct_id", "distinct_id"),
    ("distinct-id-bad-utf8", raw("$set", {}, uid="a\udc80"), "user", "$distinct_id", "utf8"),
    ("no-operation", {"$token": "t", "$distinct_id": "u1"}, "user", "", "operation"),
    ("two-operations", {**raw("$set", {}), "$add": {"n": 1}}, "user", "", "operation"),
    ("group-add", graw("$add", {"n": 1}), "group", "$add", "operation"),
    ("group-append", graw("$append", {"l": 1}), "group", "$append", "operation"),
    ("group-key-missing", {"$token": "t", "$group_id": "g", "$set": {}}, "group", "$group_key", "group"),
    ("group-id-missing", {"$token": "t", "$group_key": "k", "$set": {}}, "group", "$group_id", "group"),
    ("group-id-empty", graw("$set", {}, gid=""), "group", "$group_id", "group"),
    ("set-not-object", raw("$set", ["a"]), "user", "$set", "value"),
    ("set-once-null", raw("$set_once", None), "user", "$set_once", "value"),
    ("add-string", raw("$add", {"n": "1"}), "user", "$add.n", "value"),
    ("add-bool", raw("$add", {"n": True}), "user", "$add.n", "value"),
    ("add-nan", raw("$add", {"n": float("nan")}), "user", "$add.n", "value"),
    ("union-not-list", raw("$union", {"l": "a"}), "user", "$union.l", "value"),
    ("append-not-object", raw("$append", 5), "user", "$append", "value"),
    ("remove-not-object", raw("$remove", "x"), "user", "$remove", "value"),
    ("unset-not-list", raw("$unset", "a"), "user", "$unset", "value"),
    ("unset-element-not-string", raw("$unset", ["a", 1]), "user", "$unset[1]", "value"),
    ("unset-too-many", raw("$unset", [str(i) for i in range(255)]), "user", "$unset", "array_len"),
    ("set-255-keys", raw("$set", {str(i): i for i in range(255)}), "user", "$set", "too_many_properties"),
    ("set-nested-255-keys", raw("$set", {"o": {str(i): i for i in range(255)}}), "user", "$set.o", "nested_keys"),
    ("set-array-255", raw("$set", {"l": list(range(255))}), "user", "$set.l", "array_len"),
    ("set-too-deep", raw("$set", {"a": _deep(3)}), "user", "$set.a.k.k.k", "depth"),
    ("set-array-too-deep", raw("$set", {"a": [[[1]]]}), "user", "$set.a[0][0][0]", "depth"),
    ("set-bad-utf8-value", raw("$set", {"s": "\udc80"}), "user", "$set.s", "utf8"),
    ("set-bad-utf8-key", raw("$set", {"o": {"\udc80": 1}}), "user", "$set.o.\udc80", "utf8"),
    ("ip-bad-utf8", raw("$set", {}, **{"$ip": "\udc80"}), "user", "$ip", "ip"),
    ("time-string", raw("$set", {}, t="1709640000"), "user", "$time", "time"),
    ("time-bool", raw("$set", {}, t=True), "user", "$time", "time"),
    ("time-before-1971", raw("$set", {}, t=31_535_999), "user", "$time", "time"),
    ("time-too-far-ahead", raw("$set", {}, t=RECEIVED + 3_600_001), "user", "$time", "time"),
    ("ignore-time-string", raw("$set", {}, **{"$ignore_time": "true"}), "user", "$ignore_time", "flag"),
    ("ignore-alias-int", raw("$set", {}, **{"$ignore_alias": 1}), "user", "$ignore_alias", "flag"),
    ("ip-int", raw("$set", {}, **{"$ip": 5}), "user", "$ip", "ip"),
    ("ip-bool", raw("$set", {}, **{"$ip": False}), "user", "$ip", "ip"),
]


@pytest.mark.parametrize(("obj", "kind", "field", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_parse_invalid(obj, kind, field, reason):
    out = parse_update(obj, received_ms=RECEIVED, kind=kind, seq=11)
    assert isinstance(out, Invalid), out
    assert (out.field, out.reason, out.seq) == (field, reason, 11)
    assert out.message


def test_parse_limits_just_under_are_valid():
    assert parsed(raw("$set", {str(i): i for i in range(254)}))
    assert parsed(raw("$set", {"l": list(range(254)), "a": _deep(2), "e": {"b": {"c": {}}}, "m": [[1], [2]]}))
    assert parsed(raw("$set", {}, t=RECEIVED + 3_600_000)).time_ms == RECEIVED + 3_600_000
    assert parsed(raw("$set", {}, t=31_536_000)).time_ms == 31_536_000_000


def test_parse_batch_numbers_items():
    out = parse_batch(
        [raw("$set", {}), "junk", raw("$add", {"n": 1})], received_ms=RECEIVED, kind="user", first_seq=10, project_id=P
    )
    assert [o.seq for o in out] == [10, 11, 12]
    assert isinstance(out[1], Invalid) and out[1].reason == "malformed"


# ------------------------------------------------------------------------------------------ operations
def test_set_overwrites_and_stores_null():
    s = apply([upd("$set", {"a": 1, "b": "x"}, t=at(0)), upd("$set", {"a": 2, "c": None}, t=at(1))])
    assert props(s) == {"a": 2, "b": "x", "c": None, "$last_seen": last_seen_text(at(1))}


def test_set_once_only_sets_absent_keys_null_counts_as_set():
    s = apply([upd("$set", {"a": 1, "n": None}, t=at(0)), upd("$set_once", {"a": 9, "b": 2, "n": 3}, t=at(1))])
    assert without_last_seen(props(s)) == {"a": 1, "b": 2, "n": None}


def test_add_missing_counts_as_zero_and_sums():
    s = apply(
        [
            upd("$add", {"n": 2, "f": 0.5}, t=at(0)),
            upd("$add", {"n": 3, "f": 1}, t=at(1)),
            upd("$add", {"n": -10}, t=at(2)),
        ]
    )
    p = props(s)
    assert (p["n"], p["f"]) == (-5, 1.5) and isinstance(p["n"], int)


@pytest.mark.parametrize("existing", ["7", True, None, [1], {"a": 1}], ids=["string", "bool", "null", "list", "obj"])
def test_add_onto_non_number_is_a_clash_that_changes_nothing(existing):
    first = upd("$set", {"x": existing, "n": 1}, t=at(0))
    bad = upd("$add", {"n": 5, "x": 1}, t=at(5))
    s = apply([first, bad])
    assert props(s) == {"x": existing, "n": 1, "$last_seen": last_seen_text(at(0))}
    assert s.clashes == [bad.seq]


def test_union_appends_missing_in_order_after_existing():
    s = apply(
        [
            upd("$set", {"l": ["b", "a", "b"]}, t=at(0)),
            upd("$union", {"l": ["c", "a", "d", "c"], "new": [3, 1, 3, 1.0, True]}, t=at(1)),
        ]
    )
    p = props(s)
    assert p["l"] == ["b", "a", "b", "c", "d"]  # existing duplicates kept, missing ones appended once
    assert p["new"] == [3, 1, True]  # deduplicated; 1.0 == 1, True is not 1


def test_union_objects_compare_by_value_not_key_order():
    s = apply([upd("$union", {"l": [{"a": 1, "b": 2}]}, t=at(0)), upd("$union", {"l": [{"b": 2, "a": 1}]}, t=at(1))])
    assert props(s)["l"] == [{"a": 1, "b": 2}]


@pytest.mark.parametrize("op", ["$union", "$append", "$remove"])
@pytest.mark.parametrize("existing", ["s", 1, None, {"a": 1}], ids=["string", "number", "null", "obj"])
def test_list_operations_onto_non_list_clash(op, existing):
    value = ["v"] if op == "$union" else "v"
    first, bad = upd("$set", {"l": existing}, t=at(0)), upd(op, {"l": value, "other": value}, t=at(1))
    s = apply([first, bad])
    assert without_last_seen(props(s)) == {"l": existing}
    assert props(s)["$last_seen"] == last_seen_text(at(0))
    assert s.clashes == [bad.seq]


def test_append_pushes_one_element_even_a_list():
    s = apply(
        [
            upd("$append", {"l": [1, 2]}, t=at(0)),
            upd("$append", {"l": 3, "m": None}, t=at(1)),
            upd("$append", {"l": [1, 2]}, t=at(2)),
        ]
    )
    assert without_last_seen(props(s)) == {"l": [[1, 2], 3, [1, 2]], "m": [None]}


def test_remove_every_occurrence_and_emptied_list_stays():
    s = apply(
        [
            upd("$set", {"l": [1, "1", 1.0, True, 2, 1], "e": ["x", "x"]}, t=at(0)),
            upd("$remove", {"l": 1, "e": "x", "missing": "x"}, t=at(1)),
        ]
    )
    assert without_last_seen(props(s)) == {"l": ["1", True, 2], "e": []}


def test_remove_matches_truncated_strings():
    long = "y" * 400
    s = apply([upd("$union", {"l": [long, "z"]}, t=at(0)), upd("$remove", {"l": long}, t=at(1))])
    assert props(s)["l"] == ["z"]


def test_unset_removes_keys_profile_survives_empty():
    s = apply([upd("$set", {"a": 1, "b": 2}, t=at(0)), upd("$unset", ["a", "b", "zz"], t=at(1))])
    assert props(s) == {"$last_seen": last_seen_text(at(1))}
    s = apply(
        [
            upd("$set", {"a": 1}, t=at(0), **{"$ignore_time": True}),
            upd("$unset", ["a"], t=at(1), **{"$ignore_time": True}),
        ]
    )
    assert props(s) == {}


@pytest.mark.parametrize("op,value", [("$unset", ["a"]), ("$remove", {"l": 1})], ids=["unset", "remove"])
def test_unset_and_remove_do_not_create_profiles(op, value):
    assert apply([upd(op, value)]).profiles == {}
    s = apply([upd("$set", {"a": 1}, t=at(0)), upd("$delete", "", t=at(1)), upd(op, value, t=at(2))])
    assert s.profiles == {}


@pytest.mark.parametrize(
    "op,value",
    [("$set", {}), ("$set_once", {}), ("$add", {}), ("$union", {}), ("$append", {})],
    ids=["set", "set_once", "add", "union", "append"],
)
def test_other_operations_create_profiles_even_when_empty(op, value):
    assert props(apply([upd(op, value)])) == {"$last_seen": last_seen_text(T0)}
    assert props(apply([upd(op, value, **{"$ignore_time": True})])) == {}


def test_missing_key_creations():
    s = apply([upd("$union", {"u": ["a", "a", "b"], "e": []}, t=at(0)), upd("$append", {"p": "x"}, t=at(1))])
    assert without_last_seen(props(s)) == {"u": ["a", "b"], "e": [], "p": ["x"]}


def test_delete_and_recreate():
    s = apply([upd("$set", {"a": 1, "b": 2}, t=at(0)), upd("$delete", "", t=at(1)), upd("$add", {"n": 1}, t=at(2))])
    assert props(s) == {"n": 1, "$last_seen": last_seen_text(at(2))}
    assert apply([upd("$delete", None)]).profiles == {}


def test_delete_applies_at_its_time_not_arrival():
    later_set = upd("$set", {"a": 1}, t=at(10))
    early_delete = upd("$delete", "", t=at(5))  # arrives after, but is older
    assert without_last_seen(props(apply([later_set, early_delete]))) == {"a": 1}
    late_delete = upd("$delete", "", t=at(20))
    assert apply([late_delete, later_set]).profiles == {}  # arrives first, but is newer


# ----------------------------------------------------------------------------------- order and replays
def test_out_of_order_delivery_uses_time_order():
    new, old = upd("$set", {"a": "new"}, t=at(2)), upd("$set", {"a": "old"}, t=at(1))
    s = apply([new, old])
    assert props(s) == {"a": "new", "$last_seen": last_seen_text(at(2))}
    assert apply([old, new]).profiles == s.profiles


def test_ties_are_broken_by_arrival_order():
    a, b = upd("$set", {"x": "first"}), upd("$set", {"x": "second"})
    assert props(apply([b, a]))["x"] == "second"
    c = parsed(raw("$set", {"x": "early-seq"}), seq=-1)
    assert props(apply([a, b, c]))["x"] == "second"


def test_replay_applies_once_token_ignored():
    add = raw("$add", {"n": 5}, t=at(1))
    s = apply([parsed(add), parsed(add | {"$token": "other-token"}), parsed(add)])
    assert props(s)["n"] == 5 and len(s.duplicates) == 2


def test_replay_after_an_intervening_update_changes_nothing():
    a = raw("$set", {"x": 1}, t=at(1))
    first, middle, replay = parsed(a), upd("$set", {"x": 2}, t=at(1)), parsed(a)
    s = apply([first, middle, replay])
    assert props(s)["x"] == 2 and s.duplicates == [replay.seq]


def test_replay_identity_ignores_key_order_and_flags_but_not_time():
    one = parsed(raw("$union", {"a": [1], "b": [2]}, t=at(1)))
    same = parsed(raw("$union", {"b": [2], "a": [1.0]}, t=at(1), **{"$ignore_time": True}))
    other_time = parsed(raw("$union", {"a": [1], "b": [2]}, t=at(1) + 1))
    assert one.identity == same.identity != other_time.identity
    s = apply([one, same])
    assert s.duplicates == [same.seq] and props(s)["$last_seen"] == last_seen_text(at(1))


def test_timeless_resend_is_not_a_duplicate():
    a = parse_update(raw("$add", {"n": 1}, t=None), received_ms=RECEIVED, kind="user", seq=0, project_id=P)
    b = parse_update(raw("$add", {"n": 1}, t=None), received_ms=RECEIVED + 1000, kind="user", seq=1, project_id=P)
    assert props(apply([a, b]))["n"] == 2


def test_project_and_kind_separate_profiles():
    s = apply(
        [
            upd("$set", {"a": 1}),
            parsed(raw("$set", {"a": 2}), project_id=P + 1),
            parsed(graw("$set", {"a": 3}, gid="u1"), kind="group"),
        ]
    )
    assert {k: p.properties["a"] for k, p in s.profiles.items()} == {
        (P, None, "u1"): 1,
        (P + 1, None, "u1"): 2,
        (P, "company", "u1"): 3,
    }


def test_invalid_items_are_skipped_by_apply():
    bad = parse_update(raw("$add", {"n": "x"}), received_ms=RECEIVED, kind="user", seq=0)
    assert isinstance(bad, Invalid) and apply([bad, upd("$add", {"n": 1})]).clashes == []


# ---------------------------------------------------------------------------------------- $last_seen
def test_last_seen_follows_time_order_and_ignore_time():
    s = apply(
        [
            upd("$set", {"a": 1}, t=at(30)),
            upd("$set", {"b": 1}, t=at(10)),
            upd("$set", {"c": 1}, t=at(40), **{"$ignore_time": True}),
        ]
    )
    assert props(s)["$last_seen"] == last_seen_text(at(30)) == "2024-03-05T12:30:00"


def test_last_seen_format_truncates_ms():
    assert last_seen_text(T0 + 59_999) == "2024-03-05T12:00:59"


def test_last_seen_set_explicitly_with_ignore_time_sticks():
    s = apply(
        [
            upd("$set", {"a": 1}, t=at(0)),
            upd("$set", {"$last_seen": "2020-01-01T00:00:00"}, t=at(1), **{"$ignore_time": True}),
        ]
    )
    assert props(s)["$last_seen"] == "2020-01-01T00:00:00"
    s = apply([upd("$set", {"a": 1}, t=at(0)), upd("$set", {"$last_seen": "2020-01-01T00:00:00"}, t=at(1))])
    assert props(s)["$last_seen"] == last_seen_text(at(1))


def test_set_once_without_effect_still_touches_last_seen():
    s = apply([upd("$set", {"a": 1}, t=at(0)), upd("$set_once", {"a": 2}, t=at(9))])
    assert props(s) == {"a": 1, "$last_seen": last_seen_text(at(9))}


# ------------------------------------------------------------------------------------------- clashes
def test_clash_is_decided_at_the_time_position_not_arrival():
    # Arrival: set x="s" @3, add x @2, set x=5 @1. Time order: x=5, +1 -> 6, x="s": no clash.
    a, b, c = upd("$set", {"x": "s"}, t=at(3)), upd("$add", {"x": 1}, t=at(2)), upd("$set", {"x": 5}, t=at(1))
    s = apply([a, b, c])
    assert s.clashes == [] and props(s)["x"] == "s"
    # Arrival: add x @2 (fine when it arrives), then set x="s" @1: in time order the add now clashes.
    d, e = upd("$add", {"x": 1}, t=at(2)), upd("$set", {"x": "s"}, t=at(1))
    s = apply([d, e])
    assert s.clashes == [d.seq] and props(s) == {"x": "s", "$last_seen": last_seen_text(at(1))}


def test_add_overflow_is_a_clash():
    s = apply([upd("$set", {"f": 1e308}, t=at(0)), bad := upd("$add", {"f": 1e308}, t=at(1))])
    assert s.clashes == [bad.seq] and props(s)["f"] == 1e308


def test_replayed_clash_is_reported_once():
    obj = raw("$add", {"x": 1}, t=at(1))
    first, again = parsed(obj), parsed(obj)
    s = apply([upd("$set", {"x": "s"}, t=at(0)), first, again])
    assert s.clashes == [first.seq] and s.duplicates == [again.seq]


# -------------------------------------------------------------------------------------------- limits
def test_profile_property_limit_rejects_whole_update():
    base = upd("$set", {f"k{i}": i for i in range(200)}, t=at(0))
    fits = upd("$set", {f"m{i}": i for i in range(54)}, t=at(1))  # 254 properties + $last_seen
    s = apply([base, fits])
    assert len(props(s)) == 255 and s.over_limit == []
    over = upd("$set", {"k0": "changed", "one-more": 1}, t=at(2))
    s = apply([base, fits, over])
    assert s.over_limit == [over.seq] and props(s)["k0"] == 0 and "one-more" not in props(s)
    s = apply([base, fits, upd("$set", {"k0": "changed"}, t=at(2))])  # overwriting stays under the limit
    assert props(s)["k0"] == "changed"
    quiet = {"$ignore_time": True}  # no $last_seen: 254 is still the cap
    full = upd("$set", {f"k{i}": i for i in range(254)}, t=at(0), **quiet)
    one_more = upd("$set_once", {"x": 1}, t=at(1), **quiet)
    s = apply([full, one_more])
    assert s.over_limit == [one_more.seq] and len(props(s)) == 254


def test_stored_value_limits_reject_growth():
    full = upd("$set", {"l": list(range(254))}, t=at(0))
    grow = upd("$union", {"l": [999]}, t=at(1))
    s = apply([full, grow])
    assert s.over_limit == [grow.seq] and len(props(s)["l"]) == 254
    deep = upd("$append", {"d": {"a": {"b": 1}}}, t=at(0))  # d[0].a.b: 4 segments
    s = apply([deep])
    assert s.over_limit == [deep.seq] and s.profiles == {}


# ---------------------------------------------------------------------------------------------- geo
def test_geo_hook():
    def geo(ip: str) -> dict:
        return {"$city": "Berlin", "$region": "Berlin", "mp_country_code": "DE"}

    s = apply([upd("$set", {"a": 1, "$city": "Mine"}, **{"$ip": "5.6.7.8"})], geo=geo)
    assert without_last_seen(props(s)) == {"a": 1, "$city": "Mine", "$region": "Berlin", "mp_country_code": "DE"}
    assert without_last_seen(props(apply([upd("$set", {"a": 1}, **{"$ip": "0"})], geo=geo))) == {"a": 1}
    assert without_last_seen(props(apply([upd("$set", {"a": 1}, **{"$ip": "5.6.7.8"})]))) == {"a": 1}
    assert apply([upd("$unset", ["a"], **{"$ip": "5.6.7.8"})], geo=geo).profiles == {}


# ------------------------------------------------------------------------------------------- groups
def test_group_profile_operations():
    g = [
        parsed(graw("$set", {"name": "Acme", "tags": ["a"]}, t=at(0)), kind="group"),
        parsed(graw("$union", {"tags": ["b", "a"]}, t=at(1)), kind="group"),
        parsed(graw("$remove", {"tags": "a"}, t=at(2)), kind="group"),
        parsed(graw("$set_once", {"name": "X", "size": 5}, t=at(3)), kind="group"),
        parsed(graw("$unset", ["size"], t=at(4)), kind="group"),
    ]
    s = apply(g)
    assert s.profiles == {
        (P, "company", "acme"): Profile({"name": "Acme", "tags": ["b"], "$last_seen": last_seen_text(at(4))})
    }
    s = apply([*g, parsed(graw("$delete", "", t=at(5)), kind="group")])
    assert s.profiles == {}


# ------------------------------------------------------------------------------ permutation property
KEYS = ["a", "b", "l"]
VALUES = st.one_of(
    st.integers(-3, 3), st.sampled_from(["x", "y", 1.5, None, True]), st.lists(st.sampled_from([1, 2, "x"]), max_size=3)
)


@st.composite
def operation(draw) -> dict:
    op = draw(st.sampled_from(["$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete"]))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True))
    if op == "$add":
        value: object = {k: draw(st.integers(-5, 5)) for k in keys}
    elif op == "$union":
        value = {k: draw(st.lists(st.sampled_from([1, 2, "x"]), max_size=3)) for k in keys}
    elif op == "$unset":
        value = keys
    elif op == "$delete":
        value = ""
    else:
        value = {k: draw(VALUES) for k in keys}
    uid = draw(st.sampled_from(["u1", "u2"]))
    flags = {"$ignore_time": True} if draw(st.booleans()) and draw(st.booleans()) else {}
    return {"$token": "t", "$distinct_id": uid, op: value, **flags}


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(operation(), min_size=1, max_size=12),
    replays=st.lists(st.integers(0, 11), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_arrival_order_gives_the_same_state(ops, replays, seed):
    times = random.Random(seed).sample(range(T0, T0 + 10**6), len(ops))  # distinct $time values
    objs = [{**o, "$time": t} for o, t in zip(ops, times, strict=False)]
    objs += [dict(objs[i]) for i in replays if i < len(objs)]  # exact replays
    in_order = sorted(objs, key=lambda o: o["$time"])
    shuffled = list(objs)
    random.Random(seed + 1).shuffle(shuffled)

    def run(batch: list[dict]) -> tuple[dict, set]:
        updates = parse_batch(batch, received_ms=RECEIVED, kind="user", project_id=P)
        state = apply(updates)
        identity = {u.seq: u.identity for u in updates if isinstance(u, Update)}
        return state.profiles, {identity[s] for s in state.rejected}

    assert run(shuffled) == run(in_order)


def test_shuffled_arrival_matches_in_order_delivery_seeded():
    rng = random.Random(5)
    objs = []
    for i in range(40):
        op = rng.choice(["$set", "$add", "$union", "$remove", "$unset", "$delete"])
        value = {
            "$set": {"n": rng.choice([1, "s"])},
            "$add": {"n": 1},
            "$union": {"l": [rng.randint(0, 3)]},
            "$remove": {"l": rng.randint(0, 3)},
            "$unset": ["n"],
            "$delete": "",
        }[op]
        objs.append(raw(op, value, t=at(i)))
    state = apply(parse_batch(objs, received_ms=RECEIVED, kind="user", project_id=P))
    for perm_seed in range(5):
        shuffled = list(objs)
        random.Random(perm_seed).shuffle(shuffled)
        assert apply(parse_batch(shuffled, received_ms=RECEIVED, kind="user", project_id=P)).profiles == state.profiles


# -------------------------------------------------------------------------------------------- /engage
def _profiles(**by_id: dict) -> dict:
    return {(P, None, uid): Profile(p) for uid, p in by_id.items()}


USERS = _profiles(
    alice={"$email": "a@x.io", "plan": "pro", "age": 31, "$last_seen": "2024-03-05T10:00:00"},
    bob={"$email": "b@x.io", "plan": "free", "age": 25, "$last_seen": "2024-02-01T00:00:00"},
    carol={"plan": "pro", "tags": ["beta", "vip"], "$last_seen": "2024-03-01T00:00:00"},
    Dave={"plan": None},
    **{"10": {"plan": "free"}, "9": {"plan": "free"}},
) | {(P + 1, None, "zed"): Profile({"plan": "pro"}), (P, "company", "acme"): Profile({"plan": "pro"})}


def ids(body: dict) -> list[str]:
    return [r["$distinct_id"] for r in body["results"]]


def q(params: dict, profiles: dict = USERS, **kw) -> dict | EngageError:
    return engage(profiles, params, project_id=P, **kw)


def test_engage_all_user_profiles_sorted_by_distinct_id():
    body = q({})
    assert body == {
        "page": 0,
        "page_size": 1000,
        "status": "ok",
        "total": 6,
        "results": [
            {"$distinct_id": i, "$properties": USERS[(P, None, i)].properties}
            for i in ["10", "9", "Dave", "alice", "bob", "carol"]
        ],
    }


def test_engage_distinct_id_and_distinct_ids():
    assert ids(q({"distinct_id": "bob"})) == ["bob"]
    assert q({"distinct_id": "nobody"})["total"] == 0
    assert ids(q({"distinct_ids": '["carol", "alice", "alice", "zed", 10]'})) == ["10", "alice", "carol"]
    assert q({"distinct_ids": "[]"})["total"] == 0
    assert isinstance(q({"distinct_ids": "[alice"}), EngageError)
    assert isinstance(q({"distinct_ids": '"alice"'}), EngageError)
    assert isinstance(q({"distinct_ids": "[true]"}), EngageError)


def test_engage_where_over_profile_properties():
    assert ids(q({"where": 'properties["plan"] == "pro"'})) == ["alice", "carol"]
    assert ids(q({"where": 'user["age"] > 26'})) == ["alice"]
    assert ids(q({"selector": '"vip" in properties["tags"]'})) == ["carol"]
    assert ids(q({"where": 'not defined(properties["plan"])'})) == []
    assert ids(q({"where": 'defined(properties["plan"]) and properties["plan"] == null'})) == ["Dave"]
    assert ids(q({"where": 'properties["$last_seen"] >= datetime("2024-03-01T00:00:00")'})) == ["alice", "carol"]
    assert ids(q({"where": '(("@x.io" in properties["$email"]) and (defined (properties["$email"])))'})) == [
        "alice",
        "bob",
    ]


@pytest.mark.parametrize(
    "where",
    ['properties["plan"] ==', 'event["x"] == 1', "1 and true", 'behaviors["b"] > 0'],
    ids=["syntax", "event-accessor", "and-on-number", "undefined-behavior"],
)
def test_engage_bad_where_is_an_error(where):
    assert isinstance(q({"where": where}), EngageError)


def test_engage_output_properties():
    body = q({"distinct_ids": '["alice", "carol"]', "output_properties": '["$email", "tags"]'})
    assert body["results"] == [
        {"$distinct_id": "alice", "$properties": {"$email": "a@x.io"}},
        {"$distinct_id": "carol", "$properties": {"tags": ["beta", "vip"]}},
    ]
    assert q({"distinct_id": "bob", "output_properties": "[]"})["results"][0]["$properties"] == {}
    assert isinstance(q({"output_properties": "[1]"}), EngageError)


def test_engage_paging_and_total():
    pages = [q({"page_size": "4", "page": str(p), "session_id": "s"}) for p in range(3)]
    assert [ids(b) for b in pages] == [["10", "9", "Dave", "alice"], ["bob", "carol"], []]
    assert {(b["total"], b["page_size"]) for b in pages} == {(6, 4)}
    assert [b["page"] for b in pages] == [0, 1, 2]


def test_engage_page_size_cap_and_errors():
    many = {(P, None, f"u{i:04d}"): Profile({"i": i}) for i in range(1500)}
    first = q({"page_size": "5000"}, many)
    assert first["page_size"] == 1000 and len(first["results"]) == 1000 and first["total"] == 1500
    assert len(q({"page": "1", "session_id": "s"}, many)["results"]) == 500
    for bad in (
        {"page_size": "0"},
        {"page_size": "-3"},
        {"page_size": "ten"},
        {"page": "-1"},
        {"page": "1"},
        {"page": "x"},
    ):
        assert isinstance(q(bad), EngageError), bad


def test_engage_page_snapshot_is_used_for_the_session():
    later = USERS | {(P, None, "aaron"): Profile({})}
    assert q({"page": "0"}, later)["total"] == 7
    assert q({"page": "1", "page_size": "4", "session_id": "s"}, later, page_snapshot=USERS)["total"] == 6


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("distinct_id", "distinct_ids"),
        ("where", "selector"),
        ("behaviors", "filter_by_cohort"),
        ("filter_by_cohort", "data_group_id"),
        ("behaviors", "data_group_id"),
    ],
    ids=lambda x: x,
)
def test_engage_mutually_exclusive_members(a, b):
    values = {
        "distinct_id": "alice",
        "distinct_ids": '["bob"]',
        "where": "true",
        "selector": "true",
        "behaviors": '[{"name": "p", "window": "1d", "event_selectors": [{"event": "E"}]}]',
        "filter_by_cohort": '{"id": 1}',
        "data_group_id": "5",
    }
    out = q({a: values[a], b: values[b]}, group_keys={5: "company"}, cohorts={1: ["alice"]}, now_ms=T0)
    assert isinstance(out, EngageError) and a in out.message and b in out.message


def test_engage_empty_members_are_absent():
    assert q({"distinct_id": "", "distinct_ids": '["bob"]', "where": ""})["total"] == 1


def test_engage_group_profiles():
    groups = USERS | {(P, "company", "beta"): Profile({"plan": "free"}), (P, "team", "acme"): Profile({"plan": "x"})}
    keys = {"-1405123841946871899": "company", 3: "team"}
    body = q({"data_group_id": "-1405123841946871899"}, groups, group_keys=keys)
    assert ids(body) == ["acme", "beta"] and body["total"] == 2
    assert ids(q({"data_group_id": "3", "where": 'properties["plan"] == "x"'}, groups, group_keys=keys)) == ["acme"]
    assert isinstance(q({"data_group_id": "4"}, groups, group_keys=keys), EngageError)


# ------------------------------------------------------------------------------------------- behaviors
def ev(name: str, ms: int, uid: str, insert_id: str, **props) -> dict:
    return {"event": name, "properties": {"time": ms, "distinct_id": uid, "$insert_id": insert_id, **props}}


DAY = 86_400_000
NOW = T0  # 2024-03-05T12:00Z
EVENTS = [
    ev("Purchase", NOW - 1000, "alice", "p1", amount=20),
    ev("Purchase", NOW - 1000, "alice", "p1", amount=20),  # exact duplicate: counts once
    ev("Purchase", NOW - DAY, "alice", "p2", amount=5),
    ev("Purchase", NOW - 2 * DAY, "bob", "p3", amount=50),
    ev("Purchase", NOW + 1000, "bob", "p4", amount=50),  # after now: not counted
    ev("Refund", NOW - 1000, "carol", "r1"),
    ev("Purchase", NOW - 30 * DAY, "carol", "p5", amount=1),
]


def behaviors(window: str = "3d", selector: str | None = None, name: str = "buys", extra: tuple = ()) -> str:
    first = {"event": "Purchase"} | ({} if selector is None else {"selector": selector})
    return json.dumps([{"name": name, "window": window, "event_selectors": [first, *extra]}])


def bq(where: str, beh: str, **params) -> dict | EngageError:
    return q({"where": where, "behaviors": beh, **params}, events=EVENTS, now_ms=NOW)


def test_behaviors_count_deduplicated_events_in_window():
    assert ids(bq('behaviors["buys"] == 2', behaviors("3d"))) == ["alice"]
    assert ids(bq('behaviors["buys"] == 1', behaviors("3d"))) == ["bob"]
    assert ids(bq('behaviors["buys"] > 0', behaviors("1d"))) == ["alice"]  # today only
    assert ids(bq('behaviors["buys"] == 0', behaviors("1d"))) == ["10", "9", "Dave", "bob", "carol"]
    assert ids(bq('behaviors["buys"] >= 1', behaviors("31d"))) == ["alice", "bob", "carol"]


@pytest.mark.parametrize(
    ("tz", "expected"),
    [("UTC", ["carol"]), ("Asia/Tokyo", ["bob", "carol"]), ("America/Los_Angeles", [])],
    ids=["utc", "tokyo", "los-angeles"],
)
def test_behaviors_window_is_local_calendar_days(tz, expected):
    # now = 2024-03-05T12:00Z; "1d" = since local midnight today. bob's event 03-04T20:00Z is 03-05 05:00 in
    # Tokyo (today) but yesterday in UTC; carol's 03-05T06:00Z is 03-04 22:00 in Los Angeles (yesterday).
    events = [ev("Purchase", NOW - 16 * 3_600_000, "bob", "b1"), ev("Purchase", NOW - 6 * 3_600_000, "carol", "c1")]
    body = q({"where": 'behaviors["buys"] > 0', "behaviors": behaviors("1d")}, events=events, now_ms=NOW, tz=tz)
    assert ids(body) == expected


def test_behaviors_selector_and_or_of_event_selectors():
    assert ids(bq('behaviors["buys"] > 0', behaviors("3d", 'properties["amount"] > 10'))) == ["alice", "bob"]
    refunds = ({"event": "Refund"},)
    assert ids(bq('behaviors["buys"] == 1', behaviors("3d", extra=refunds))) == ["bob", "carol"]
    same_twice = ({"event": "Purchase", "selector": None},)
    assert ids(bq('behaviors["buys"] == 2', behaviors("3d", extra=same_twice))) == ["alice"]  # counted once


def test_behaviors_as_of_timestamp():
    params = {
        "where": 'behaviors["buys"] > 0',
        "behaviors": behaviors("1d"),
        "as_of_timestamp": str((NOW - 2 * DAY) // 1000),
    }
    assert ids(q(params, events=EVENTS, now_ms=NOW)) == ["bob"]
    params["as_of_timestamp"] = str(NOW + 2000)  # >= 1e10: milliseconds
    assert ids(q(params, events=EVENTS)) == ["alice", "bob"]


def test_behaviors_only_return_profiles_and_unreferenced_do_not_filter():
    events = [*EVENTS, ev("Purchase", NOW - 1, "ghost", "g1")]
    body = q({"where": 'behaviors["buys"] > 0', "behaviors": behaviors("3d")}, events=events, now_ms=NOW)
    assert "ghost" not in ids(body)
    assert q({"behaviors": behaviors("3d")}, events=events, now_ms=NOW)["total"] == 6


def _one(name: object = "b", window: object = "1d", selectors: object = ({"event": "E"},)) -> dict:
    return {"name": name, "window": window, "event_selectors": list(selectors)}


BAD_BEHAVIORS = {
    "not-list": {"name": "b"},
    "no-unit": [_one(window="30")],
    "zero": [_one(window="0d")],
    "weeks": [_one(window="2w")],
    "no-selectors": [_one(selectors=())],
    "no-name": [_one(name="")],
    "no-event": [_one(selectors=({"selector": "true"},))],
    "bad-selector": [_one(selectors=({"event": "E", "selector": "=="},))],
    "duplicate-name": [_one(), _one(window="2d")],
    "too-many": [_one(name=f"b{i}") for i in range(51)],
}


@pytest.mark.parametrize("beh", list(BAD_BEHAVIORS.values()), ids=list(BAD_BEHAVIORS))
def test_behaviors_bad_definitions(beh):
    assert isinstance(q({"behaviors": json.dumps(beh)}, events=EVENTS, now_ms=NOW), EngageError)


def test_behaviors_uncached_paging_error():
    many = {(P, None, f"u{i:04d}"): Profile({}) for i in range(1001)}
    params = {"behaviors": behaviors("1d"), "where": 'behaviors["buys"] == 0', "page_size": "500", "session_id": "s"}
    assert q(params | {"page": "0"}, many, events=[], now_ms=NOW)["total"] == 1001
    err = q(params | {"page": "1"}, many, events=[], now_ms=NOW)
    assert isinstance(err, EngageError) and err.message == UNCACHED_PAGE_ERROR
    ok = q(params | {"page": "2", "as_of_timestamp": str(NOW // 1000)}, many, events=[], now_ms=NOW)
    assert len(ok["results"]) == 1
    small = dict(list(many.items())[:1000])
    assert q(params | {"page": "1"}, small, events=[], now_ms=NOW)["results"]


# ------------------------------------------------------------------------------------------ cohorts
def test_filter_by_cohort_include_all_users():
    cohorts = {4: ["alice", "ghost", "bob"]}
    body = q({"filter_by_cohort": '{"id": 4}'}, cohorts=cohorts)
    assert ids(body) == ["alice", "bob", "ghost"] and body["results"][2]["$properties"] == {}
    assert ids(q({"filter_by_cohort": "4", "include_all_users": "FALSE"}, cohorts=cohorts)) == ["alice", "bob"]
    assert ids(q({"filter_by_cohort": '{"id": 4}', "where": 'not defined(properties["plan"])'}, cohorts=cohorts)) == [
        "ghost"
    ]
    assert ids(q({"filter_by_cohort": '{"id": 4}', "distinct_ids": '["bob", "carol"]'}, cohorts=cohorts)) == ["bob"]
    assert isinstance(q({"filter_by_cohort": '{"id": 5}'}, cohorts=cohorts), EngageError)
    assert isinstance(q({"filter_by_cohort": '{"id": 4}', "include_all_users": "maybe"}, cohorts=cohorts), EngageError)


# ----------------------------------------------------------------------------- end to end: updates -> /engage
def test_updates_then_engage():
    objs = [
        raw("$set", {"plan": "pro", "seats": 1}, uid="u2", t=at(0)),
        raw("$add", {"seats": 2}, uid="u2", t=at(1)),
        raw("$set", {"plan": "free"}, uid="u1", t=at(0)),
        raw("$delete", "", uid="u1", t=at(2)),
        raw("$set_once", {"plan": "trial"}, uid="u3", t=at(3), **{"$ignore_time": True}),
    ]
    state = apply(parse_batch(objs, received_ms=RECEIVED, kind="user", project_id=P))
    body = engage(state.profiles, {"where": 'properties["seats"] >= 3 or properties["plan"] == "trial"'}, project_id=P)
    assert body["results"] == [
        {"$distinct_id": "u2", "$properties": {"plan": "pro", "seats": 3, "$last_seen": last_seen_text(at(1))}},
        {"$distinct_id": "u3", "$properties": {"plan": "trial"}},
    ]


def test_profile_expression_helpers_in_expr():
    assert expr.behavior_names('behaviors["a"] > 1 or 2 in [behaviors["b"]]') == {"a", "b"}
    assert expr.profile_where_matches('properties["time"] == 5', {"time": 5})
    assert expr.evaluate_profile('behaviors["x"]', {}, {}) == 0
