"""The /engage answer: `{page, page_size, results, session_id, status, total}` with results
`{"$distinct_id", "$properties"}` in profile-id order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from footfall.services.query.reports.engage.request import EngageRequest

__all__ = ["answer", "result"]


def _properties(text: str) -> dict[str, Any]:
    """The stored JSON object, keys in stored order; anything unreadable is no properties.
    Read with the standard library, which keeps integers beyond 64 bits exact (orjson would
    make them floats); a page is at most 1000 profiles, so its speed does not matter here."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def result(profile_id: str, properties: str, output: Sequence[str] | None) -> dict[str, Any]:
    """One result; `output` (output_properties) keeps only those keys, in its order, that the profile has."""
    props = _properties(properties)
    if output is not None:
        props = {name: props[name] for name in output if name in props}
    return {"$distinct_id": profile_id, "$properties": props}


def answer(req: EngageRequest, session_id: str, total: int, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "page": req.page,
        "page_size": req.page_size,
        "results": results,
        "session_id": session_id,
        "status": "ok",
        "total": total,
    }
