"""JQL without the warehouse: which first steps the runtime hands to SQL (`pushdown`), which
property names the warehouse reads out for the lazy `properties` (`projected_keys`), the
lazy items against plainly parsed ones, and the CSV layout of an answer."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

import pytest

from footfall.services.query.jql.csv_answer import answer_csv
from footfall.services.query.jql.engine import JqlLimits, NeedsProperties, Sandbox
from footfall.services.query.jql.source import MAX_PROJECTED, projected_keys, projection_suffices

EV = "Events({from_date: '2024-01-01', to_date: '2024-01-02'})"
PUSHED: dict[str, dict[str, Any] | None] = {
    f"{EV}.groupBy(['name', 'properties.plan'], mixpanel.reducer.count())": {
        "keys": ["name", "properties.plan"],
        "reducer": "count",
        "path": None,
        "reduce": False,
    },
    f"{EV}.groupBy(['distinct_id'], mixpanel.reducer.sum('properties.price')).filter(g => g.value > 1)": {
        "keys": ["distinct_id"],
        "reducer": "sum",
        "path": "properties.price",
        "reduce": False,
    },
    f"{EV}.reduce(mixpanel.reducer.max('properties.n'))": {
        "keys": [],
        "reducer": "max",
        "path": "properties.n",
        "reduce": True,
    },
    f"{EV}.groupByUser(['properties.plan'], mixpanel.reducer.count())": {
        "keys": ["distinct_id", "properties.plan"],
        "reducer": "count",
        "path": None,
        "reduce": False,
    },
    "People().groupBy(['properties.plan'], mixpanel.reducer.avg('properties.age'))": {
        "keys": ["properties.plan"],
        "reducer": "avg",
        "path": "properties.age",
        "reduce": False,
    },
    # Left to the engine.
    f"{EV}.groupBy(['properties.a.b'], mixpanel.reducer.count())": None,
    f"{EV}.groupBy(['name'], mixpanel.reducer.sum(e => e.properties.price))": None,
    f"{EV}.groupBy(['name'], [mixpanel.reducer.count()])": None,
    f"{EV}.groupBy([e => e.name], mixpanel.reducer.count())": None,
    f"{EV}.groupByUser(function (s, evs) {{ return (s || 0) + evs.length; }})": None,
    f"{EV}.filter(e => e.properties.plan).groupBy(['name'], mixpanel.reducer.count())": None,
    "People().groupBy(['name'], mixpanel.reducer.count())": None,
    f"join({EV}, People()).groupBy(['distinct_id'], mixpanel.reducer.count())": None,
}


def _sandbox() -> Sandbox:
    return Sandbox(JqlLimits(timeout_seconds=10, memory_mb=128))


@pytest.mark.parametrize("expr", list(PUSHED))
def test_pushdown_recognises_only_the_simple_first_steps(expr: str) -> None:
    box = _sandbox()
    try:
        box.load(f"function main() {{ return {expr}; }}", "{}")
        assert json.loads(box.plan())["grouped"] == PUSHED[expr]
    finally:
        box.close()


def test_projected_keys_are_the_spelt_out_property_names() -> None:
    script = """e => e.properties.plan === 1 && e.properties["a b"] && x.properties['c'] && e.properties [ "d" ];
      groupBy(['properties.$city', "properties.x.y"]); properties . zz; e.properties[k]; props.other"""
    assert projected_keys(script) == ("plan", "a b", "c", "d", "$city", "x", "zz")
    many = " ".join(f"e.properties.k{i}" for i in range(MAX_PROJECTED + 5))
    assert projected_keys(many) == tuple(f"k{i}" for i in range(MAX_PROJECTED))
    # Only a script whose every `properties` is one of those reads tries the projection alone.
    assert projection_suffices("e.properties.plan === 'a' && e.properties['x'] && groupBy(['properties.y'])")
    assert projection_suffices("e => e.name")
    assert not projection_suffices("e.properties.plan && Object.keys(e.properties)")
    assert not projection_suffices("e.properties[k]")
    assert not projection_suffices(many)


def _window(events: list[dict[str, Any]], keys: list[str]) -> list[tuple[str, str]]:
    """The rows `events_window` gives for `events` (what the warehouse builds, built here)."""
    rows = []
    for e in events:
        projected = {k: e["properties"][k] for k in keys if k in e["properties"]}
        head = json.dumps([e["name"], e["distinct_id"], e["time"], projected])
        rows.append((head, json.dumps(e["properties"])))
    return rows


def test_lazy_properties_answer_as_the_parsed_text() -> None:
    """The same script over items fed whole (`feed`) and lazily (`feed_events`), on random
    properties: reads of projected and other keys, `in`, keys, writes, deletes, nested objects
    changed before the full parse, JSON of the item."""
    rng = random.Random(7)
    values = [None, True, 0, 1.5, "x", "", [1, "a"], {"k": [1]}, {"d": {"e": None}}]
    events = []
    for i in range(300):
        props = {
            k: rng.choice(values) for k in rng.sample(["plan", "tags", "n", "meta", "x y", "zz"], rng.randint(0, 6))
        }
        events.append(
            {"name": f"e{i % 3}", "distinct_id": f"u{i % 7}", "time": i, "sampling_factor": 1, "properties": props}
        )
    script = """function main() { return Events({from_date: '2024-01-01', to_date: '2024-01-01'}).map(function (e) {
      var out = {plan: e.properties.plan, hp: 'plan' in e.properties, meta: e.properties.meta};
      if (out.meta && typeof out.meta === 'object') out.meta.touched = true;
      if (e.time % 2 === 0) out.has = 'tags' in e.properties;
      if (e.time % 3 === 0) { out.keys = Object.keys(e.properties); delete e.properties.n; e.properties.w = 1; }
      if (e.time % 5 === 0) out.dyn = e.properties[params.k];
      out.e = JSON.stringify(e);
      return out;
    }); }"""
    keys = projected_keys(script)
    assert set(keys) == {"plan", "meta", "n", "w"}  # written and deleted ones too
    answers = []
    for lazy in (False, True):
        box = _sandbox()
        try:
            box.load(script, json.dumps({"k": "x y"}))
            box.plan()
            if lazy:
                box.project(keys)
                box.feed_events(_window(events[:150], list(keys)))
                box.feed_events(_window(events[150:], list(keys)))
            else:
                box.feed(json.dumps(events[:150]))
                box.feed(json.dumps(events[150:]))
            answers.append(json.loads(box.finish()))
        finally:
            box.close()
    assert len(answers[0]) == 300 and answers[0] == answers[1]


def test_csv_of_an_answer() -> None:
    answer = json.dumps(
        [
            {"key": ["Purchase", "pro"], "value": 3},
            {"key": ["=cmd", None], "value": 1.5, "extra": {"a": True, "b": []}},
            7,
        ]
    )
    response = answer_csv(answer)
    assert response.media_type is not None and response.media_type.startswith("text/csv")
    rows = list(csv.reader(io.StringIO(bytes(response.body).decode())))
    assert rows == [
        ["key.0", "key.1", "value", "extra.a", "extra.b"],
        ["Purchase", "pro", "3", "", ""],
        ["'=cmd", "", "1.5", "true", "[]"],
        ["", "", "7", "", ""],
    ]


def test_a_run_fed_without_property_texts_asks_for_them() -> None:
    """Fed heads only, a script reading projected keys runs as usual; one reaching further asks
    for the texts (`NeedsProperties`), also when it catches what the runtime throws there."""
    events = [
        {"name": "a", "distinct_id": "u", "time": i, "sampling_factor": 1, "properties": {"plan": "pro", "x": i}}
        for i in range(5)
    ]
    heads = [(head,) for head, _ in _window(events, ["plan"])]
    source = "Events({from_date: '2024-01-01', to_date: '2024-01-01'})"
    scripts = {
        "projected": f"function main() {{ return {source}.filter(e => e.properties.plan === 'pro')"
        ".reduce(mixpanel.reducer.count()); }",
        "further": f"function main() {{ return {source}.map(e => e.properties.x); }}",
        "caught": f"function main() {{ return {source}.map(function (e) {{"
        " try { return Object.keys(e['prop' + 'erties']); } catch (x) { return 0; } }); }",
    }
    for name, script in scripts.items():
        box = _sandbox()
        try:
            box.load(script, "{}")
            box.plan()
            box.project(("plan",))
            if name == "projected":
                box.feed_events(heads)
                assert json.loads(box.finish()) == [5]
            else:
                with pytest.raises(NeedsProperties):
                    box.feed_events(heads)
        finally:
            box.close()
