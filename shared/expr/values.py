"""The runtime value representation in SQL, and the small SQL vocabulary built on it.

Every sub-expression lowers to a `Val`: its static kind set plus up to four SQL
components that are evaluated per event:

    k  UInt8    the kind code (`Kind`); omitted (static) when only one kind is possible
    b  UInt8    0/1, meaningful when k = BOOLEAN
    n  Float64  meaningful when k = NUMBER, or DATETIME (epoch seconds, ms precision)
    s  String   meaningful when k = STRING, or LIST / OBJECT (their JSON text)

A component is only present when a kind that uses it is possible, and components are
garbage (but never an error) for other kinds, so consumers test `k` first — with one
exception, an invariant every rule keeps: `b` is 0 whenever the kind is not BOOLEAN.
So `b` alone is "evaluates to boolean true", which is what `where`, `and` and `or` need.
Conditions are `Cond = Sql | bool`; the Python booleans fold away branches that the
static kinds already decide, which is what makes `properties["x"] == "a"` come out as
one guarded string comparison.

A source may also offer cheaper forms, each valid only where its condition holds:
`tests` (a `k = kind` test), `views` (`s` once the kind is known: `s_as`) and `json`
(the value as JSON text, which `string_equals` compares with directly).

`property_value` (with `property_defined` and `property_raw`) is the only place that knows
how properties are stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from footfall.shared.expr.typed import Kind, Kinds
from footfall.shared.schema.catalog import EVENTS, Table
from footfall.shared.sql import Params, Sql, column, join, number, sql
from footfall.shared.sql.ident import hot_column

__all__ = [
    "Cond",
    "Val",
    "and_",
    "by_kind",
    "cond",
    "element_key",
    "if_",
    "is_any",
    "is_kind",
    "iso_text",
    "json_text",
    "list_keys",
    "list_strings",
    "not_",
    "num_text",
    "or_",
    "parse_datetime",
    "present",
    "property_defined",
    "property_raw",
    "property_string",
    "property_value",
    "s_as",
    "scalar_key",
    "string_equals",
]

Cond = Sql | bool

ZERO = sql("0")
ONE = sql("1")
NULL_STRING = sql("CAST(NULL, 'Nullable(String)')")


def present(fragment: Sql | None) -> Sql:
    """A component the caller's kind test guarantees (the value has the kind that needs it)."""
    if fragment is None:
        raise AssertionError("a component needed by a possible kind is missing")
    return fragment


@dataclass(frozen=True, slots=True)
class Val:
    kinds: Kinds
    k: Sql | None = None
    b: Sql | None = None
    n: Sql | None = None
    s: Sql | None = None
    packed: Sql | None = None  # the whole value as one Tuple expression (see lower.py)
    tests: tuple[tuple[Kind, Sql], ...] = ()  # cheaper `k = kind` tests, where the source has them
    views: tuple[tuple[Kind, Sql], ...] = ()  # cheaper `s` for a kind already tested (`s_as`)
    json: Sql | None = None  # the value as JSON text, where the source has it (`string_equals`)

    def __post_init__(self) -> None:
        if not self.kinds:
            raise AssertionError("a value has at least one possible kind")
        if not ((self.k is None) == (len(self.kinds) == 1)):
            raise AssertionError("k is static exactly when one kind is possible")

    @property
    def kind(self) -> Sql:
        if self.k is not None:
            return self.k
        (only,) = self.kinds
        return number(int(only))

    def size(self) -> int:
        return sum(len(c.text) for c in (self.k, self.b, self.n, self.s) if c is not None)

    # Component access; the assertion documents which kinds need which component.
    @property
    def bv(self) -> Sql:
        if self.b is None:
            raise AssertionError(self.kinds)
        return self.b

    @property
    def nv(self) -> Sql:
        if self.n is None:
            raise AssertionError(self.kinds)
        return self.n

    @property
    def sv(self) -> Sql:
        if self.s is None:
            raise AssertionError(self.kinds)
        return self.s


def kinds_val(kinds: Kinds, k: Sql | None, **components: Sql | None) -> Val:
    """A Val with `k` dropped when the kind is static and components only where needed."""
    b = components.get("b") if Kind.BOOLEAN in kinds else None
    n = components.get("n") if kinds & {Kind.NUMBER, Kind.DATETIME} else None
    s = components.get("s") if kinds & {Kind.STRING, Kind.LIST, Kind.OBJECT} else None
    return Val(kinds, k if len(kinds) > 1 else None, b, n, s)


# -- conditions ---------------------------------------------------------------------------------
def cond(c: Cond) -> Sql:
    if c is True:
        return ONE
    if c is False:
        return ZERO
    return c


