"""`StateCache` (`footfall.shared.profiles.cache`): bounded by count, least recently written out
first; `take` hands out objects of its own; a `put` from before a `clear` is left out; losing
a profile (eviction, a failed commit, a clear) ends `complete`. The store's use of it is checked
against the oracle in tests/integration/profiles/test_profile_state_cache.py."""

from __future__ import annotations

import pytest

from footfall.services.standalone.settings import ServeSettings
from footfall.shared.config import ConfigError
from footfall.shared.profiles.apply import Entry, advance
from footfall.shared.profiles.cache import DEFAULT_PROFILES, StateCache


def test_take_builds_private_states_that_a_commit_may_advance() -> None:
    cache = StateCache(10, complete=True)
    cache.put(1, "", [("u", ('{"n":1,"tags":["a"]}', 5, 7, 9))], cache.epoch)
    first, missing, _ = cache.take(1, "", ["u", "new"])
    assert missing == []  # complete: "new" has no state anywhere
    advance(first["u"], [Entry("$add", {"n": 1}, 6, 10), Entry("$append", {"tags": "b"}, 7, 11)])
    assert first["u"].properties is not None and first["u"].properties["n"] == 2
    again, _, _ = cache.take(1, "", ["u"])
    assert (again["u"].properties, again["u"].position, again["u"].seen_seq) == ({"n": 1, "tags": ["a"]}, (5, 7), 9)
    assert not again["u"].behind


def test_scope_is_part_of_the_key_and_deleted_profiles_are_kept() -> None:
    cache = StateCache(10)
    cache.put(1, "", [("a", (None, 5, 7, 9))], cache.epoch)
    found, missing, _ = cache.take(1, "", ["a", "b"])
    assert found["a"].properties is None and found["a"].position == (5, 7)
    assert missing == ["b"]
    assert cache.take(2, "", ["a"])[1] == ["a"]
    assert cache.take(1, "company", ["a"])[1] == ["a"]


def test_the_least_recently_written_go_first_and_the_cache_is_no_longer_complete() -> None:
    cache = StateCache(3, complete=True)
    for name in "abc":
        cache.put(1, "", [(name, ("{}", 1, 1, 1))], cache.epoch)
    cache.put(1, "", [("a", ("{}", 2, 2, 2))], cache.epoch)  # written again: now the newest
    assert cache.complete
    cache.put(1, "", [("d", ("{}", 1, 1, 1))], cache.epoch)
    assert len(cache) == 3 and not cache.complete
    found, missing, _ = cache.take(1, "", ["a", "b", "c", "d"])
    assert sorted(found) == ["a", "c", "d"] and missing == ["b"]


def test_big_profiles_are_bounded_by_memory_too() -> None:
    cache = StateCache(1000, max_bytes=3000, complete=True)
    big = "[" + ",".join(["1"] * 500) + "]"  # 1001 characters of JSON
    for name in "abcd":
        cache.put(1, "", [(name, (big, 1, 1, 1))], cache.epoch)
    assert len(cache) == 2 and not cache.complete  # 2 × (1001 + overhead) fits in 3000, 3 do not
    assert sorted(cache.take(1, "", "abcd")[0]) == ["c", "d"]
    cache.put(1, "", [("c", (None, 2, 2, 2))], cache.epoch)  # replaced by a small state: room again
    cache.put(1, "", [("e", ("{}", 1, 1, 1))], cache.epoch)
    assert sorted(cache.take(1, "", "abcde")[0]) == ["c", "d", "e"]


def test_a_put_read_before_a_clear_is_left_out() -> None:
    cache = StateCache(10, complete=True)
    _, _, epoch = cache.take(1, "", ["u"])
    cache.clear()  # another writer changed the profile tables meanwhile
    cache.put(1, "", [("u", ("{}", 1, 1, 1))], epoch)
    assert len(cache) == 0 and not cache.complete
    assert cache.take(1, "", ["u"])[1] == ["u"]
    _, _, epoch = cache.take(1, "", ["u"])
    cache.put(1, "", [("u", ("{}", 1, 1, 1))], epoch)
    assert len(cache) == 1


def test_drop_forgets_the_profiles_of_a_failed_commit() -> None:
    cache = StateCache(10, complete=True)
    cache.put(1, "", [("u", ("{}", 1, 1, 1)), ("v", ("{}", 1, 1, 1))], cache.epoch)
    cache.drop(1, "", ["u"])
    found, missing, _ = cache.take(1, "", ["u", "v"])
    assert list(found) == ["v"] and missing == ["u"]  # "u" is read again, with its log's head


def test_the_setting_defaults_to_a_cache_only_with_chdb() -> None:
    assert ServeSettings.from_env({}).profile_cache == DEFAULT_PROFILES
    server = {"FOOTFALL_WAREHOUSE_DSN": "http://clickhouse:8123/default"}
    assert ServeSettings.from_env(server).profile_cache == 0
    assert ServeSettings.from_env({**server, "FOOTFALL_PROFILE_CACHE_SIZE": "1000"}).profile_cache == 1000
    assert ServeSettings.from_env({"FOOTFALL_PROFILE_CACHE_SIZE": "0"}).profile_cache == 0
    with pytest.raises(ConfigError, match="FOOTFALL_PROFILE_CACHE_SIZE"):
        ServeSettings.from_env({"FOOTFALL_PROFILE_CACHE_SIZE": "-1"})
