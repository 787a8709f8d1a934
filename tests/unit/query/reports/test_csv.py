"""`format=csv` (issue 15): every cell quoted (RFC 4180) and text cells that a spreadsheet
would run as a formula prefixed with `'`; read back with the stdlib parser."""

from __future__ import annotations

import csv
import io

from footfall.services.query.reports._common import series_csv

DANGEROUS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
HARMLESS = ["plain", 'with "quotes", commas', "line\nbreak", "", "a=b"]


def test_cells_are_quoted_and_formulas_defused() -> None:
    segments = DANGEROUS + HARMLESS
    body = {"data": {"series": ["2024-01-01"], "values": {s: {"2024-01-01": -5} for s in segments}}}
    text = series_csv(body).body.decode()
    lines = text.split("\r\n")
    assert lines[0] == '"segment","date","value"' and lines[-1] == ""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == ["segment", "date", "value"]
    got = {row[0]: row for row in rows[1:]}
    assert len(got) == len(segments)
    for s in DANGEROUS:
        assert got["'" + s] == ["'" + s, "2024-01-01", "-5"]  # numbers are not prefixed
    for s in HARMLESS:
        assert got[s] == [s, "2024-01-01", "-5"]
    for line in text.split("\r\n")[1:-1]:
        if line.startswith('"'):
            assert not line.startswith(('"=', '"+', '"-', '"@', '"\t', '"\r'))
