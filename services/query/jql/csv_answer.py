"""`format=csv`: a JQL answer (a JSON array) as CSV [gap: the layout is undocumented;
mixpanel-utils writes the text to a file as it comes].

One row per item of the final collection. An object item is flattened into columns named by
dotted paths (`properties.plan`), list elements by their index (`key.0`, `key.1`, so a
`groupBy` answer reads `key.0, …, value`); a scalar item fills one column `value`. The
header is every column in the order first met; a cell an item lacks, and `null`, are
empty; `true`/`false` and numbers are spelt as in JSON. Quoting and the formula guard are
the other reports' (`csv_response`).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from footfall.services.query.reports._common import csv_response

__all__ = ["answer_csv"]


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        if not value and path:
            out[path] = "{}"
        for key, inner in value.items():
            _flatten(inner, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list):
        if not value and path:
            out[path] = "[]"
        for i, inner in enumerate(value):
            _flatten(inner, f"{path}.{i}" if path else str(i), out)
    else:
        out[path or "value"] = _cell(value)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def answer_csv(answer_json: str) -> Response:
    """The CSV of the script's answer (the JSON text of an array)."""
    items = orjson.loads(answer_json)
    rows: list[dict[str, Any]] = []
    header: dict[str, None] = {}
    for item in items if isinstance(items, list) else [items]:
        row: dict[str, Any] = {}
        if isinstance(item, dict | list) and item:
            _flatten(item, "", row)
        else:
            row["value"] = _cell(item) if not isinstance(item, dict | list) else orjson.dumps(item).decode()
        rows.append(row)
        for column in row:
            header.setdefault(column, None)
    columns = list(header)
    return csv_response(columns, ([row.get(c, "") for c in columns] for row in rows))
