"""Hot property columns without a warehouse: the setting, the column names and DDL, and the
compiler's property seam (`footfall.shared.expr.values`) switching to a column only for hot
event properties. The warehouse side is tests/integration/query/test_hot_columns.py."""

from __future__ import annotations

import re

import pytest

from footfall.shared.config import DEFAULT_HOT_PROPERTIES, ConfigError, Env, HotSettings
from footfall.shared.expr import check_expr, compile_where, parse_expr
from footfall.shared.expr.values import property_defined, property_raw, property_value
from footfall.shared.schema import hot
from footfall.shared.schema.catalog import EVENTS, PROFILES
from footfall.shared.schema.hot_auto import choose
from footfall.shared.sql import Params


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (None, DEFAULT_HOT_PROPERTIES),
        ("", ()),
        ("none", ()),
        (" NONE ", ()),
        ("plan, price ,,$browser", ("plan", "price", "$browser")),
        ("+plan,$os", (*DEFAULT_HOT_PROPERTIES, "plan")),
        ("a b,ключ ☃", ("a b", "ключ ☃")),
    ],
    ids=["unset", "empty", "none", "none-spaced", "list", "added-to-defaults", "unicode"],
)
def test_setting_reads_names(value: str | None, names: tuple[str, ...]) -> None:
    env = Env({} if value is None else {"FOOTFALL_HOT_PROPERTIES": value})
    assert HotSettings.from_env(env).names == names


@pytest.mark.parametrize("value", ["a,b\x01c", "x" * 256, ",".join(f"p{i}" for i in range(65))], ids=str)
def test_setting_refuses_bad_names_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="FOOTFALL_HOT_PROPERTIES"):
        HotSettings.from_env(Env({"FOOTFALL_HOT_PROPERTIES": value}))


NAMES = ["$browser", "plan", "Plan", "p l a n", "x'); DROP TABLE events; --", "ключ", "a\\b", "" + "y" * 255]


def test_column_names_are_distinct_identifiers_derived_from_the_name() -> None:
    columns = [hot.column_name(n) for n in NAMES]
    assert len(set(columns)) == len(NAMES)
    assert all(re.fullmatch(r"hp_[a-z0-9_]*_[0-9a-f]{8}", c) for c in columns)
    assert columns == [hot.column_name(n) for n in NAMES]  # deterministic across processes
    assert hot.column_name("$browser").startswith("hp_browser_")
    with pytest.raises(ValueError):
        hot.column_name("")


def test_ddl_quotes_the_name_as_a_literal() -> None:
    ddl = hot.add_statement("x'); DROP TABLE events; --\\")
    assert ddl.startswith("ALTER TABLE events ADD COLUMN IF NOT EXISTS hp_x_drop_table_events_")
    assert "MATERIALIZED JSONExtractRaw(properties, 'x\\'); DROP TABLE events; --\\\\') CODEC(ZSTD(1))" in ddl
    assert hot.materialize_statement(["a", "b"]) == (
        f"ALTER TABLE events MATERIALIZE COLUMN {hot.column_name('a')}, "
        f"MATERIALIZE COLUMN {hot.column_name('b')} SETTINGS mutations_sync = 0"
    )


def test_seam_reads_the_column_of_a_hot_event_property_only() -> None:
    column = hot.column_name("$browser")
    with hot.using(["$browser"]):
        params = Params()
        assert property_raw("$browser", params).text == column
        assert property_defined("$browser", params).text == f"notEmpty({column})"
        value = property_value("$browser", params)
        assert value.json is not None and value.json.text == column
        assert params.values == {}  # the hot name is not bound: it is not read from the text
        assert property_raw("plan", params).text == "JSONExtractRaw(properties, {p0:String})"
        assert property_raw("$browser", params, PROFILES).text.startswith("JSONExtractRaw(properties")
        where = compile_where(check_expr(parse_expr('properties["$browser"] == "Chrome"')), Params())
        assert column in where.text and "JSONExtractRaw" not in where.text
    assert hot.in_use() == ()
    assert property_raw("$browser", Params(), EVENTS).text == "JSONExtractRaw(properties, {p0:String})"


