"""The events.raw envelope and the directory snapshot."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from footfall.services.gateway.credentials import FollowedAuthenticator
from footfall.shared.errors import UnavailableError
from footfall.shared.events import Event
from footfall.shared.kafka import accepted_header, accepted_ms_of, content_digest
from footfall.shared.kafka.directory import SnapshotError, decode_snapshot, encode_snapshot
from footfall.shared.kafka.topics import Topics
from footfall.shared.metadata import Directory, Project
from footfall.shared.streams import EVENTS, CodecError
from footfall.shared.streams.events import decode_event, encode_event, event_key

EVENT = Event(7, "Café ☕", 1_700_000_000_123, "user 1", "abc-123", {"a": [1, {"b": None}], "ü": "x"}, ip="::1")


def test_event_round_trip_and_key() -> None:
    value = encode_event(EVENT)
    assert decode_event(value) == EVENT
    assert event_key(EVENT) == b"7:user 1"


def test_value_is_deterministic_so_retries_share_a_digest() -> None:
    assert encode_event(EVENT) == encode_event(EVENT)
    changed = dataclasses.replace(EVENT, properties={"a": 2})
    assert content_digest(encode_event(EVENT)) != content_digest(encode_event(changed))
    assert len(content_digest(b"x")) == 8


def test_accepted_header() -> None:
    assert accepted_ms_of(accepted_header(1234)) == 1234
    assert accepted_ms_of(None) == 0
    assert accepted_ms_of([("accepted_ms", b"garbled")]) == 0


def _envelope(**changes: object) -> bytes:
    base = orjson.loads(encode_event(EVENT))
    base.update(changes)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty"),
        (b"\xff\x00", "json"),
        (b'"text"', "envelope"),
        (_envelope(v=2), "version"),
        (_envelope(p="7"), "field"),
        (_envelope(p=0), "field"),
        (_envelope(t=1.5), "field"),
        (_envelope(t=True), "field"),
        (_envelope(d=...), "field"),
        (_envelope(pr=[]), "field"),
        (_envelope(ip=3), "field"),
    ],
    ids=[
        "none",
        "binary",
        "string",
        "version",
        "project-str",
        "project-zero",
        "time-float",
        "time-bool",
        "no-distinct-id",
        "props-list",
        "ip-int",
    ],
)
def test_decode_refuses_anything_else(value: bytes | None, reason: str) -> None:
    with pytest.raises(CodecError) as info:
        decode_event(value)
    assert info.value.reason == reason


def test_topic_names_carry_the_prefix() -> None:
    t = Topics.for_prefix("acme.")
    assert (t.of(EVENTS), t.dlq, t.directory, t.workers_group) == (
        "acme.events.raw",
        "acme.footfall.dlq",
        "acme.footfall.directory",
        "acme.footfall-workers",
    )


def test_snapshot_round_trip() -> None:
    directory = Directory(projects={1: Project(1, "P", "UTC")}, tokens={"h": 1}, secrets={}, accounts={})
    decoded, published = decode_snapshot(encode_snapshot(directory, 42))
    assert decoded == directory and published == 42
    for bad in (None, b"{}", b'{"v": 1, "published_ms": 1, "directory": {"projects": 5}}'):
        with pytest.raises(SnapshotError):
            decode_snapshot(bad)


def test_followed_authenticator_answers_503_until_the_first_snapshot() -> None:
    auth = FollowedAuthenticator()
    with pytest.raises(UnavailableError):
        auth.for_import("Basic dG9rOg==", None)
    auth.replace(Directory())
    assert auth.loaded
