"""Generated cohort test data: user profiles of every kind of value, random profile leaves,
behaviours and dynamic or static cohort bodies (references to earlier cohorts included), and
the loading of profiles through the real `/engage` ingestion."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.factories import EVENT_NAMES, Dataset
from tests.integration.query.report_env import ReportEnv

PROPS = ["plan", "age", "vip", "signup", "tags", "city"]


def random_profile(rng: random.Random) -> dict[str, Any]:
    candidates = {
        "plan": rng.choice(["free", "pro", "enterprise", None, 3]),
        "age": rng.choice([17, 25, 40.5, "33", "old", None]),
        "vip": rng.choice([True, False, "true", 0, None]),
        "signup": rng.choice(["2024-03-10T10:00:00", "2024-04-01", "not a date", 1710000000]),
        "tags": rng.choice([["a", "b"], ["c"], [], "a,b"]),
        "city": rng.choice(["Zürich", "Berlin", "Paris"]),
    }
    return {k: v for k, v in candidates.items() if rng.random() < 0.7}


def random_leaf(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["string", "number", "boolean", "datetime", "list"])
    name = rng.choice(PROPS)
    operator = rng.choice(["==", "!=", ">", ">=", "<", "<=", "in", "not in", "defined", "not defined"])
    operand: Any = {
        "string": rng.choice(["pro", "free", "Zürich", "a"]),
        "number": rng.choice([18, 30, 40.5, "25"]),
        "boolean": rng.choice([True, False]),
        "datetime": rng.choice(["2024-03-15", "2024-04-01T00:00:00"]),
        "list": rng.choice(["a", "c", "pro"]),
    }[kind]
    leaf = {"property": "user", "value": name, "operator": operator, "type": kind}
    if operator not in ("defined", "not defined"):
        leaf["operand"] = operand
    return leaf


def random_behaviour(rng: random.Random) -> dict[str, Any]:
    count: dict[str, Any] = {"type": rng.choice(["absolute", "absolute", "days"])}
    selector: Any = None
    roll = rng.random()
    if roll < 0.3:
        selector = 'number(properties["price"]) > 10'
    elif roll < 0.5:
        selector = {
            "property": "event",
            "value": "plan",
            "operator": rng.choice(["==", "!="]),
            "operand": "pro",
            "type": "string",
        }
    if rng.random() < 0.2:
        count["event_selectors"] = [{"event": e, "selector": None} for e in rng.sample(EVENT_NAMES[:6], 2)]
    else:
        count["event_selector"] = {"event": rng.choice(EVENT_NAMES[:6]), "selector": selector}
    behaviour: dict[str, Any] = {"count": count}
    if rng.random() < 0.8:
        behaviour["window"] = {"unit": rng.choice(["day", "week", "month"]), "value": rng.choice([1, 2, 7, 30])}
    else:
        behaviour["from_date"], behaviour["to_date"] = "2024-03-09", rng.choice(["2024-03-31", "2024-04-12"])
    return behaviour


def random_cohort(rng: random.Random, earlier: list[int]) -> dict[str, Any]:
    if rng.random() < 0.15:
        return {"name": "static", "distinct_ids": [*rng.sample([f"u{i}" for i in range(80)], 10), "ghost-1"]}
    behaviors = {f"bhvr_{k}": random_behaviour(rng) for k in range(rng.randint(0, 3))}
    leaves: list[dict[str, Any]] = [
        {
            "property": "behaviors",
            "value": key,
            "operator": rng.choice([">=", "==", "<", "!="]),
            "operand": rng.choice([0, 1, 2]),
        }
        for key in behaviors
    ]
    leaves += [random_leaf(rng) for _ in range(rng.randint(0 if leaves else 1, 2))]
    if earlier and rng.random() < 0.4:
        leaves.append({"property": "cohort", "value": rng.choice(earlier), "operator": rng.choice(["in", "not in"])})
    selector: Any = {"operator": rng.choice(["and", "or"]), "children": leaves}
    if rng.random() < 0.25 and len(leaves) > 1:
        selector = {"operator": "or", "children": [leaves[0], {"operator": "and", "children": leaves[1:]}]}
    return {"name": "dynamic", "selector": selector, "behaviors": behaviors}


def user_of(raw: dict[str, Any]) -> str:
    return str(raw["properties"].get("distinct_id", ""))


def load_profiles(env: ReportEnv, dataset: Dataset, rng: random.Random) -> dict[int, dict[str, dict[str, Any]]]:
    """Profiles for about 70% of each project's users and five ids without events, some empty,
    sent through `/engage`: project -> id -> properties."""
    profiles: dict[int, dict[str, dict[str, Any]]] = {}
    for pid, spec in dataset.projects.items():
        users = sorted({user_of(e) for e in spec.events if user_of(e)})
        chosen = [u for u in users if rng.random() < 0.7] + [f"no-events-{i}" for i in range(5)]
        profiles[pid] = {u: random_profile(rng) for u in chosen}
        updates = [
            {"$token": f"report-token-{pid}", "$distinct_id": u, "$set": p, "$ignore_time": True}
            for u, p in profiles[pid].items()
        ]
        for i in range(0, len(updates), 500):
            r = env.request(
                "POST",
                "/engage?ip=0&strict=1",
                content=json.dumps(updates[i : i + 500]),
                headers={"content-type": "application/json"},
            )
            if r.status_code != 200:
                raise AssertionError(r.text)
    return profiles
