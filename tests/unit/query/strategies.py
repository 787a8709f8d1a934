"""Hypothesis strategies for expression text, from the grammar of semantics §3.2.

`expressions()` draws mostly well-formed expressions (with random literals, property
names and some junk), `shapes()` draws an expression template with typed literal
holes so a test can fill the same shape with different literal values.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

FUNCTIONS_1 = ["defined", "number", "string", "boolean", "datetime", "floor", "round", "ceil", "lower", "upper"]
FUNCTIONS_2 = ["has_prefix", "has_suffix"]
BINARY = ["==", "!=", ">", ">=", "<", "<=", "in", "+", "-", "*", "/", "%", "and", "or"]
NAMES = ["s", "n", "f", "t", "nul", "lst", "obj", "ns", "iso", "nope", "time", "distinct_id", "$insert_id", "x"]

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _number_text(value: float) -> str:
    return repr(abs(value)) if value != int(value) or abs(value) >= 1e16 else str(int(abs(value)))


def literals() -> st.SearchStrategy[str]:
    return st.one_of(
        texts.map(_quote),
        st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False).map(_number_text),
        st.integers(min_value=0, max_value=10**6).map(str),
        st.sampled_from(["true", "false", "null"]),
    )


def accessors() -> st.SearchStrategy[str]:
    names = st.one_of(st.sampled_from(NAMES), texts)
    return st.builds(lambda src, name: f"{src}[{_quote(name)}]", st.sampled_from(["properties", "event"]), names)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", children, st.sampled_from(BINARY), children),
        st.builds(lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from(BINARY), children),
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(FUNCTIONS_1), children),
        st.builds(lambda f, a, b: f"{f}({a}, {b})", st.sampled_from(FUNCTIONS_2), children, children),
        st.builds(lambda a: f"not {a}", children),
        st.builds(lambda a: f"-{a}", children),
        st.lists(children, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    )


def expressions() -> st.SearchStrategy[str]:
    """Expression text, mostly well-formed; sometimes cut short or with a stray token."""
    tree = st.recursive(st.one_of(literals(), accessors()), _extend, max_leaves=12)
    junk = st.sampled_from(["", "", "", "", ")", "(", "]", ",", " ==", "'", '"', "!", "="])
    return st.builds(
        lambda t, j, cut: (t + j)[:cut] if cut else t + j, tree, junk, st.one_of(st.none(), st.integers(0, 60))
    )


# -- shapes: the same expression with different literal values -----------------------------------
HOLE_KINDS = ("string", "number", "bool")


def hole_values(kind: str) -> st.SearchStrategy[Any]:
    if kind == "string":
        return texts
    if kind == "number":
        return st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
    return st.booleans()


def render_literal(kind: str, value: Any) -> str:
    if kind == "string":
        return _quote(value)
    if kind == "number":
        return _number_text(value)
    return "true" if value else "false"


def shapes() -> st.SearchStrategy[tuple[str, list[str]]]:
    """(template with `{}` holes, the literal kind of each hole), over the same grammar."""
    hole = st.sampled_from(HOLE_KINDS).map(lambda k: ("{}", [k]))
    prop = st.sampled_from(NAMES).map(lambda n: (f"properties[{_quote(n)}]", []))

    def extend(children: st.SearchStrategy[tuple[str, list[str]]]) -> st.SearchStrategy[tuple[str, list[str]]]:
        return st.one_of(
            st.builds(
                lambda a, op, b: (f"({a[0]} {op} {b[0]})", a[1] + b[1]), children, st.sampled_from(BINARY), children
            ),
            st.builds(lambda f, a: (f"{f}({a[0]})", a[1]), st.sampled_from(FUNCTIONS_1), children),
            st.builds(lambda a: (f"not {a[0]}", a[1]), children),
            st.lists(children, min_size=1, max_size=3).map(
                lambda items: ("[" + ", ".join(i[0] for i in items) + "]", [k for i in items for k in i[1]])
            ),
        )

    return st.recursive(st.one_of(hole, prop), extend, max_leaves=8)
