"""Cohort definitions (`footfall.shared.cohorts.definitions`, semantics-2.md §13.1–13.3).

Hand-written cases for every rule (each invalid body names its member), the canonical form, PATCH
and delete, then a Hypothesis agreement test with the independent reference
(`tests/oracle/cohorts.py`): on random bodies and patches around the rules, both accept or both
refuse, accepted ones have the same canonical form, and refusals name the same member.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from footfall.shared.cohorts import (
    MAX_BEHAVIORS,
    MAX_DEPTH,
    MAX_NODES,
    CohortDefinition,
    CohortDefinitionError,
    apply_patch,
    check_delete,
    parse_cohort,
    parse_raw_definition,
)
from footfall.shared.errors import ParamError
from tests.oracle import cohorts as oracle

PURCHASE = {
    "count": {
        "event_selector": {"event": "Purchase", "selector": 'number(properties["amount"]) > 50'},
        "type": "absolute",
    },
    "window": {"unit": "day", "value": 30},
}
DYNAMIC: dict[str, Any] = {
    "name": "Big spenders",
    "selector": {
        "operator": "and",
        "children": [
            {"property": "behaviors", "value": "bhvr_0", "operator": ">=", "operand": 3},
            {"property": "user", "value": "plan", "operator": "==", "operand": "pro", "type": "string"},
        ],
    },
    "behaviors": {"bhvr_0": PURCHASE},
}
STATIC: dict[str, Any] = {"name": "Imported", "distinct_ids": ["u2", "u1", "u2", "", 7]}


def parse(body: Any, existing: dict[int, CohortDefinition] | None = None, cohort_id: int | None = None) -> Any:
    return parse_cohort(body, existing=existing or {}, cohort_id=cohort_id)


def refused(body: Any, existing: dict[int, CohortDefinition] | None = None, cohort_id: int | None = None) -> Any:
    with pytest.raises(CohortDefinitionError) as caught:
        parse(body, existing, cohort_id)
    assert isinstance(caught.value, ParamError) and caught.value.status == 400
    return caught.value


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out.update(changes)
    return out


def leaf(**members: Any) -> dict[str, Any]:
    return {"property": "user", "value": "plan", "operator": "==", "operand": "pro", **members}


def tree(*children: Any) -> dict[str, Any]:
    return {"operator": "and", "children": list(children)}


def chain(n: int) -> dict[int, CohortDefinition]:
    """Cohorts 1..n: 1 static, k references k-1 (cohort n's references nest n-1 deep)."""
    out = {1: parse({"name": "c1", "distinct_ids": ["a"]})}
    for k in range(2, n + 1):
        out[k] = parse({"name": f"c{k}", "selector": tree(cohort_leaf(k - 1))}, out, k)
    return out


def cohort_leaf(ref: Any, operator: str = "in") -> dict[str, Any]:
    return {"property": "cohort", "value": ref, "operator": operator}


# ------------------------------------------------------------------------------------ canonical form
def test_dynamic_canonical_form() -> None:
    cohort = parse(DYNAMIC)
    assert cohort.canonical() == {
        "name": "Big spenders",
        "description": "",
        "is_visible": 1,
        "is_static": False,
        "selector": DYNAMIC["selector"],
        "behaviors": {"bhvr_0": PURCHASE},
    }
    assert parse(cohort.canonical()) == cohort  # read-only is_static is ignored
    assert CohortDefinition.from_canonical(cohort.canonical()) == cohort


def test_static_canonical_form_sorts_dedupes_and_drops_empty_ids() -> None:
    cohort = parse(STATIC)
    assert cohort.canonical() == {
        "name": "Imported",
        "description": "",
        "is_visible": 1,
        "is_static": True,
        "distinct_ids": ["7", "u1", "u2"],
    }
    assert parse(cohort.canonical()) == cohort
    assert CohortDefinition.from_canonical(cohort.canonical()) == cohort
    assert parse({"name": "empty", "distinct_ids": []}).distinct_ids == ()


def test_leaves_are_normalised() -> None:
    body = with_(
        DYNAMIC,
        selector=tree(
            {"property": "user", "value": "plan", "operator": "defined", "operand": "ignored"},
            {"property": "user", "value": "age", "operator": ">", "operand": "50", "type": "number", "extra": 1},
            cohort_leaf(1, "not in"),
            {"property": "behaviors", "value": "bhvr_0", "operator": "==", "operand": 0, "x": 2},
        ),
    )
    cohort = parse(body, {1: parse(STATIC)})
    assert cohort.selector == tree(
        {"property": "user", "value": "plan", "operator": "defined", "type": "string"},
        {"property": "user", "value": "age", "operator": ">", "operand": "50", "type": "number"},
        cohort_leaf(1, "not in"),
        {"property": "behaviors", "value": "bhvr_0", "operator": "==", "operand": 0},
    )
    assert cohort.references() == {1}


def test_metadata_defaults_and_read_only_members() -> None:
    cohort = parse(
        with_(STATIC, is_visible=False, description=None, id=9, project_id=4, created="x", count=5, is_static=False)
    )
    assert (cohort.description, cohort.is_visible, cohort.is_static) == ("", 0, True)
    assert parse(with_(STATIC, is_visible=True)).is_visible == 1
    assert parse(with_(STATIC, is_visible=0)).is_visible == 0
    assert parse(with_(STATIC, data_group_id=None, name="x" * 255, description="d" * 1000)).name == "x" * 255


def test_engage_list_form_of_behaviours() -> None:
    body = {
        "name": "listed",
        "selector": 'behaviors["buys"] >= 2 and user["plan"] == "pro"',
        "behaviors": [
            {
                "name": "buys",
                "window": "30d",
                "event_selectors": [{"event": "Purchase"}, {"event": "Upgrade", "selector": 'properties["x"] == 1'}],
            }
        ],
    }
    cohort = parse(body)
    assert cohort.selector == body["selector"]  # kept verbatim
    assert cohort.definition()["behaviors"] == {
        "buys": {
            "count": {
                "event_selectors": [
                    {"event": "Purchase", "selector": None},
                    {"event": "Upgrade", "selector": 'properties["x"] == 1'},
                ],
                "type": "absolute",
            },
            "window": {"unit": "day", "value": 30},
        }
    }
    assert parse(cohort.canonical()) == cohort


def test_dates_event_tree_and_days_type() -> None:
    entry = {
        "count": {
            "event_selector": {
                "event": "Login",
                "selector": {
                    "operator": "or",
                    "children": [{"property": "event", "value": "os", "operator": "==", "operand": "ios"}],
                },
            },
            "type": "days",
        },
        "from_date": "2024-02-01",
        "to_date": "2024-02-29",
    }
    cohort = parse({"name": "d", "selector": 'behaviors["b"] > 1', "behaviors": {"b": entry}})
    canonical = cohort.definition()["behaviors"]["b"]
    assert canonical["count"]["event_selector"]["selector"]["children"][0]["type"] == "string"
    assert (canonical["from_date"], canonical["to_date"], canonical["count"]["type"]) == (
        "2024-02-01",
        "2024-02-29",
        "days",
    )
    profile_only = parse({"name": "p", "selector": tree(leaf()), "behaviors": {}})
    assert profile_only.behaviors == {}


# ------------------------------------------------------------------------------------- invalid bodies
INVALID: list[tuple[str, Any, str]] = [
    ("not-object", [1], "body"),
    ("no-name", {"distinct_ids": []}, "name"),
    ("empty-name", with_(STATIC, name=""), "name"),
    ("long-name", with_(STATIC, name="x" * 256), "name"),
    ("name-number", with_(STATIC, name=5), "name"),
    ("long-description", with_(STATIC, description="d" * 1001), "description"),
    ("description-number", with_(STATIC, description=3), "description"),
    ("visible-2", with_(STATIC, is_visible=2), "is_visible"),
    ("visible-string", with_(STATIC, is_visible="1"), "is_visible"),
    ("group", with_(STATIC, data_group_id=3), "data_group_id"),
    ("add-at-create", with_(STATIC, add_distinct_ids=["x"]), "add_distinct_ids"),
    ("remove-at-create", with_(STATIC, remove_distinct_ids=["x"]), "remove_distinct_ids"),
    ("no-definition", {"name": "x"}, "selector"),
    ("both-kinds", with_(DYNAMIC, distinct_ids=["a"]), "distinct_ids"),
    ("behaviors-alone", {"name": "x", "behaviors": {"bhvr_0": PURCHASE}}, "selector"),
    ("ids-not-list", with_(STATIC, distinct_ids="u1"), "distinct_ids"),
    ("id-bool", with_(STATIC, distinct_ids=["a", True]), "distinct_ids[1]"),
    ("id-float", with_(STATIC, distinct_ids=[1.5]), "distinct_ids[0]"),
    ("id-too-long", with_(STATIC, distinct_ids=["x" * 256]), "distinct_ids[0]"),
    ("behaviors-type", with_(DYNAMIC, behaviors="b"), "behaviors"),
    (
        "too-many-behaviors",
        with_(DYNAMIC, behaviors={f"b{i}": PURCHASE for i in range(MAX_BEHAVIORS + 1)}),
        "behaviors",
    ),
    ("bad-key", with_(DYNAMIC, behaviors={"bad key": PURCHASE}), "behaviors.bad key"),
    ("long-key", with_(DYNAMIC, behaviors={"k" * 65: PURCHASE}), "behaviors." + "k" * 65),
    ("entry-not-object", with_(DYNAMIC, behaviors={"bhvr_0": 3}), "behaviors.bhvr_0"),
    ("no-count", with_(DYNAMIC, behaviors={"bhvr_0": {"window": PURCHASE["window"]}}), "behaviors.bhvr_0.count"),
    (
        "aggregation",
        with_(
            DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {**PURCHASE["count"], "aggregationOperator": "sum"}}}
        ),
        "behaviors.bhvr_0.count.aggregationOperator",
    ),
    (
        "count-property",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {**PURCHASE["count"], "property": "amount"}}}),
        "behaviors.bhvr_0.count.property",
    ),
    (
        "count-type-day",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {**PURCHASE["count"], "type": "day"}}}),
        "behaviors.bhvr_0.count.type",
    ),
    (
        "no-event-selector",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {"type": "absolute"}}}),
        "behaviors.bhvr_0.count.event_selector",
    ),
    (
        "both-event-selectors",
        with_(
            DYNAMIC,
            behaviors={
                "bhvr_0": {
                    **PURCHASE,
                    "count": {"event_selector": {"event": "A"}, "event_selectors": [{"event": "B"}]},
                }
            },
        ),
        "behaviors.bhvr_0.count.event_selector",
    ),
    (
        "empty-event-selectors",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selectors": []}}}),
        "behaviors.bhvr_0.count.event_selectors",
    ),
    (
        "empty-event",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": ""}}}}),
        "behaviors.bhvr_0.count.event_selector.event",
    ),
    (
        "second-selector-event",
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selectors": [{"event": "A"}, {"event": None}]}}},
        ),
        "behaviors.bhvr_0.count.event_selectors[1].event",
    ),
    (
        "event-selector-syntax",
        with_(
            DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": "1 +"}}}}
        ),
        "behaviors.bhvr_0.count.event_selector.selector",
    ),
    (
        "event-selector-user",
        with_(
            DYNAMIC,
            behaviors={
                "bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": 'user["x"] == 1'}}}
            },
        ),
        "behaviors.bhvr_0.count.event_selector.selector",
    ),
    (
        "event-selector-number",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": 5}}}}),
        "behaviors.bhvr_0.count.event_selector.selector",
    ),
    (
        "event-tree-user-leaf",
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": tree(leaf())}}}},
        ),
        "behaviors.bhvr_0.count.event_selector.selector.children[0].property",
    ),
    ("no-time", with_(DYNAMIC, behaviors={"bhvr_0": {"count": PURCHASE["count"]}}), "behaviors.bhvr_0.window"),
    (
        "window-and-dates",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "from_date": "2024-01-01", "to_date": "2024-01-02"}}),
        "behaviors.bhvr_0",
    ),
    (
        "window-unit",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "window": {"unit": "year", "value": 1}}}),
        "behaviors.bhvr_0.window.unit",
    ),
    (
        "window-zero",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "window": {"unit": "day", "value": 0}}}),
        "behaviors.bhvr_0.window.value",
    ),
    (
        "window-bool",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "window": {"unit": "day", "value": True}}}),
        "behaviors.bhvr_0.window.value",
    ),
    (
        "window-string",
        with_(DYNAMIC, behaviors={"bhvr_0": {**PURCHASE, "window": "30d"}}),
        "behaviors.bhvr_0.window",
    ),
    (
        "bad-from-date",
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {"count": PURCHASE["count"], "from_date": "2024-02-30", "to_date": "2024-03-01"}},
        ),
        "behaviors.bhvr_0.from_date",
    ),
    (
        "missing-to-date",
        with_(DYNAMIC, behaviors={"bhvr_0": {"count": PURCHASE["count"], "from_date": "2024-02-01"}}),
        "behaviors.bhvr_0.to_date",
    ),
    (
        "reversed-dates",
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {"count": PURCHASE["count"], "from_date": "2024-03-02", "to_date": "2024-03-01"}},
        ),
        "behaviors.bhvr_0.from_date",
    ),
    (
        "short-date",
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {"count": PURCHASE["count"], "from_date": "2024-3-1", "to_date": "2024-03-01"}},
        ),
        "behaviors.bhvr_0.from_date",
    ),
    ("list-item", {"name": "x", "selector": tree(leaf()), "behaviors": [3]}, "behaviors[0]"),
    (
        "list-name",
        {
            "name": "x",
            "selector": tree(leaf()),
            "behaviors": [{"name": "a b", "window": "1d", "event_selectors": [{"event": "A"}]}],
        },
        "behaviors[0].name",
    ),
    (
        "list-duplicate",
        {
            "name": "x",
            "selector": tree(leaf()),
            "behaviors": [{"name": "a", "window": "1d", "event_selectors": [{"event": "A"}]}] * 2,
        },
        "behaviors[1].name",
    ),
    (
        "list-window",
        {
            "name": "x",
            "selector": tree(leaf()),
            "behaviors": [{"name": "a", "window": "0d", "event_selectors": [{"event": "A"}]}],
        },
        "behaviors[0].window",
    ),
    (
        "list-window-weeks",
        {
            "name": "x",
            "selector": tree(leaf()),
            "behaviors": [{"name": "a", "window": "2w", "event_selectors": [{"event": "A"}]}],
        },
        "behaviors[0].window",
    ),
    (
        "list-no-selectors",
        {"name": "x", "selector": tree(leaf()), "behaviors": [{"name": "a", "window": "1d", "event_selectors": []}]},
        "behaviors[0].event_selectors",
    ),
    (
        "list-selector-event",
        {
            "name": "x",
            "selector": tree(leaf()),
            "behaviors": [{"name": "a", "window": "1d", "event_selectors": [{"event": ""}]}],
        },
        "behaviors[0].event_selectors[0].event",
    ),
    ("selector-type", with_(DYNAMIC, selector=5), "selector"),
    ("selector-empty-text", with_(DYNAMIC, selector=""), "selector"),
    ("selector-syntax", with_(DYNAMIC, selector='user["plan"] =='), "selector"),
    ("selector-undefined-behaviour", with_(DYNAMIC, selector='behaviors["nope"] > 1'), "selector"),
    ("selector-event-accessor", with_(DYNAMIC, selector='event["x"] == 1'), "selector"),
    ("node-not-object", with_(DYNAMIC, selector=tree(leaf(), "x")), "selector.children[1]"),
    ("combinator-operator", with_(DYNAMIC, selector={"operator": "xor", "children": [leaf()]}), "selector.operator"),
    ("combinator-empty", with_(DYNAMIC, selector={"operator": "or", "children": []}), "selector.children"),
    ("combinator-no-children", with_(DYNAMIC, selector={"operator": "or"}), "selector.children"),
    ("unknown-kind", with_(DYNAMIC, selector=tree(leaf(property="event"))), "selector.children[0].property"),
    (
        "undefined-behaviour-leaf",
        with_(DYNAMIC, selector=tree({"property": "behaviors", "value": "b9", "operator": ">", "operand": 1})),
        "selector.children[0].value",
    ),
    (
        "behaviour-operator",
        with_(DYNAMIC, selector=tree({"property": "behaviors", "value": "bhvr_0", "operator": "in", "operand": 1})),
        "selector.children[0].operator",
    ),
    (
        "behaviour-negative",
        with_(DYNAMIC, selector=tree({"property": "behaviors", "value": "bhvr_0", "operator": ">", "operand": -1})),
        "selector.children[0].operand",
    ),
    (
        "behaviour-float",
        with_(DYNAMIC, selector=tree({"property": "behaviors", "value": "bhvr_0", "operator": ">", "operand": 3.0})),
        "selector.children[0].operand",
    ),
    ("user-name", with_(DYNAMIC, selector=tree(leaf(value=""))), "selector.children[0].value"),
    ("user-operator", with_(DYNAMIC, selector=tree(leaf(operator="~"))), "selector.children[0].operator"),
    ("user-type", with_(DYNAMIC, selector=tree(leaf(type="date"))), "selector.children[0].type"),
    (
        "user-no-operand",
        with_(DYNAMIC, selector=tree({"property": "user", "value": "plan", "operator": "=="})),
        "selector.children[0].operand",
    ),
    (
        "number-operand",
        with_(DYNAMIC, selector=tree(leaf(type="number", operand="abc"))),
        "selector.children[0].operand",
    ),
    (
        "number-operand-bool",
        with_(DYNAMIC, selector=tree(leaf(type="number", operand=True))),
        "selector.children[0].operand",
    ),
    (
        "number-operand-inf",
        with_(DYNAMIC, selector=tree(leaf(type="number", operand="1e400"))),
        "selector.children[0].operand",
    ),
    (
        "boolean-operand",
        with_(DYNAMIC, selector=tree(leaf(type="boolean", operand="true"))),
        "selector.children[0].operand",
    ),
    (
        "datetime-operand",
        with_(DYNAMIC, selector=tree(leaf(type="datetime", operand="yesterday"))),
        "selector.children[0].operand",
    ),
    (
        "datetime-out-of-range",
        with_(DYNAMIC, selector=tree(leaf(type="datetime", operand="2400-01-01"))),
        "selector.children[0].operand",
    ),
    ("cohort-id-type", with_(DYNAMIC, selector=tree(cohort_leaf("1"))), "selector.children[0].value"),
    ("cohort-operator", with_(DYNAMIC, selector=tree(cohort_leaf(1, "=="))), "selector.children[0].operator"),
    ("unknown-cohort", with_(DYNAMIC, selector=tree(cohort_leaf(77))), "selector.children[0].value"),
]