def and_(*cs: Cond) -> Cond:
    parts = [c for c in cs if c is not True]
    if any(c is False for c in parts):
        return False
    sqls = [c for c in parts if isinstance(c, Sql)]
    if not sqls:
        return True
    if len(sqls) == 1:
        return sqls[0]
    return sql("({})", join(" AND ", sqls))


def or_(*cs: Cond) -> Cond:
    parts = [c for c in cs if c is not False]
    if any(c is True for c in parts):
        return True
    sqls = [c for c in parts if isinstance(c, Sql)]
    if not sqls:
        return False
    if len(sqls) == 1:
        return sqls[0]
    return sql("({})", join(" OR ", sqls))


def not_(c: Cond) -> Cond:
    if isinstance(c, bool):
        return not c
    return sql("(NOT {})", c)


def if_(c: Cond, then: Sql, otherwise: Sql) -> Sql:
    if c is True:
        return then
    if c is False:
        return otherwise
    return sql("if({}, {}, {})", c, then, otherwise)


def multi_if(branches: Iterable[tuple[Cond, Sql]], default: Sql) -> Sql:
    live: list[tuple[Sql, Sql]] = []
    for c, value in branches:
        if c is False:
            continue
        if c is True:
            default = value
            break
        live.append((c, value))
    if not live:
        return default
    if len(live) == 1:
        return sql("if({}, {}, {})", live[0][0], live[0][1], default)
    args = join(", ", [part for pair in live for part in pair])
    return sql("multiIf({}, {})", args, default)


def s_as(v: Val, kind: Kind) -> Sql:
    """`s` where the caller has already tested that `v` has kind `kind` (the source's view if any)."""
    for viewed, view in v.views:
        if viewed is kind:
            return view
    return v.sv


def is_kind(v: Val, kind: Kind) -> Cond:
    if kind not in v.kinds:
        return False
    if len(v.kinds) == 1:
        return True
    for tested, test in v.tests:
        if tested is kind:
            return test
    return sql("({} = {})", v.kind, number(int(kind)))


def is_any(v: Val, kinds: Kinds) -> Cond:
    hit = v.kinds & kinds
    if not hit:
        return False
    if v.kinds <= kinds:
        return True
    if len(hit) == 1:
        (only,) = hit
        return is_kind(v, only)
    return sql("({} IN ({}))", v.kind, join(", ", [number(int(x)) for x in sorted(hit)]))


def by_kind(v: Val, branches: Mapping[Kind, Sql | Callable[[], Sql]], default: Sql) -> Sql:
    """Pick a per-kind SQL value for `v`; kinds `v` cannot have are dropped statically."""
    chosen: list[tuple[Cond, Sql]] = []
    for kind in sorted(v.kinds):
        if kind in branches:
            branch = branches[kind]
            chosen.append((is_kind(v, kind), branch() if callable(branch) else branch))
    covered = {k for k in v.kinds if k in branches}
    if covered == v.kinds and chosen:
        # Every possible kind has a branch: the last one needs no test.
        *init, (_, last) = chosen
        return multi_if(init, last)
    return multi_if(chosen, default)


# -- text forms ---------------------------------------------------------------------------------
def num_text(n: Sql) -> Sql:
    """A number as JavaScript prints it: 1 not 1.0, 0 not -0, 1e+21, 1.5e-7."""
    return sql("replaceRegexpOne(toString({} + 0.), 'e([0-9])', 'e+\\\\1')", n)


def iso_text(n: Sql) -> Sql:
    """Epoch seconds as `YYYY-MM-DDTHH:MM:SS` (UTC)."""
    return sql("formatDateTimeInJodaSyntax(toDateTime64({}, 3, 'UTC'), 'yyyy-MM-dd''T''HH:mm:ss')", n)


def parse_datetime(s: Sql) -> Sql:
    """Nullable epoch seconds of an ISO date string (the same forms as check.parse_iso).

    The offset is at most 23:59, and the instant, after the offset, must lie in
    [1900-01-01, 2300-01-01) UTC (check.DATETIME_MIN/MAX); a local year 1899 or 2300 can
    get there. The parsed value appears twice; ClickHouse computes it once.
    """
    seconds = sql("(toUnixTimestamp64Milli(parseDateTime64BestEffortOrNull({}, 3, 'UTC')) / 1000)", s)
    return sql(
        "if(match({}, "
        "'^(1[89]|2[0-3])[0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
        "([T ][0-9][0-9]:[0-9][0-9](:[0-9][0-9]([.][0-9]+)?)?)?(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?\\\\z'), "
        "if({} >= -2208988800. AND {} < 10413792000., {}, NULL), NULL)",
        s,
        seconds,
        seconds,
        seconds,
    )


