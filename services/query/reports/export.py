"""`GET /api/2.0/export`: the stored events of a date range as NDJSON, deduplicated.

Dates are inclusive local days in the project's time zone. Rows are streamed in pages
(keyset pagination on (time, dedup_hash)), so an export of millions of events never sits
in memory at once. `time` is in seconds unless `time_in_ms=true`. `where` filters with the
expression language (as in `/segmentation`), evaluated on the deduplicated events.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.params import check_range
from footfall.services.query.reports._common import (
    Binds,
    Query,
    final_events,
    raw_events,
    read_dates,
    read_expr,
    where_condition,
)
from footfall.shared.expr.typed import TNode
from footfall.shared.sql import Scope, Sql, sql
from footfall.shared.timerange import day_range_utc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PAGE = 20_000
MAX_LIMIT = 100_000  # the interface's largest `limit`; without one, every event of the range


def _keyset(after: tuple[datetime, str], until: tuple[datetime, str] | None, b: Binds) -> Sql:
    """The rows after the keyset position `after` (and up to `until`, inclusive)."""
    key = sql("(time, hex(dedup_hash)) > ({}, {})", b.add(after[0], "DateTime64(3, 'UTC')"), b.add(after[1], "String"))
    if until is not None:
        last = sql("({}, {})", b.add(until[0], "DateTime64(3, 'UTC')"), b.add(until[1], "String"))
        key = sql(
            "{} AND time <= {} AND (time, hex(dedup_hash)) <= {}", key, b.add(until[0], "DateTime64(3, 'UTC')"), last
        )
    return key


def page_keys(scope: Scope, events: list[str], after: tuple[datetime, str], page: int) -> Query:
    """The keyset positions ((time, hex of the dedup hash)) of the next `page` events after
    `after`: a cheap statement over two small columns, without FINAL (the copies of a
    duplicate share them)."""
    b = Binds()
    rows = raw_events(scope, events or None, b, keys=_keyset(after, None, b))
    return Query(
        sql(
            "SELECT DISTINCT time, hex(dedup_hash) AS h FROM {} ORDER BY time, h LIMIT {}", rows, b.add(page, "UInt32")
        ),
        b,
    )


def page_query(
    scope: Scope,
    events: list[str],
    after: tuple[datetime, str],
    page: int,
    where: TNode | None = None,
    *,
    until: tuple[datetime, str] | None = None,
) -> Query:
    """One page of the deduplicated events of `scope` that pass `where`, after the keyset
    position `after` ((time, hex of the dedup hash) of the last row sent) and up to `until`.
    The keyset is tested before the FINAL merge (every copy of a duplicate has the same time
    and hash, so this is exact), so that only the page's rows have their properties read."""
    b = Binds()
    condition = where_condition(where, b)
    rows = final_events(scope, events or None, condition, b, keys=_keyset(after, until, b))
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


_OWN_KEYS = ('"time"', '"distinct_id"', '"$insert_id"', '"mp_processing_time_ms"')


def _spliced(row: tuple[Any, ...], time_in_ms: bool) -> bytes:
    """`_line` without parsing the properties: the stored text (orjson's output, lifted keys
    removed) is spliced after the export's own keys. Only for properties that do not mention
    those keys (`_line` handles the rest: a stored key overrides the export's)."""
    time_value, event, distinct_id, insert_id, properties, ingested_at, _ = row
    millis = epoch_ms(time_value)
    head = b'{"event":%b,"properties":{"time":%d,"distinct_id":%b,"$insert_id":%b,"mp_processing_time_ms":%d' % (
        orjson.dumps(event),
        millis if time_in_ms else millis // 1000,
        orjson.dumps(distinct_id),
        orjson.dumps(insert_id),
        epoch_ms(ingested_at),
    )
    inner = properties[1:-1].encode()
    return head + (b"," + inner if inner else b"") + b"}}\n"


def _lines(rows: list[tuple[Any, ...]], time_in_ms: bool) -> bytes:
    """A page of lines; most rows are spliced (no JSON parsing: a page costs a fraction of
    the GIL time, which the event loop serving imports and `/healthz` shares)."""
    return b"".join(
        _line(row, time_in_ms) if any(key in row[4] for key in _OWN_KEYS) else _spliced(row, time_in_ms) for row in rows
    )


async def export(ctx: QueryContext) -> StreamingResponse:
    p = ctx.params
    from_date, to_date = read_dates(p)
    check_range(from_date, to_date)
    events = p.string_list("event") or []
    where = read_expr(p, "where")  # the expression language; a bad one is a 400 naming the position
    limit = p.integer("limit", MAX_LIMIT, minimum=1, maximum=MAX_LIMIT) if p.get("limit") is not None else sys.maxsize
    time_in_ms = p.boolean("time_in_ms")
    scope = Scope(ctx.project_id, *day_range_utc(from_date, to_date, ctx.timezone))

    async def lines() -> AsyncIterator[bytes]:
        # Each page takes two short statements (its keys, then its rows), so that ingestion
        # waits for at most one of them at the warehouse (`footfall.shared.warehouse.lanes`).
        sent = 0
        after = (datetime(1970, 1, 1), "")
        while sent < limit:
            page = min(PAGE, limit - sent)
            keys = await page_keys(scope, events, after, page).run(ctx)
            if not keys:
                return
            until = (keys[-1][0], keys[-1][1])
            rows = await page_query(scope, events, after, page, where, until=until).run(ctx)
            if rows:
                # Rendered in the warehouse's threads; the next page is read only once this
                # one was sent (the server's flow control waits for a slow reader).
                yield await ctx.shape(_lines, rows, time_in_ms)
                sent += len(rows)
            if len(keys) < page:
                return
            after = until

    return StreamingResponse(lines(), media_type="application/x-ndjson")