@pytest.mark.parametrize(("body", "member"), [(b, m) for _, b, m in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_bodies_name_their_member(body: Any, member: str) -> None:
    error = refused(body, {1: parse(STATIC)})
    assert error.member == member
    assert error.message.startswith(f"{member}: ")
    # the reference agrees on the member
    existing = {1: oracle.parse_cohort(STATIC, cohort_id=1)}
    expected = oracle.parse_cohort(body, existing=existing)
    assert isinstance(expected, oracle.CohortError) and expected.member == member


def test_expression_errors_carry_their_position() -> None:
    error = refused(with_(DYNAMIC, selector='user["plan"] == "pro" and )'))
    assert error.position == 26 and "position 26" in error.message
    error = refused(
        with_(
            DYNAMIC,
            behaviors={"bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": "nosuch(1)"}}}},
        )
    )
    assert error.message.startswith("behaviors.bhvr_0.count.event_selector.selector: invalid expression at position 0")
    error = refused(with_(DYNAMIC, selector='user["x"] == 1 and behaviors["zz"] > 0'))
    assert error.position == 19 and "zz" in error.message


def test_valid_operands() -> None:
    for kind, operand in [
        ("number", 5),
        ("number", "-2.5e3"),
        ("number", ".5"),
        ("datetime", "2024-01-01"),
        ("datetime", "2024-01-01T10:00:00+05:30"),
        ("datetime", 1_700_000_000),
        ("datetime", 1_700_000_000_000),
        ("boolean", False),
        ("string", None),
        ("list", [1, "a"]),
    ]:
        cohort = parse(with_(DYNAMIC, selector=tree(leaf(type=kind, operand=operand))))
        assert cohort.selector["children"][0]["operand"] == operand  # type: ignore[index]


