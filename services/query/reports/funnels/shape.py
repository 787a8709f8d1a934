"""`shape(rows, req)`: the `/funnels` JSON from the grouped rows of `query.build`.

Per bucket (every bucket of the range is present, empty ones with zero counts):

* `count[i]`: attempts that reached step i; `step_conv_ratio` = count[i] / count[i-1]
  (1.0 for step 0, 0.0 after an empty step), `overall_conv_ratio` = count[i] / count[0];
* `avg_time` (null for step 0) and `avg_time_from_start` (0 for step 0): mean seconds over
  the attempts that reached the step, of the time since the previous step and since step 0
  (negative differences, possible within the 2-second grace, count as 0), rounded half up;
* `goal`/`event` is the event name, or `$custom_event:<id>` with `step_label` the custom
  event's name, `custom_event: true` and `custom_event_id`;
* `analysis`: `completion` = last step count, `starting_amount` = step 0 count, `steps`,
  `worst` = 0-based index of the lowest `step_conv_ratio` among steps >= 1 (the first on
  ties; 0 for a one-step funnel) (decisions.md).

With `on`, a bucket's value is `{"$overall": [steps], "<key>": [steps], ...}` (no
`analysis`), every kept key in every bucket, keys in ranking order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from footfall.services.query.reports.funnels.request import FunnelsRequest

__all__ = ["shape", "step_rows"]


def _avg_seconds(total_ms: int, n: int) -> int:
    """round-half-up(total_ms / 1000 / n), exactly."""
    if n == 0:
        return 0
    return (2 * total_ms + 1000 * n) // (2000 * n)


class _Tally:
    """Per step of one (bucket, segment): attempts that reached it and their summed times (ms)."""

    def __init__(self, n: int) -> None:
        self.counts = [0] * n
        self.step_ms = [0] * n
        self.start_ms = [0] * n


def step_rows(req: FunnelsRequest, tally: _Tally | None) -> list[dict[str, Any]]:
    steps = req.funnel.steps
    tally = tally or _Tally(len(steps))
    counts = tally.counts
    rows = []
    for i, step in enumerate(steps):
        row: dict[str, Any] = {
            "count": counts[i],
            "avg_time": None if i == 0 else _avg_seconds(tally.step_ms[i], counts[i]),
            "avg_time_from_start": 0 if i == 0 else _avg_seconds(tally.start_ms[i], counts[i]),
            "step_conv_ratio": 1.0 if i == 0 else (counts[i] / counts[i - 1] if counts[i - 1] else 0.0),
            "overall_conv_ratio": 1.0 if i == 0 else (counts[i] / counts[0] if counts[0] else 0.0),
            "goal": step.goal,
            "event": step.goal,
            "step_label": step.label,
        }
        if step.custom_event is not None:
            row["custom_event"] = True
            row["custom_event_id"] = step.custom_event.id
        rows.append(row)
    return rows


def _analysis(rows: list[dict[str, Any]]) -> dict[str, Any]:
    worst = min(range(1, len(rows)), key=lambda i: (rows[i]["step_conv_ratio"], i)) if len(rows) > 1 else 0
    return {
        "completion": rows[-1]["count"],
        "starting_amount": rows[0]["count"],
        "steps": len(rows),
        "worst": worst,
    }


def shape(rows: Sequence[Sequence[Any]], req: FunnelsRequest) -> dict[str, Any]:
    n = len(req.funnel.steps)
    tallies: dict[tuple[str, str | None], _Tally] = {}
    entries: dict[str, int] = {}
    for bucket, segment, step, attempts, step_ms, start_ms in rows:
        key = (bucket.isoformat(), segment)
        tally = tallies.get(key)
        if tally is None:
            tally = tallies[key] = _Tally(n)
        tally.counts[step] = int(attempts)
        tally.step_ms[step] = int(step_ms)
        tally.start_ms[step] = int(start_ms)
        if segment is not None and step == 0:
            entries[segment] = entries.get(segment, 0) + int(attempts)
    dates = req.timeline.series
    data: dict[str, Any] = {}
    if req.on is None:
        for d in dates:
            steps = step_rows(req, tallies.get((d, None)))
            data[d] = {"steps": steps, "analysis": _analysis(steps)}
    else:
        keep = sorted(entries, key=lambda k: (-entries[k], k))[: req.limit]
        for d in dates:
            value = {"$overall": step_rows(req, tallies.get((d, None)))}
            for segment in keep:
                value[segment] = step_rows(req, tallies.get((d, segment)))
            data[d] = value
    return {"meta": {"dates": list(dates)}, "data": data}
