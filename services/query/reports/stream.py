"""`/stream/query`: the activity feed of some users (semantics §1.10).

* `distinct_ids` (required): a JSON array; numbers are compared as their text, as
  `/import` stores an integer id. Here the empty string is an id like any other: only
  the listed ids are returned.
* `from_date`, `to_date` (required): inclusive local days of the project's zone.
* Events ascending by time [gap: the interface does not say], ties by event name,
  distinct_id, `$insert_id`; each `{"event", "properties"}` where properties are the
  stored ones plus `time` (epoch seconds), `distinct_id` and `$insert_id`.
* Deduplicated with FINAL: the latest copy of a duplicate is the one shown.
* At most `MAX_EVENTS` events; more is a 400 asking for a narrower range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from footfall.services.query.endpoints import QueryContext
from footfall.services.query.params import Params
from footfall.services.query.reports._common import (
    Binds,
    Query,
    Timeline,
    final_events,
    read_dates,
    scope_of,
    timeline_for_dates,
)
from footfall.shared.errors import ParamError
from footfall.shared.sql import sql

__all__ = ["MAX_EVENTS", "StreamRequest", "build", "parse_request", "shape", "stream"]

MAX_EVENTS = 100_000
MAX_IDS = 10_000


@dataclass(frozen=True)
class StreamRequest:
    project_id: int
    timeline: Timeline
    distinct_ids: tuple[str, ...]


def parse_request(p: Params, project_id: int, timezone: str) -> StreamRequest:
    ids = p.json_list("distinct_ids", required=True)
    if ids is None:
        raise AssertionError("invariant: ids is not None")
    if len(ids) > MAX_IDS:
        raise ParamError(f"Error in distinct_ids: at most {MAX_IDS} ids")
    if not all(isinstance(i, str | int | float) and not isinstance(i, bool) for i in ids):
        raise ParamError("Error in distinct_ids: must be a JSON array of strings or numbers")
    texts = tuple(dict.fromkeys(i if isinstance(i, str) else _number_text(i) for i in ids))
    return StreamRequest(project_id, timeline_for_dates(*read_dates(p), timezone), texts)


def _number_text(value: int | float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def build(req: StreamRequest) -> Query:
    b = Binds()
    users = sql("distinct_id IN {}", b.add(list(req.distinct_ids), "Array(String)"))
    text = sql(
        "SELECT event, toUnixTimestamp64Milli(time) AS ms, distinct_id, insert_id, properties FROM {} "
        "ORDER BY ms, event, distinct_id, insert_id LIMIT {}",
        final_events(scope_of(req.project_id, req.timeline), None, None, b, keys=users),
        b.add(MAX_EVENTS + 1, "UInt32"),
    )
    return Query(text, b)


def shape(rows: list[tuple[Any, ...]], req: StreamRequest) -> dict[str, Any]:
    if len(rows) > MAX_EVENTS:
        raise ParamError(f"more than {MAX_EVENTS} events: ask for fewer distinct_ids or a shorter range")
    events = []
    for event, ms, distinct_id, insert_id, properties in rows:
        props = orjson.loads(properties)
        props.update({"time": int(ms) // 1000, "distinct_id": distinct_id, "$insert_id": insert_id})
        events.append({"event": event, "properties": props})
    return {"status": "ok", "results": {"events": events}}


async def stream(ctx: QueryContext) -> dict[str, Any]:
    req = parse_request(ctx.params, ctx.project_id, ctx.timezone)
    if not req.distinct_ids:
        return {"status": "ok", "results": {"events": []}}
    return shape(await build(req).run(ctx), req)