# ---------------------------------------------------------------------------------------------- limits
def test_node_limit_counts_selector_and_event_trees() -> None:
    flat = {"operator": "or", "children": [leaf()] * (MAX_NODES - 1)}  # exactly MAX_NODES nodes
    assert parse(with_(DYNAMIC, selector=flat))
    over = {"operator": "or", "children": [leaf()] * MAX_NODES}
    assert refused(with_(DYNAMIC, selector=over)).member == "selector"
    event_leaf = {"property": "event", "value": "x", "operator": "defined"}
    event_tree = {"operator": "and", "children": [event_leaf] * 9}  # 10 nodes
    behaviors = {
        "bhvr_0": {**PURCHASE, "count": {"event_selector": {"event": "A", "selector": event_tree}}},
    }
    selector = {"operator": "or", "children": [leaf()] * (MAX_NODES - 10 - 1)}  # 190 nodes: total 200
    assert parse(with_(DYNAMIC, behaviors=behaviors, selector=selector))
    selector = {"operator": "or", "children": [leaf()] * (MAX_NODES - 10)}  # total 201
    assert refused(with_(DYNAMIC, behaviors=behaviors, selector=selector)).member == "selector"


def test_deep_trees_are_refused_without_recursing() -> None:
    node: dict[str, Any] = leaf()
    for _ in range(5000):
        node = {"operator": "and", "children": [node]}
    assert refused(with_(DYNAMIC, selector=node)).member == "selector"


