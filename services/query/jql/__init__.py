"""`POST /api/query/jql` (≡ `/api/2.0/jql`): custom queries in JavaScript (semantics.md §5).

A request runs its `script` in a fresh V8 isolate (`engine.Sandbox`, limits from
`JqlLimits`): the script's top level, then `main()`, which returns a collection
description (`runtime.js`). A recognised simple first step (`groupBy`/`reduce` with one
built-in reducer of plain paths, runtime.js `pushdown`) is computed by the warehouse in one
statement. Otherwise the source is read from the warehouse in windows (Events: the next
one read while the isolate works on this one) or pages, with the dates, event names and
selectors pushed down (`source`), each fed to the isolate, where the streaming steps
(filter, map, flatten) run per chunk and the first grouping step (groupBy, groupByUser,
reduce, sort, applyGroupLimits) accumulates; the steps after it run on its output. The
answer is the JSON array of the final collection, or its CSV with `format=csv`
(`csv_answer`).

Form members: `script` (required: "Missing required parameter: script"), `params`
(JSON, the script's global `params`; default `{}`). Every call into the isolate and
every page runs off the event loop (worker threads and the warehouse's lane).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import orjson
from starlette.responses import Response

from footfall.services.query.endpoints import Handler, QueryContext
from footfall.services.query.jql.csv_answer import answer_csv
from footfall.services.query.jql.engine import JqlLimitError, JqlLimits, JqlScriptError, NeedsProperties, Sandbox
from footfall.services.query.jql.source import (
    PAGE,
    EventsSource,
    JoinSource,
    PeopleSource,
    Run,
    event_windows,
    merge_pushed,
    parse_pushed,
    parse_source,
    projected_keys,
    projection_suffices,
    pushed_query,
    read_events,
    read_people,
)
from footfall.services.query.reports._common import Query, read_format
from footfall.shared.errors import ParamError

__all__ = ["JqlLimitError", "JqlLimits", "JqlScriptError", "execute", "jql_handler"]

T = TypeVar("T")


def _params_text(ctx: QueryContext) -> str:
    text = ctx.params.get("params")
    if text is None:
        return "{}"
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ParamError("Error in params: must be JSON text") from None
    return text


def _chunk(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


async def _join_items(ctx: QueryContext, src: JoinSource, run: Run) -> AsyncIterator[str]:
    """The join's items in distinct_id order (then time): one merge of the events read by user
    and the profiles read by id; profiles without events for right and full joins, events
    without a profile for left and full joins."""
    tz, pid = ctx.timezone, ctx.project_id
    events = _rows(read_events(run, src.events, pid, tz))
    people = _rows(read_people(run, src.people, pid, tz))
    e = await anext(events, None)
    p = await anext(people, None)
    keep_events, keep_users = src.type in ("full", "left"), src.type in ("full", "right")
    out: list[str] = []
    while e is not None or p is not None:
        if e is not None and (p is None or e[1] < p[1]):
            if keep_events:
                out.append('{"distinct_id":' + orjson.dumps(e[1]).decode() + ',"event":' + e[0] + "}")
            e = await anext(events, None)
        elif p is not None and (e is None or p[1] < e[1]):
            if keep_users:
                out.append('{"distinct_id":' + orjson.dumps(p[1]).decode() + ',"user":' + p[0] + "}")
            p = await anext(people, None)
        else:
            if e is None or p is None:
                raise AssertionError("invariant: the ids are equal, so both rows exist")
            user_id, user = p[1], p[0]
            head = '{"distinct_id":' + orjson.dumps(user_id).decode() + ',"event":'
            while e is not None and e[1] == user_id:
                out.append(head + e[0] + ',"user":' + user + "}")
                e = await anext(events, None)
                if len(out) >= PAGE:
                    yield _chunk(out)
                    out = []
            p = await anext(people, None)
        if len(out) >= PAGE:
            yield _chunk(out)
            out = []
    if out:
        yield _chunk(out)


async def _rows(pages: AsyncIterator[list[tuple[Any, ...]]]) -> AsyncIterator[tuple[Any, ...]]:
    async for page in pages:
        for row in page:
            yield row


async def _ahead(items: AsyncIterator[T]) -> AsyncIterator[T]:
    """`items`, with the next one already being produced while the consumer works on this one
    (at most two held at a time)."""
    pending: asyncio.Task[T | None] = asyncio.ensure_future(anext(items, None))
    try:
        while True:
            item = await pending
            if item is None:
                return
            pending = asyncio.ensure_future(anext(items, None))
            yield item
    finally:
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending


async def _chunks(ctx: QueryContext, src: PeopleSource | JoinSource) -> AsyncIterator[str]:
    async def run(query: Query) -> list[tuple[Any, ...]]:
        return await query.run(ctx)

    if isinstance(src, PeopleSource):
        async for page in read_people(run, src, ctx.project_id, ctx.timezone):
            yield _chunk([row[0] for row in page])
    else:
        async for chunk in _join_items(ctx, src, run):
            yield chunk


async def execute(ctx: QueryContext, limits: JqlLimits) -> str:
    """The JSON text of the script's answer. A script over Events with a grouping step whose
    property reads are all spelt out (`projection_suffices`) runs first on the projected
    values alone, without the stored property texts (measured, reading and handing over
    the texts is a third of the work); should it reach further (`NeedsProperties`), it runs
    again, in a fresh isolate and within the same deadline, with them."""
    started = time.monotonic()
    script = ctx.params.required("script")
    params_text = _params_text(ctx)
    try:
        return await _attempt(ctx, limits, started, script, params_text, with_properties=False)
    except NeedsProperties:
        return await _attempt(ctx, limits, started, script, params_text, with_properties=True)


async def _attempt(
    ctx: QueryContext, limits: JqlLimits, started: float, script: str, params_text: str, *, with_properties: bool
) -> str:
    # Every call into one isolate is made from one thread of its own: mini-racer crashed
    # (SIGSEGV on close) when the calls of one context came from several threads.
    thread = ThreadPoolExecutor(1, thread_name_prefix="jql")
    loop = asyncio.get_running_loop()

    def call(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return loop.run_in_executor(thread, fn, *args)

    async def run(query: Query) -> list[tuple[Any, ...]]:
        return await query.run(ctx)

    try:
        sandbox = await call(Sandbox, limits, started)
        try:
            await call(sandbox.load, script, params_text)
            plan = orjson.loads(await call(sandbox.plan))
            src = parse_source(plan["source"])
            pushed = parse_pushed(plan.get("grouped"))
            answer = None
            if pushed is not None and isinstance(src, EventsSource | PeopleSource):
                # A recognised first step (runtime.js `pushdown`): computed by the warehouse.
                rows = await pushed_query(src, ctx.project_id, ctx.timezone, pushed).run(ctx)
                answer = await ctx.shape(merge_pushed, rows, pushed)
            if answer is not None:
                sandbox.remaining()
                await call(sandbox.grouped, answer)
            elif isinstance(src, EventsSource):
                keys = projected_keys(script)
                await call(sandbox.project, keys)
                texts = with_properties or not (plan.get("grouping") and projection_suffices(script))
                ordered = plan.get("ordered", True)
                # The next window is read while the isolate works on this one.
                windows = event_windows(run, src, ctx.project_id, ctx.timezone, keys, ordered, with_properties=texts)
                async for rows in _ahead(windows):
                    sandbox.remaining()
                    await call(sandbox.feed_events, rows)
            else:
                async for chunk in _chunks(ctx, src):
                    sandbox.remaining()
                    await call(sandbox.feed, chunk)
            return await call(sandbox.finish)
        finally:
            await call(sandbox.close)
    finally:
        thread.shutdown(wait=False)


def jql_handler(limits: JqlLimits) -> Handler:
    """The `/jql` report handler under `limits`."""

    async def jql(ctx: QueryContext) -> Response:
        fmt = read_format(ctx.params)
        answer = await execute(ctx, limits)
        if fmt == "csv":
            return await ctx.shape(answer_csv, answer)
        return Response(answer, media_type="application/json")

    return jql
