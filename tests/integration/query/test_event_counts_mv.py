"""The materialised counts (m0003, `event_counts_15m`) stay exact when duplicates slip into
the events table, and serve 30- and 45-minute-offset time zones exactly.

Duplicates are inserted directly (the worker's `store_batch`, twice, with
later ingestion times), bypassing every dedup layer in front of the table, and merges are
stopped so the copies stay in separate parts.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime

import pytest

from footfall.services.query.params import Params
from footfall.services.query.reports import _common, events
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.store import store_batch
from footfall.shared.events import Event
from footfall.shared.streams import EVENTS as EVENT_STREAM
from footfall.shared.warehouse import ClickHouseWarehouse

pytestmark = pytest.mark.warehouse

NAMES = '["Open", "Buy", "Other"]'


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


EVENTS = [
    # Asia/Kathmandu is UTC+05:45: 2024-05-01 18:15 UTC is 2024-05-02 00:00 local.
    Event(1, "Open", _ms("2024-05-01T18:14:59.999"), "alice", "i1", {"plan": "free"}),
    Event(1, "Open", _ms("2024-05-01T18:15:00"), "alice", "i2", {"plan": "free"}),
    Event(1, "Open", _ms("2024-05-01T18:16:00"), "bob", "i3", {}),
    Event(1, "Open", _ms("2024-05-01T19:14:00"), "", "i4", {}),  # anonymous: general only
    Event(1, "Buy", _ms("2024-05-02T06:00:00"), "bob", "i5", {"price": 3}),
    Event(2, "Open", _ms("2024-05-01T18:16:00"), "carol", "i6", {}),  # another project
]


@pytest.fixture
def store(clean_warehouse: ClickHouseWarehouse) -> Iterator[ClickHouseWarehouse]:
    clean_warehouse.command("SYSTEM STOP MERGES events")
    clean_warehouse.command("SYSTEM STOP MERGES event_counts_15m")
    try:
        yield clean_warehouse
    finally:
        clean_warehouse.command("SYSTEM START MERGES events")
        clean_warehouse.command("SYSTEM START MERGES event_counts_15m")


def _insert(warehouse: ClickHouseWarehouse, batch: list[Event], ingested_ms: int) -> None:
    assert store_batch(EVENT_STREAM, warehouse, Enricher(None), batch, ingested_ms).dropped == 0


class _Ctx:
    def __init__(self, tz: str, params: dict[str, str]) -> None:
        self.project_id, self.timezone, self.params = 1, tz, Params(params)


def _events(warehouse: ClickHouseWarehouse, tz: str, **params: str) -> tuple[dict[str, object], dict[str, object]]:
    """/events through the materialised route and through the events table."""
    req = events.EventsRequest.parse(_Ctx(tz, {"event": NAMES, **params}), datetime(2024, 6, 1, tzinfo=UTC))  # type: ignore[arg-type]
    mv, raw, chosen = events.build_mv(req), events.build_raw(req), events.build(req)
    assert "event_counts_15m" in mv.text
    via_chosen = events.shape(warehouse.query(chosen.text, chosen.binds.values), req)
    via_mv = events.shape(warehouse.query(mv.text, mv.binds.values), req)
    assert via_chosen == via_mv
    return via_mv, events.shape(warehouse.query(raw.text, raw.binds.values), req)


def test_duplicates_inserted_directly_count_once(store: ClickHouseWarehouse) -> None:
    _insert(store, EVENTS, _ms("2024-05-03T00:00:00"))
    _insert(store, EVENTS, _ms("2024-05-03T00:00:01"))  # exact retries, a later part
    changed = [Event(e.project_id, e.event, e.time_ms, e.distinct_id, e.insert_id, {"plan": "pro"}) for e in EVENTS]
    _insert(store, changed[:3], _ms("2024-05-03T00:00:02"))  # conflicting copies
    ((rows,),) = store.query("SELECT count() FROM events WHERE project_id = 1")
    ((mv_rows,),) = store.query("SELECT count() FROM event_counts_15m WHERE project_id = 1")
    assert rows == 13 and mv_rows > 5  # the duplicates are really there, in both tables

    via_mv, via_raw = _events(store, "UTC", type="general", unit="day", from_date="2024-05-01", to_date="2024-05-02")
    assert via_mv == via_raw
    assert via_mv["data"]["values"] == {  # type: ignore[index]
        "Open": {"2024-05-01": 4, "2024-05-02": 0},
        "Buy": {"2024-05-01": 0, "2024-05-02": 1},
        "Other": {"2024-05-01": 0, "2024-05-02": 0},
    }
    via_mv, via_raw = _events(store, "UTC", type="unique", unit="day", from_date="2024-05-01", to_date="2024-05-02")
    assert via_mv == via_raw
    assert via_mv["data"]["values"]["Open"] == {"2024-05-01": 2, "2024-05-02": 0}  # type: ignore[index]


@pytest.mark.parametrize(
    ("tz", "unit", "expected_open"),
    [
        # +05:45: the quarter-hour grain splits at local midnight = 18:15 UTC.
        ("Asia/Kathmandu", "day", {"2024-05-01": 1, "2024-05-02": 3}),
        ("Asia/Kathmandu", "hour", {"2024-05-01 23:00:00": 1, "2024-05-02 00:00:00": 3}),
        # +05:30: local midnight is 18:30 UTC.
        ("Asia/Kolkata", "day", {"2024-05-01": 3, "2024-05-02": 1}),
        ("Asia/Kolkata", "hour", {"2024-05-01 23:00:00": 3, "2024-05-02 00:00:00": 1}),
    ],
    ids=["kathmandu-day", "kathmandu-hour", "kolkata-day", "kolkata-hour"],
)
def test_fractional_offset_zones_are_exact(
    store: ClickHouseWarehouse, tz: str, unit: str, expected_open: dict[str, int]
) -> None:
    _insert(store, EVENTS, _ms("2024-05-03T00:00:00"))
    _insert(store, EVENTS, _ms("2024-05-03T00:00:01"))
    via_mv, via_raw = _events(store, tz, type="general", unit=unit, from_date="2024-05-01", to_date="2024-05-02")
    assert via_mv == via_raw
    opened = {k: v for k, v in via_mv["data"]["values"]["Open"].items() if v}  # type: ignore[index]
    assert opened == expected_open


def test_migration_backfill_is_idempotent(store: ClickHouseWarehouse) -> None:
    """Re-running m0003's backfill (a restart after a crash mid-migration) double-counts nothing."""
    from footfall.shared.schema.migrations import m0003_event_counts

    _insert(store, EVENTS, _ms("2024-05-03T00:00:00"))
    before = _events(store, "UTC", type="general", unit="day", from_date="2024-05-01", to_date="2024-05-02")[0]
    store.command(m0003_event_counts.STATEMENTS[-1])
    after = _events(store, "UTC", type="general", unit="day", from_date="2024-05-01", to_date="2024-05-02")[0]
    assert before == after


def test_minute_buckets_fall_back_to_the_events_table() -> None:
    tl = _common.timeline_for_dates(date(2024, 5, 1), date(2024, 5, 1), "UTC", "minute")
    assert not _common.mv_covers(_common.scope_of(1, tl), tl)
    tl = _common.timeline_for_dates(date(2024, 5, 1), date(2024, 5, 1), "Asia/Kathmandu", "hour")
    assert _common.mv_covers(_common.scope_of(1, tl), tl)