def test_behaviour_limit() -> None:
    behaviors = {f"b{i}": PURCHASE for i in range(MAX_BEHAVIORS)}
    assert len(parse(with_(DYNAMIC, behaviors=behaviors, selector=tree(leaf()))).behaviors) == MAX_BEHAVIORS
    listed = [{"name": f"b{i}", "window": "1d", "event_selectors": [{"event": "A"}]} for i in range(MAX_BEHAVIORS + 1)]
    assert refused(with_(DYNAMIC, behaviors=listed, selector=tree(leaf()))).member == "behaviors"


def test_reference_depth_limit() -> None:
    cohorts = chain(MAX_DEPTH + 1)  # cohort 11 nests 10 deep: allowed
    assert parse({"name": "ok", "selector": tree(cohort_leaf(MAX_DEPTH))}, cohorts)
    error = refused({"name": "deep", "selector": tree(cohort_leaf(MAX_DEPTH + 1))}, cohorts)
    assert error.member == "selector" and "nest 11 deep" in error.message
    # updating the chain's bottom so that it references another cohort pushes the top over
    extra = {**cohorts, 20: parse({"name": "s", "distinct_ids": []})}
    error = refused({"name": "c1", "selector": tree(cohort_leaf(20))}, extra, 1)
    assert f"cohort {MAX_DEPTH + 1}'s references nest" in error.message