def test_using_restores_the_previous_set() -> None:
    with hot.using(["a"]):
        with hot.using(["b", "c"]):
            assert hot.in_use() == ("b", "c")
            assert hot.active_column("events", "a") is None
            assert hot.active_column("profiles", "b") is None
        assert hot.in_use() == ("a",)
    assert hot.in_use() == ()


# -- hot columns chosen by use (FOOTFALL_HOT_AUTO) -------------------------------------------------
def test_auto_setting_reads_the_budget_threshold_and_period() -> None:
    assert (HotSettings().auto, HotSettings().auto_reads, HotSettings().auto_seconds) == (0, 20, 600.0)
    env = Env({"FOOTFALL_HOT_AUTO": "3", "FOOTFALL_HOT_AUTO_READS": "5", "FOOTFALL_HOT_AUTO_SECONDS": "30"})
    settings = HotSettings.from_env(env)
    assert (settings.names, settings.auto, settings.auto_reads, settings.auto_seconds) == (
        DEFAULT_HOT_PROPERTIES,
        3,
        5,
        30.0,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("HOT_AUTO", "-1"), ("HOT_AUTO", "65"), ("HOT_AUTO", "many"), ("HOT_AUTO_READS", "0"), ("HOT_AUTO_SECONDS", "0")],
    ids=str,
)
def test_auto_setting_refuses_bad_values_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"FOOTFALL_{name}"):
        HotSettings.from_env(Env({f"FOOTFALL_{name}": value}))


def test_seam_counts_the_event_properties_read_from_the_json_text() -> None:
    hot.take_reads()
    with hot.using(["$browser"]):
        property_raw("plan", Params())
        property_value("plan", Params())
        property_raw("$browser", Params())  # read from its column: not counted
        property_raw("price", Params(), PROFILES)  # a profile property: profiles have no hot columns
        compile_where(check_expr(parse_expr('properties["price"] > 1 and properties["$browser"] == "x"')), Params())
    assert hot.take_reads() == {"plan": 2, "price": 1}
    assert hot.take_reads() == {}  # taken: the counts start again


def test_seam_counts_a_bounded_number_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot, "_MAX_COUNTED", 3)
    hot.take_reads()
    for name in ["a", "b", "c", "d", "a", "e"]:
        property_raw(name, Params())
    assert hot.take_reads() == {"a": 2, "b": 1, "c": 1}  # past the cap only names already counted


def test_choose_takes_the_most_read_names_over_the_threshold() -> None:
    reads = {"plan": 30, "price": 30, "$browser": 99, "rare": 4, "seen": 20, "bad\x01name": 50}
    # $browser is hot already, the control character is outside the whitelist, ties go by name.
    assert choose(reads, {"$browser"}, room=5, min_reads=20) == ["plan", "price", "seen"]
    assert choose(reads, {"$browser"}, room=2, min_reads=20) == ["plan", "price"]
    assert choose(reads, set(), room=0, min_reads=1) == []
    assert choose(reads, set(), room=-1, min_reads=1) == []
    assert choose(reads, {"$browser", "plan", "price"}, room=5, min_reads=21) == []


@pytest.mark.parametrize(
    "name",
    ["it's", 'say "hi"', "back\\slash", "x'); DROP TABLE events; --", "ключ", "a\nb", "", "x" * 101, "tab\tname"],
    ids=str,
)
def test_choose_lets_no_name_into_ddl_that_is_outside_the_whitelist(name: str) -> None:
    """Chosen names come from request text and go into DDL: only the whitelist's characters."""
    assert choose({name: 100}, set(), room=5, min_reads=1) == []


def test_choose_takes_the_usual_property_names() -> None:
    names = ["plan", "$browser", "utm_source", "mp_lib", "Plan Name", "app.version", "a:b-c", "x" * 100]
    assert choose(dict.fromkeys(names, 5), set(), room=20, min_reads=5) == sorted(names)
