"""`GET /api/2.0/export`: the stored events of a date range as NDJSON, deduplicated.

Dates are inclusive local days in the project's time zone. Rows are streamed in pages
(keyset pagination on (time, dedup_hash)), so an export of millions of events never sits
in memory at once. `time` is in seconds unless `time_in_ms=true`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.params import check_range
from footfall.services.query.reports._common import Binds, Query, final_events, read_dates
from footfall.shared.sql import Scope, sql
from footfall.shared.timerange import day_range_utc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PAGE = 20_000
MAX_LIMIT = 100_000_000


def page_query(scope: Scope, events: list[str], after: tuple[datetime, str], page: int) -> Query:
    """One page of the deduplicated events of `scope`, after the keyset position `after`
    ((time, hex of the dedup hash) of the last row sent)."""
    b = Binds()
    after_key = sql(
        "(time, hex(dedup_hash)) > ({}, {})", b.add(after[0], "DateTime64(3, 'UTC')"), b.add(after[1], "String")
    )
    rows = final_events(scope, events or None, after_key, b)
    return Query(
        sql(
            "SELECT time, event, distinct_id, insert_id, properties, ingested_at, hex(dedup_hash) AS h FROM {} "
            "ORDER BY time, h LIMIT {}",
            rows,
            b.add(page, "UInt32"),
        ),
        b,
    )


def epoch_ms(value: datetime) -> int:
    """clickhouse-connect returns DateTime64('UTC') values as naive UTC datetimes."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def _line(row: tuple[Any, ...], time_in_ms: bool) -> bytes:
    time_value, event, distinct_id, insert_id, properties, ingested_at, _ = row
    millis = epoch_ms(time_value)
    props = orjson.loads(properties)
    out = {
        "time": millis if time_in_ms else millis // 1000,
        "distinct_id": distinct_id,
        "$insert_id": insert_id,
        "mp_processing_time_ms": epoch_ms(ingested_at),
    }
    out.update(props)
    return orjson.dumps({"event": event, "properties": out}) + b"\n"


async def export(ctx: QueryContext) -> StreamingResponse:
    p = ctx.params
    from_date, to_date = read_dates(p)
    check_range(from_date, to_date)
    events = p.string_list("event") or []
    limit = p.integer("limit", MAX_LIMIT, minimum=1, maximum=MAX_LIMIT)
    time_in_ms = p.boolean("time_in_ms")
    scope = Scope(ctx.project_id, *day_range_utc(from_date, to_date, ctx.timezone))

    async def lines() -> AsyncIterator[bytes]:
        sent = 0
        after_time, after_hash = datetime(1970, 1, 1), ""
        while sent < limit:
            page = min(PAGE, limit - sent)
            rows = await page_query(scope, events, (after_time, after_hash), page).run(ctx)
            if not rows:
                return
            yield b"".join(_line(row, time_in_ms) for row in rows)
            sent += len(rows)
            if len(rows) < page:
                return
            after_time, after_hash = rows[-1][0], rows[-1][6]

    return StreamingResponse(lines(), media_type="application/x-ndjson")