def test_cycles() -> None:
    cohorts = chain(3)
    error = refused({"name": "c1", "selector": tree(cohort_leaf(3))}, cohorts, 1)
    assert error.member == "selector" and "reference cycle" in error.message
    error = refused({"name": "c2", "selector": tree(cohort_leaf(2))}, cohorts, 2)
    assert error.member == "selector.children[0].value" and "references itself" in error.message


# ----------------------------------------------------------------------------------------------- PATCH
def test_patch_rules() -> None:
    existing = {1: parse(STATIC), 2: parse(DYNAMIC)}
    static, dynamic = existing[1], existing[2]

    renamed = apply_patch(dynamic, {"name": "New", "description": None, "count": 3}, existing=existing, cohort_id=2)
    assert renamed.name == "New" and renamed.selector == dynamic.selector and renamed.behaviors == dynamic.behaviors

    edited = apply_patch(
        static,
        {"add_distinct_ids": ["u9", "u1"], "remove_distinct_ids": ["u2", "nope", "u9"]},
        existing=existing,
        cohort_id=1,
    )
    assert edited.distinct_ids == ("7", "u1")

    to_static = apply_patch(dynamic, {"distinct_ids": ["a"], "add_distinct_ids": ["b"]}, existing=existing, cohort_id=2)
    assert to_static.distinct_ids == ("a", "b") and to_static.selector is None

    to_dynamic = apply_patch(static, {"selector": tree(leaf())}, existing=existing, cohort_id=1)
    assert not to_dynamic.is_static and to_dynamic.behaviors == {}

    only_behaviors = apply_patch(
        dynamic, {"behaviors": {"bhvr_0": PURCHASE, "b2": PURCHASE}}, existing=existing, cohort_id=2
    )
    assert set(only_behaviors.behaviors) == {"bhvr_0", "b2"}

    for patch, member in [
        ([1], "body"),
        ({"add_distinct_ids": ["x"]}, "add_distinct_ids"),
        ({"remove_distinct_ids": ["x"]}, "remove_distinct_ids"),
        ({"distinct_ids": ["a"], "selector": "true"}, "distinct_ids"),
        ({"behaviors": {}}, "selector.children[0].value"),  # the kept selector reads bhvr_0
        ({"name": ""}, "name"),
        ({"data_group_id": 1}, "data_group_id"),
        ({"selector": tree(cohort_leaf(2))}, "selector.children[0].value"),  # itself
    ]:
        with pytest.raises(CohortDefinitionError) as caught:
            apply_patch(dynamic, patch, existing=existing, cohort_id=2)
        assert caught.value.member == member, patch
    with pytest.raises(CohortDefinitionError) as caught:
        apply_patch(static, {"add_distinct_ids": [True]}, existing=existing, cohort_id=1)
    assert caught.value.member == "add_distinct_ids[0]"
    with pytest.raises(CohortDefinitionError) as caught:
        apply_patch(static, {"behaviors": {"b": PURCHASE}}, existing=existing, cohort_id=1)
    assert caught.value.member == "selector"  # a static cohort made dynamic needs a selector