def json_text(v: Val) -> Sql:
    """`v` as a JSON value (list literals are built as JSON text); undefined becomes null."""
    return by_kind(
        v,
        {
            Kind.BOOLEAN: lambda: sql("if({}, 'true', 'false')", v.bv),
            Kind.NUMBER: lambda: num_text(v.nv),
            Kind.STRING: lambda: sql("toJSONString({})", s_as(v, Kind.STRING)),
            Kind.DATETIME: lambda: sql("toJSONString({})", iso_text(v.nv)),
            Kind.LIST: lambda: s_as(v, Kind.LIST),
            Kind.OBJECT: lambda: s_as(v, Kind.OBJECT),
        },
        sql("'null'"),
    )


def scalar_key(v: Val) -> Sql:
    """A tagged text that is equal for two scalars exactly when `in` should match them.

    Datetimes match their ISO text, so a datetime is found in a list of ISO strings.
    """
    return by_kind(
        v,
        {
            Kind.NULL: sql("'z'"),
            Kind.BOOLEAN: lambda: sql("if({}, 'btrue', 'bfalse')", v.bv),
            Kind.NUMBER: lambda: sql("concat('n', {})", num_text(v.nv)),
            Kind.STRING: lambda: sql("concat('s', {})", s_as(v, Kind.STRING)),
            Kind.DATETIME: lambda: sql("concat('s', {})", iso_text(v.nv)),
        },
        sql("'u'"),
    )


def element_key(v: Val) -> Sql:
    """The key `list_keys` gives to `v` as an element of a list literal (undefined is null there)."""
    return by_kind(
        v,
        {
            Kind.UNDEFINED: sql("'z'"),
            Kind.NULL: sql("'z'"),
            Kind.BOOLEAN: lambda: scalar_key(v),
            Kind.NUMBER: lambda: scalar_key(v),
            Kind.STRING: lambda: scalar_key(v),
            Kind.DATETIME: lambda: scalar_key(v),
        },
        sql("'j'"),  # a nested list or object never equals a scalar's key
    )


def list_keys(list_json: Sql, var: Sql) -> Sql:
    """Array(String): the `scalar_key` of every element of a JSON array text."""
    return sql(
        "arrayMap({} -> multiIf(ascii({}) = 34, concat('s', {}), "
        "{} = 'true', 'btrue', {} = 'false', 'bfalse', {} = 'null', 'z', "
        "ascii({}) IN (91, 123), concat('j', {}), concat('n', {})), JSONExtractArrayRaw({}))",
        var,
        var,
        json_string(var),
        var,
        var,
        var,
        var,
        var,
        num_text(sql("toFloat64OrZero({})", var)),
        list_json,
    )


def list_strings(list_json: Sql, var: Sql, var2: Sql) -> Sql:
    """Array(String): the distinct `string()` forms of the scalar elements of a JSON array text.

    Null, list and object elements have no string form and give no element.
    """
    return sql(
        "arrayDistinct(arrayMap({} -> multiIf(ascii({}) = 34, {}, ascii({}) IN (116, 102), {}, "
        "{}), arrayFilter({} -> ascii({}) NOT IN (110, 91, 123), JSONExtractArrayRaw({}))))",
        var,
        var,
        json_string(var),
        var,
        var,
        num_text(sql("toFloat64OrZero({})", var)),
        var2,
        var2,
        list_json,
    )


# -- storage --------------------------------------------------------------------------------------
def json_string(text: Sql) -> Sql:
    """The string that a JSON string text (`"..."`, as `JSONExtractRaw` and
    `JSONExtractArrayRaw` give it) stands for.

    In JSON every escape starts with a backslash, so a text without one is the string
    itself between its quotes: no second parse. ClickHouse re-serialises what it
    extracts (escaping `"`, `\\`, control characters and U+2028/U+2029) and the rule
    holds for its texts over every 1-3 byte sequence, every valid 4-byte one and every
    `\\uXXXX` escape and surrogate pair (checked against `JSONExtractString`). `'\\x5C'`
    is the backslash, written so that no `\\'` appears in the SQL text.
    """
    return sql(
        "if(position({}, '\\x5C') = 0, substring({}, 2, length({}) - 2), JSONExtractString({}))",
        text,
        text,
        text,
        text,
    )


