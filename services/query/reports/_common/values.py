"""The numbers of a response: measures by `type`, zero-filled series, CSV output."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from starlette.responses import Response

__all__ = [
    "csv_cell",
    "csv_response",
    "measure",
    "segmented_values",
    "series_body",
    "series_csv",
    "series_response",
    "series_values",
    "zero_filled",
]


def measure(kind: str, events: int, users: int) -> int | float:
    """general: events; unique: distinct non-empty distinct_ids; average: events per user."""
    if kind == "general":
        return int(events)
    if kind == "unique":
        return int(users)
    return events / users if users else 0.0


def zero_filled(series: Sequence[str], cells: Mapping[str, int | float], zero: int | float) -> dict[str, int | float]:
    return {key: cells.get(key, zero) for key in series}


# A cell a spreadsheet would read as a formula (OWASP "CSV injection"): it gets a leading `'`.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A text cell that starts like a formula, prefixed with `'`; numbers are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def csv_response(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Response:
    """`format=csv`: a header row, then one row per (segment, date) (semantics §11). Every cell
    is quoted (RFC 4180: `"` doubled inside) and text cells that start with `=`, `+`, `-`, `@`,
    tab or CR are prefixed with `'`, so a spreadsheet never runs a segment name as a formula."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    writer.writerow([csv_cell(cell) for cell in header])
    writer.writerows([csv_cell(cell) for cell in row] for row in rows)
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8")


def series_csv(data: Mapping[str, Any]) -> Response:
    """CSV of a `{"data": {"series": [...], "values": {segment: {date: n}}}}` body."""
    values: Mapping[str, Mapping[str, Any]] = data["data"]["values"]
    series: Sequence[str] = data["data"]["series"]
    return csv_response(
        ("segment", "date", "value"),
        ((segment, key, cells.get(key, 0)) for segment, cells in values.items() for key in series),
    )


def series_body(series: Sequence[str], values: dict[str, dict[str, int | float]]) -> dict[str, Any]:
    """The breakdown reports' JSON: `{"data": {"series": [...], "values": {...}}, "legend_size": n}`."""
    return {"data": {"series": list(series), "values": values}, "legend_size": len(values)}


def series_response(body: dict[str, Any], fmt: str) -> Any:
    """A breakdown body as `format` asks: the JSON itself, or its CSV (`series_csv`)."""
    return series_csv(body) if fmt == "csv" else body


def series_values(
    rows: Iterable[Sequence[Any]], kind: str, series: Sequence[str], names: Sequence[str]
) -> dict[str, dict[str, int | float]]:
    """`values` of a breakdown keyed by event name, zero-filled, from (name, bucket, n, u) rows."""
    cells: dict[str, dict[str, int | float]] = {name: {} for name in names}
    for name, bucket, n, u in rows:
        if name in cells:
            cells[name][bucket] = measure(kind, n, u)
    zero: int | float = 0.0 if kind == "average" else 0
    return {name: zero_filled(series, cells[name], zero) for name in names}


def segmented_values(
    rows: Iterable[Sequence[Any]], kind: str, series: Sequence[str]
) -> dict[str, dict[str, int | float]]:
    """`values` from `segmented()` rows, in rank order, zero-filled."""
    zero: int | float = 0.0 if kind == "average" else 0
    out: dict[str, dict[str, int | float]] = {}
    for segment, _, _, cells in rows:
        out[segment] = zero_filled(series, {bucket: measure(kind, n, u) for bucket, n, u in cells}, zero)
    return out