def test_patch_that_closes_a_cycle() -> None:
    existing = chain(2)  # 2 -> 1
    with pytest.raises(CohortDefinitionError) as caught:
        apply_patch(existing[1], {"selector": tree(cohort_leaf(2))}, existing=existing, cohort_id=1)
    assert caught.value.member == "selector" and "reference cycle" in caught.value.message


def test_raw_definition_ignores_metadata() -> None:
    cohort = parse_raw_definition({"selector": tree(leaf()), "name": 5}, existing={})
    assert cohort.name == "" and cohort.selector == tree({**leaf(), "type": "string"})
    with pytest.raises(CohortDefinitionError):
        parse_raw_definition({"distinct_ids": [], "data_group_id": 2}, existing={})


def test_check_delete_names_referrers() -> None:
    existing = chain(3)  # 3 -> 2 -> 1
    with pytest.raises(CohortDefinitionError) as caught:
        check_delete([1], existing)
    assert caught.value.message == "cohort 1 is referenced by cohort(s) 2 (c2)"
    check_delete([1, 2, 3], existing)
    check_delete([3], existing)
    with pytest.raises(CohortDefinitionError):
        check_delete([1, 2], existing)


# ------------------------------------------------------------------------------- agreement with oracle
EVENT_EXPRESSIONS = [
    'properties["a"] == 1',
    'number(properties["amount"]) > 50',
    'defined(properties["x"]) and not properties["y"] in ["a", "b"]',
    'lower(properties["n"]) == "x"',
    "",
    "1 +",
    'properties["a" == 1',
    "nosuch(1)",
    'user["plan"] == "pro"',
    'behaviors["b"] > 1',
    "   ",
]
PROFILE_EXPRESSIONS = [
    'user["plan"] == "pro"',
    'properties["age"] >= 18 or defined(user["email"])',
    'behaviors["bhvr_0"] >= 3 and user["plan"] == "pro"',
    'behaviors["bhvr_1"] == 0',
    'behaviors["other"] > 1',
    'event["x"] == 1',
    'user["x"] ==',
    "",
    "true",
]
OPERANDS = [
    "pro",
    "",
    5,
    0,
    -3.5,
    "5",
    "1e3",
    "abc",
    "1e400",
    True,
    None,
    [1, "a"],
    {"a": 1},
    "2024-01-01",
    "2024-01-01T10:00:00Z",
    "1899-12-31",
    1_700_000_000,
    2e10,
    1e15,
]
OPERATORS = [*oracle.PROPERTY_OPERATORS, "=", None]
TYPES = [None, None, None, *oracle.TYPES, "date"]


def mostly(good: list[Any], bad: list[Any], weight: int = 4) -> st.SearchStrategy[Any]:
    """One of `good` (each `weight` times as likely as one of `bad`): most draws pass the rule."""
    return st.sampled_from(good * weight + bad)


@st.composite
def some_of(draw: st.DrawFn, members: dict[str, st.SearchStrategy[Any]], keep: float = 0.95) -> dict[str, Any]:
    """A dict with each member present with probability `keep`."""
    out = {}
    for name, strategy in members.items():
        if draw(st.floats(0, 1)) < keep:
            out[name] = draw(strategy)
    return out