def string_equals(v: Val, other: Sql) -> Cond:
    """`v` is a string equal to `other`, a String the caller reads only where its side is a string.

    With a JSON text (`v.json`) that has no backslash, this is one comparison with the
    quoted `other`: such a text is the string between quotes (`json_string`), and the
    text of any other kind never starts with a quote. For a literal `other` the quoted
    form is a constant. With a backslash, the text is decoded and compared.
    """
    if v.json is None:
        return and_(is_kind(v, Kind.STRING), sql("({} = {})", s_as(v, Kind.STRING), other))
    exact = sql("({} = concat('\"', {}, '\"'))", v.json, other)
    decoded = cond(and_(is_kind(v, Kind.STRING), sql("(JSONExtractString({}) = {})", v.json, other)))
    return sql("if(position({}, '\\x5C') = 0, {}, {})", v.json, exact, decoded)


_PROPERTY_KINDS: Kinds = frozenset(
    {Kind.UNDEFINED, Kind.NULL, Kind.BOOLEAN, Kind.NUMBER, Kind.STRING, Kind.LIST, Kind.OBJECT}
)


def property_raw(name: str, params: Params, table: Table = EVENTS, *, text: Sql | None = None) -> Sql:
    """String: the raw JSON text of property `name` ('' when missing or `properties` is not
    an object), as `JSONExtractRaw` gives it. From the property's hot column when it has one
    (`footfall.shared.schema.hot`: the same expression, materialised on insert), else from
    the `properties` text with the name bound. `text`: read from that properties text
    instead (a joined profile's, which has no hot columns)."""
    if text is not None:
        return sql("JSONExtractRaw({}, {})", text, params.add(name, "String"))
    hot = hot_column(name, table)
    if hot is not None:
        return hot
    return sql("JSONExtractRaw({}, {})", column("properties", table), params.add(name, "String"))


def property_string(name: str, params: Params, table: Table = EVENTS) -> Sql:
    """String: the property's value when it is a JSON string, else '' (what
    `JSONExtractString(properties, name)` gives), read through `property_raw` (so from the
    property's hot column when it has one)."""
    raw = property_raw(name, params, table)
    return sql("if(ascii({}) = 34, {}, '')", raw, json_string(raw))


def property_value(name: str, params: Params, table: Table = EVENTS, *, text: Sql | None = None) -> Val:
    """The one function that knows how event properties are stored (with `property_defined`
    and `property_raw`); profile properties (`table` = profiles) are stored the same way.

    `properties` is JSON text; `property_raw` reads the raw value ('' when missing), whose
    first byte is the JSON type: one `JSONExtractRaw` per property, or the property's hot
    column, which holds that same text. ClickHouse computes the identical sub-expression
    once per row however often it appears. A string is read from the raw text without a
    second parse where it can be (`json_string`, `string_equals`).
    """
    raw = property_raw(name, params, table, text=text)
    string = json_string(raw)
    return Val(
        _PROPERTY_KINDS,
        # '' undefined, '"' string, 't'/'f' boolean, 'n' null, '[' list, '{' object, else number
        k=sql("transform(ascii({}), [0, 34, 116, 102, 110, 91, 123], [0, 4, 2, 2, 1, 6, 7], 3)", raw),
        b=sql("toUInt8({} = 'true')", raw),
        n=sql("toFloat64OrZero({})", raw),
        s=sql("if(ascii({}) = 34, {}, {})", raw, string, raw),
        tests=(
            (Kind.UNDEFINED, sql("({} = '')", raw)),
            (Kind.NULL, sql("({} = 'null')", raw)),
            (Kind.BOOLEAN, sql("(ascii({}) IN (116, 102))", raw)),
            (Kind.NUMBER, sql("(ascii({}) NOT IN (0, 34, 116, 102, 110, 91, 123))", raw)),
            (Kind.STRING, sql("(ascii({}) = 34)", raw)),
            (Kind.LIST, sql("(ascii({}) = 91)", raw)),
            (Kind.OBJECT, sql("(ascii({}) = 123)", raw)),
        ),
        views=((Kind.STRING, string), (Kind.LIST, raw), (Kind.OBJECT, raw)),
        json=raw,
    )


def property_defined(name: str, params: Params, table: Table = EVENTS, *, text: Sql | None = None) -> Sql:
    """UInt8: the event has property `name` — `defined(...)` without reading the value.

    Equal to `property_value(name).k != undefined` (same parser, same key lookup; an
    unparsable `properties` has no property for both) and cheaper, but it is a separate
    parse of `properties`: use it only where the value is not read too. A hot property's
    column is read instead (a present value's raw text is never empty). `text`: as in
    `property_raw`.
    """
    if text is not None:
        return sql("JSONHas({}, {})", text, params.add(name, "String"))
    hot = hot_column(name, table)
    if hot is not None:
        return sql("notEmpty({})", hot)
    return sql("JSONHas({}, {})", column("properties", table), params.add(name, "String"))