def property_leaves(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return some_of(
        {
            "property": mostly([kind], ["event" if kind == "user" else "user", "other"], 8),
            "value": mostly(["plan", "amount"], ["", 3]),
            "operator": st.sampled_from(OPERATORS),
            "operand": st.sampled_from(OPERANDS),
            "type": st.sampled_from(TYPES),
        }
    )


def trees(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda children: some_of(
            {
                "operator": mostly(["and", "or"], ["xor", None]),
                "children": st.one_of(
                    st.lists(children, min_size=1, max_size=3),
                    st.lists(children, min_size=1, max_size=3),
                    st.lists(children, max_size=0),
                ),
            },
        ),
        max_leaves=6,
    )


profile_leaves = st.one_of(
    property_leaves("user"),
    some_of(
        {
            "property": st.just("behaviors"),
            "value": mostly(["bhvr_0"], ["bhvr_1", "nope"]),
            "operator": mostly(list(oracle.COMPARISONS), ["in", None], 1),
            "operand": mostly([0, 3, 1], [-1, 2.0, True, "3"]),
        }
    ),
    some_of(
        {
            "property": st.just("cohort"),
            "value": st.sampled_from([1, 2, 6, 10, 11, 12, 99, True, "1"]),
            "operator": mostly(["in", "not in"], ["==", None]),
        }
    ),
    st.sampled_from([None, 3, "x"]),
)
event_selectors = some_of(
    {
        "event": mostly(["Purchase"], ["", None, 3]),
        "selector": st.one_of(mostly([None], [*EVENT_EXPRESSIONS, 4], 6), trees(property_leaves("event"))),
    }
)
windows = st.one_of(
    some_of(
        {
            "unit": mostly(["day", "week", "month"], ["year", None]),
            "value": mostly([1, 30, 7], [0, -2, True, 2.5, "3"]),
        }
    ),
    st.sampled_from(["30d", None]),
)
dates = mostly(["2024-01-01", "2024-02-29", "2024-03-01"], ["2023-02-29", "2024-1-01", None, 20240101])
count_types = mostly(["absolute", "days", None], ["day"])
counts = st.one_of(
    some_of({"event_selector": event_selectors, "type": count_types}),
    some_of({"event_selectors": st.lists(event_selectors, min_size=1, max_size=2), "type": count_types}),
    some_of(
        {
            "event_selector": event_selectors,
            "event_selectors": st.lists(event_selectors, max_size=2),
            "type": count_types,
            "aggregationOperator": st.sampled_from([None, "sum"]),
            "property": st.sampled_from([None, "amount"]),
        },
        keep=0.5,
    ),
)
good_selectors = st.fixed_dictionaries(
    {"event": st.just("Purchase"), "selector": st.sampled_from([None, *EVENT_EXPRESSIONS[:4]])}
)
good_entries = st.fixed_dictionaries(
    {
        "count": st.one_of(
            st.fixed_dictionaries({"event_selector": good_selectors, "type": st.sampled_from(["absolute", "days"])}),
            st.fixed_dictionaries({"event_selectors": st.lists(good_selectors, min_size=1, max_size=2)}),
        ),
        "window": st.fixed_dictionaries(
            {"unit": st.sampled_from(["day", "week", "month"]), "value": st.integers(1, 400)}
        ),
    }
)
entries = st.one_of(
    good_entries,
    good_entries,
    some_of({"count": counts, "window": windows}),
    some_of({"count": counts, "from_date": dates, "to_date": dates}),
    some_of({"count": counts, "window": windows, "from_date": dates, "to_date": dates}, keep=0.5),
    st.sampled_from([3, None]),
)
list_items = some_of(
    {
        "name": mostly(["bhvr_0", "bhvr_1"], ["bad name", ""]),
        "window": mostly(["30d", "1d"], ["0d", "7w", 30, None]),
        "event_selectors": st.lists(event_selectors, min_size=0, max_size=2),
    }
)
behaviors = st.one_of(
    st.dictionaries(mostly(["bhvr_0", "bhvr_1"], ["bad key", ""]), entries, max_size=2),
    st.dictionaries(mostly(["bhvr_0", "bhvr_1"], ["bad key", ""]), entries, max_size=2),
    st.lists(list_items, max_size=2),
    st.sampled_from([None, {}, "x"]),
)
distinct_ids = st.one_of(
    st.lists(mostly(["u1", "u2", "", 7], [True, 1.5, None, "x" * 256], 6), max_size=4),
    st.sampled_from([None, "u1"]),
)
metadata = {
    "name": mostly(["Cohort"], ["", None, 5, "n" * 256], 40),
    "description": mostly(["", "about", None], [3, "d" * 1001], 12),
    "is_visible": mostly([0, 1, True, False, None], [2, "1"], 8),
    "data_group_id": mostly([None], [1], 30),
    "count": st.sampled_from([None, 5]),
}
good_leaves = st.one_of(
    st.fixed_dictionaries(
        {
            "property": st.just("user"),
            "value": st.sampled_from(["plan", "age"]),
            "operator": st.sampled_from(oracle.PROPERTY_OPERATORS),
            "operand": st.sampled_from(["pro", 3, "4.5"]),
            "type": st.sampled_from([None, "string", "number", "list"]),
        }
    ),
    st.fixed_dictionaries(
        {
            "property": st.just("behaviors"),
            "value": st.just("bhvr_0"),
            "operator": st.sampled_from(oracle.COMPARISONS),
            "operand": st.integers(0, 5),
        }
    ),
    st.fixed_dictionaries(
        {
            "property": st.just("cohort"),
            "value": st.sampled_from([1, 2, 10]),
            "operator": st.sampled_from(["in", "not in"]),
        }
    ),
)
good_trees = st.recursive(
    good_leaves,
    lambda children: st.fixed_dictionaries(
        {"operator": st.sampled_from(["and", "or"]), "children": st.lists(children, min_size=1, max_size=3)}
    ),
    max_leaves=5,
)
good_dynamic = st.fixed_dictionaries(
    {
        "name": st.just("Dynamic"),
        "selector": st.one_of(good_trees, st.sampled_from(PROFILE_EXPRESSIONS[:4])),
        "behaviors": st.one_of(
            st.fixed_dictionaries({"bhvr_0": good_entries}),
            st.fixed_dictionaries({"bhvr_0": good_entries, "bhvr_1": entries}),
            st.fixed_dictionaries({"bhvr_0": entries}),
        ),
    }
)
selectors = st.one_of(st.sampled_from(PROFILE_EXPRESSIONS), trees(profile_leaves), trees(profile_leaves))
bodies = st.one_of(
    good_dynamic,
    good_dynamic,
    some_of({**metadata, "selector": selectors, "behaviors": behaviors, "distinct_ids": mostly([None], [["u1"]], 8)}),
    some_of({**metadata, "selector": selectors, "behaviors": behaviors}),
    some_of({**metadata, "distinct_ids": distinct_ids, "add_distinct_ids": mostly([None], [["x"]], 8)}),
)
patches = some_of(
    {
        **metadata,
        "selector": st.one_of(selectors, good_trees),
        "behaviors": st.one_of(behaviors, good_dynamic.map(lambda body: body["behaviors"])),
        "distinct_ids": distinct_ids,
        "add_distinct_ids": distinct_ids,
        "remove_distinct_ids": distinct_ids,
        "id": st.just(3),
    },
    keep=0.25,
)

# The same stored cohorts for both: 1 static, k -> k-1 up to 11 (which nests 10 deep).
_CHAIN_BODIES = {1: {"name": "c1", "distinct_ids": ["a"]}} | {
    k: {"name": f"c{k}", "selector": {"operator": "and", "children": [cohort_leaf(k - 1)]}} for k in range(2, 12)
}


def _build_existing() -> tuple[dict[int, CohortDefinition], dict[int, Any]]:
    mine: dict[int, CohortDefinition] = {}
    theirs: dict[int, Any] = {}
    for k, body in _CHAIN_BODIES.items():
        mine[k] = parse_cohort(body, existing=mine, cohort_id=k)
        parsed = oracle.parse_cohort(body, existing=theirs, cohort_id=k)
        assert isinstance(parsed, oracle.Cohort)
        theirs[k] = parsed
    return mine, theirs


MINE, THEIRS = _build_existing()


def _compare(mine: CohortDefinition | CohortDefinitionError, theirs: Any) -> None:
    if isinstance(theirs, oracle.CohortError):
        assert isinstance(mine, CohortDefinitionError), f"accepted what the reference refuses: {theirs.message}"
        if mine.member and theirs.member:
            assert mine.member == theirs.member, (mine.message, theirs.message)
        return
    assert not isinstance(mine, CohortDefinitionError), f"refused what the reference accepts: {mine.message}"
    canonical = mine.canonical()
    assert canonical.pop("is_static") == theirs.is_static
    assert canonical == theirs.body()


def _mine(call: Any) -> CohortDefinition | CohortDefinitionError:
    try:
        result: CohortDefinition = call()
    except CohortDefinitionError as exc:
        return exc
    return result


AGREEMENT = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@AGREEMENT
@given(body=bodies, cohort_id=st.sampled_from([None, 1, 5, 11, 12]))
def test_parse_agrees_with_the_reference(body: dict[str, Any], cohort_id: int | None) -> None:
    mine = _mine(lambda: parse_cohort(body, existing=MINE, cohort_id=cohort_id))
    _compare(mine, oracle.parse_cohort(body, existing=THEIRS, cohort_id=cohort_id))


@AGREEMENT
@given(patch=patches, target=st.sampled_from([1, 3, 11]))
def test_patch_agrees_with_the_reference(patch: dict[str, Any], target: int) -> None:
    mine = _mine(lambda: apply_patch(MINE[target], patch, existing=MINE, cohort_id=target))
    current = THEIRS[target]
    _compare(mine, oracle.apply_patch(current, patch, existing=THEIRS))


@AGREEMENT
@given(body=bodies)
def test_valid_definitions_survive_storage(body: dict[str, Any]) -> None:
    mine = _mine(lambda: parse_cohort(body, existing=MINE, cohort_id=12))
    if isinstance(mine, CohortDefinition):
        canonical = mine.canonical()
        assert CohortDefinition.from_canonical(canonical) == mine
        assert parse_cohort(canonical, existing=MINE, cohort_id=12) == mine


@pytest.mark.parametrize(
    ("kind", "operand"),
    [("number", "５"), ("number", "٣"), ("datetime", "２０２４-01-01")],
    ids=["fullwidth-number", "arabic-indic-number", "fullwidth-date"],
)
def test_operands_follow_the_expression_language_digits(kind: str, operand: str) -> None:
    """number()/datetime() read ASCII digits only (footfall.shared.expr), and so does the reference."""
    body = with_(DYNAMIC, selector=tree(leaf(type=kind, operand=operand)))
    assert refused(body).member == "selector.children[0].operand"
    assert isinstance(oracle.parse_cohort(body), oracle.CohortError)


def test_expression_limits_are_the_expression_languages() -> None:
    """Nesting deeper than 64 levels is refused (the reference has no depth limit: a departure)."""
    deep = "(" * 70 + "1 == 1" + ")" * 70
    error = refused(with_(DYNAMIC, selector=f'user["a"] == 1 and {deep}'))
    assert error.member == "selector" and "nested deeper than 64" in error.message
