"""Lowering: typed tree -> `Val` (see values.py), one rule per operator of semantics §3.3.

Sharing. Most rules read a child component more than once (`k` in several tests), which
would make the SQL text grow exponentially with depth. A child whose text is larger
than `PACK_AT` characters is therefore evaluated once, as a tuple, and bound to a
lambda parameter:

    arrayElement(arrayMap((_x1) -> tuple(<rule over tupleElement(_x1, i)>), [tuple(<child>)]), 1)

so the text stays linear in the size of the expression. Small children are repeated
as text; ClickHouse evaluates identical sub-expressions once per row anyway.

Cheap forms. A rule that has already tested a kind reads `s` through `s_as` (a property's
string without the kind switch), string equality goes through `string_equals` (a
property compares its JSON text with the quoted literal), and `defined(p)` of a
property that the expression reads nowhere else is `property_defined` (no value read).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from footfall.shared.expr.check import DATETIME_MAX, DATETIME_MIN, MILLIS_FROM
from footfall.shared.expr.typed import (
    SCALARS,
    Apply,
    B,
    Column,
    Const,
    Count,
    D,
    Kind,
    Kinds,
    L,
    ListOf,
    N,
    O,
    Op,
    Prop,
    S,
    TNode,
    U,
    UserProp,
    Z,
)
from footfall.shared.expr.values import (
    Cond,
    Val,
    and_,
    by_kind,
    cond,
    element_key,
    if_,
    is_any,
    is_kind,
    iso_text,
    json_string,
    json_text,
    kinds_val,
    list_keys,
    multi_if,
    not_,
    num_text,
    or_,
    parse_datetime,
    present,
    property_defined,
    property_value,
    s_as,
    scalar_key,
    string_equals,
)
from footfall.shared.schema.catalog import EVENTS, Table
from footfall.shared.sql import Params, Sql, column, join, local, number, sql

__all__ = ["PACK_AT", "Lowerer"]

PACK_AT = 3000


_CMP: dict[Op, Callable[[Sql, Sql], Sql]] = {
    Op.GT: lambda a, b: sql("({} > {})", a, b),
    Op.GE: lambda a, b: sql("({} >= {})", a, b),
    Op.LT: lambda a, b: sql("({} < {})", a, b),
    Op.LE: lambda a, b: sql("({} <= {})", a, b),
}
_ARITH: dict[Op, Callable[[Sql, Sql], Sql]] = {
    Op.SUB: lambda a, b: sql("({} - {})", a, b),
    Op.MUL: lambda a, b: sql("({} * {})", a, b),
    Op.DIV: lambda a, b: sql("({} / {})", a, b),
    Op.MOD: lambda a, b: sql("modulo({}, {})", a, b),  # never '%': clickhouse-connect reads it
}


def _k(kind: Kind) -> Sql:
    return number(int(kind))


class Lowerer:
    """Lowers one expression; owns the lambda-parameter counter and adds to `params`.

    `properties_of` is the table whose `properties` column a `Prop` reads (events, or
    profiles in the profile context); `counts` gives the numeric SQL of each behaviour
    count a `Count` reads (the profile context: the /engage query provides the column);
    `user_properties` is the joined profile's `properties` text a `UserProp` reads."""

    def __init__(
        self,
        params: Params,
        *,
        properties_of: Table = EVENTS,
        counts: Mapping[str, Sql] | None = None,
        user_properties: Sql | None = None,
    ) -> None:
        self.params = params
        self.properties_of = properties_of
        self.user_properties = user_properties
        # Beside a joined profile, the event's properties are read from the text itself (the
        # join's event side carries no hot columns).
        self.event_text = column("properties", properties_of) if user_properties is not None else None
        self.counts = dict(counts or {})
        self._locals = 0
        self._presence_only: frozenset[str] | None = None  # set from the root, the first node lowered

    def fresh(self) -> Sql:
        self._locals += 1
        return local(self._locals)

    # -- tree walk --------------------------------------------------------------------------------
    def lower(self, node: TNode) -> Val:
        if self._presence_only is None:
            self._presence_only = _presence_only(node)
        match node:
            case Const():
                return self.const(node)
            case Prop(name):
                return property_value(name, self.params, self.properties_of, text=self.event_text)
            case UserProp(name):
                if self.user_properties is None:
                    raise AssertionError("user[...] is compiled only where the query joins the profile")
                return property_value(name, self.params, text=self.user_properties)
            case Column(name, kind):
                return self.column(name, kind)
            case Count(name):
                return self.count(name)
            case ListOf(items):
                return self.list_of(items)
            case Apply(op, args, kinds):
                return self.apply(op, args, kinds)
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def const(self, node: Const) -> Val:
        value = node.value
        match node.kind:
            case Kind.STRING:
                return Val(node.kinds, s=self.params.add(value, "String"))
            case Kind.NUMBER | Kind.DATETIME:
                return Val(node.kinds, n=self.params.add(float(value), "Float64"))  # type: ignore[arg-type]
            case Kind.BOOLEAN:
                return Val(node.kinds, b=self.params.add(int(bool(value)), "UInt8"))
            case _:
                return Val(node.kinds)

    def column(self, name: str, kind: Kind) -> Val:
        if kind is D:
            return Val(frozenset({D}), n=sql("(toUnixTimestamp64Milli({}) / 1000)", column(name)))
        return Val(frozenset({S}), s=sql("toString({})", column(name)))

    def count(self, name: str) -> Val:
        counted = self.counts.get(name)
        if counted is None:
            raise ValueError(f"no count column was given for behaviors[{name!r}]")
        return Val(frozenset({N}), n=sql("toFloat64({})", counted))

    def list_of(self, items: tuple[TNode, ...]) -> Val:
        if not items:
            return Val(frozenset({L}), s=sql("'[]'"))
        binds: list[tuple[Sql, Sql]] = []
        parts = [json_text(self.share(self.lower(i), binds)) for i in items]
        text = sql("concat('[', {}, ']')", join(", ',', ", parts))
        return self.close(Val(frozenset({L}), s=text), binds)

    def apply(self, op: Op, args: tuple[TNode, ...], kinds: Kinds) -> Val:
        binds: list[tuple[Sql, Sql]] = []
        if op is Op.DEFINED and isinstance(args[0], Prop) and args[0].name in (self._presence_only or ()):
            return Val(kinds, b=property_defined(args[0].name, self.params, self.properties_of, text=self.event_text))
        if op is Op.IN and isinstance(args[1], ListOf) and args[1].items:
            # `x in [a, b]`: compare keys directly instead of building and re-reading JSON text
            # (element_key gives exactly the keys list_keys would read back from json_text).
            # A datetime is matched by instant against each element as stored (`_stored_at`).
            x = self.share(self.lower(args[0]), binds)
            items = [self.share(self.lower(i), binds) for i in args[1].items]
            has = sql("has([{}], {})", join(", ", [element_key(i) for i in items]), scalar_key(x))
            if D in x.kinds:
                has = if_(is_kind(x, D), cond(or_(*[_stored_at(i, x.nv) for i in items])), has)
            k = if_(is_any(x, SCALARS), _k(B), _k(U))
            return self.close(kinds_val(kinds, k, b=has), binds)
        vals = [self.share(self.lower(a), binds) for a in args]
        return self.close(self.rule(op, kinds, vals), binds)

    # -- sharing ----------------------------------------------------------------------------------
    def share(self, v: Val, binds: list[tuple[Sql, Sql]]) -> Val:
        if v.packed is None and v.size() <= PACK_AT:
            return v
        packed = v.packed if v.packed is not None else _pack(v)
        var = self.fresh()
        binds.append((var, packed))
        return _unpack(v, var)

    def close(self, out: Val, binds: list[tuple[Sql, Sql]]) -> Val:
        if not binds:
            return out
        names = join(", ", [var for var, _ in binds])
        arrays = join(", ", [sql("[{}]", packed) for _, packed in binds])
        whole = sql("arrayElement(arrayMap(({}) -> {}, {}), 1)", names, _pack(out), arrays)
        unpacked = _unpack(out, whole)
        return Val(unpacked.kinds, unpacked.k, unpacked.b, unpacked.n, unpacked.s, packed=whole)

    # -- rules ------------------------------------------------------------------------------------
    def rule(self, op: Op, kinds: Kinds, a: list[Val]) -> Val:
        x = a[0]
        match op:
            case Op.AND | Op.OR:
                truths = [_truth(v) for v in a]
                return Val(kinds, b=cond(and_(*truths) if op is Op.AND else or_(*truths)))
            case Op.NOT:
                k = if_(is_any(x, frozenset({B, U})), _k(B), _k(U))
                b = by_kind(x, {B: lambda: sql("(NOT {})", x.bv), U: ONE_SQL}, ZERO_SQL)
                return kinds_val(kinds, k, b=b)
            case Op.EQ:
                return Val(kinds, b=cond(self.equal(x, a[1])))
            case Op.NE:
                return Val(kinds, b=cond(not_(self.equal(x, a[1]))))
            case Op.GT | Op.GE | Op.LT | Op.LE:
                return self.compare(op, kinds, x, a[1])
            case Op.IN:
                return self.member(kinds, x, a[1])
            case Op.ADD:
                total = sql("({} + {})", x.nv, a[1].nv) if N in x.kinds and N in a[1].kinds else None
                numeric = and_(is_kind(x, N), is_kind(a[1], N), _finite(total)) if total is not None else False
                strings = and_(is_kind(x, S), is_kind(a[1], S))
                concat = sql("concat({}, {})", s_as(x, S), s_as(a[1], S)) if S in x.kinds and S in a[1].kinds else None
                k = multi_if([(numeric, _k(N)), (strings, _k(S))], _k(U))
                return kinds_val(kinds, k, n=total, s=concat)
            case Op.SUB | Op.MUL | Op.DIV | Op.MOD:
                if N not in x.kinds or N not in a[1].kinds:
                    return Val(kinds)
                result = _ARITH[op](x.nv, a[1].nv)
                ok = and_(is_kind(x, N), is_kind(a[1], N), _finite(result))
                return kinds_val(kinds, if_(ok, _k(N), _k(U)), n=result)
            case Op.NEG | Op.FLOOR | Op.CEIL | Op.ROUND:
                if N not in x.kinds:
                    return Val(kinds)
                return kinds_val(kinds, if_(is_kind(x, N), _k(N), _k(U)), n=_numeric_fn(op, x.nv))
            case Op.DEFINED:
                return Val(kinds, b=cond(not_(is_kind(x, U))))
            case Op.BOOLEAN:
                return Val(kinds, b=self.boolean(x))
            case Op.NUMBER:
                return self.number(kinds, x)
            case Op.STRING:
                return self.string(kinds, x)
            case Op.DATETIME:
                return self.datetime(kinds, x)
            case Op.HAS_PREFIX | Op.HAS_SUFFIX:
                if S not in x.kinds or S not in a[1].kinds:
                    return Val(kinds)
                if op is Op.HAS_PREFIX:
                    test = sql("startsWith({}, {})", s_as(x, S), s_as(a[1], S))
                else:
                    test = sql("endsWith({}, {})", s_as(x, S), s_as(a[1], S))
                ok = and_(is_kind(x, S), is_kind(a[1], S))
                return kinds_val(kinds, if_(ok, _k(B), _k(U)), b=cond(and_(ok, test)))
            case Op.LOWER | Op.UPPER:
                if S not in x.kinds:
                    return Val(kinds)
                text = sql("lowerUTF8({})", s_as(x, S)) if op is Op.LOWER else sql("upperUTF8({})", s_as(x, S))
                return kinds_val(kinds, if_(is_kind(x, S), _k(S), _k(U)), s=text)
        raise AssertionError(f"no rule for {op}")  # pragma: no cover

    def equal(self, a: Val, b: Val) -> Cond:
        """`==`: same kind and same value; a datetime equals an ISO string of the same instant."""
        same: dict[Kind, Callable[[], Cond]] = {
            U: lambda: True,
            Z: lambda: True,
            B: lambda: sql("({} = {})", a.bv, b.bv),
            N: lambda: sql("({} = {})", a.nv, b.nv),
            D: lambda: sql("({} = {})", a.nv, b.nv),
            L: lambda: sql("({} = {})", list_keys(s_as(a, L), self.fresh()), list_keys(s_as(b, L), self.fresh())),
            O: lambda: sql("({} = {})", s_as(a, O), s_as(b, O)),
        }
        terms = [
            _string_eq(a, b) if kind is S else and_(is_kind(a, kind), is_kind(b, kind), same[kind]())
            for kind in sorted(a.kinds & b.kinds)
        ]
        if D in a.kinds and S in b.kinds:
            terms.append(
                and_(is_kind(a, D), is_kind(b, S), _null_false(sql("({} = {})", a.nv, parse_datetime(s_as(b, S)))))
            )
        if S in a.kinds and D in b.kinds:
            terms.append(
                and_(is_kind(a, S), is_kind(b, D), _null_false(sql("({} = {})", parse_datetime(s_as(a, S)), b.nv)))
            )
        return or_(*terms)

    def compare(self, op: Op, kinds: Kinds, a: Val, b: Val) -> Val:
        cmp = _CMP[op]
        cases: list[tuple[Cond, Sql]] = []
        operands: tuple[tuple[Kind, Kind, Callable[[], Sql], Callable[[], Sql]], ...] = (
            (N, N, lambda: a.nv, lambda: b.nv),
            (S, S, lambda: s_as(a, S), lambda: s_as(b, S)),
            (D, D, lambda: a.nv, lambda: b.nv),
            (D, S, lambda: a.nv, lambda: parse_datetime(s_as(b, S))),
            (S, D, lambda: parse_datetime(s_as(a, S)), lambda: b.nv),
        )
        for ka, kb, left, right in operands:
            if ka in a.kinds and kb in b.kinds:
                ok = and_(is_kind(a, ka), is_kind(b, kb))
                lhs, rhs = left(), right()
                if ka != kb:
                    ok = and_(ok, sql("isNotNull({})", lhs if ka is S else rhs))
                cases.append((ok, _null_false(cmp(lhs, rhs)) if ka != kb else cmp(lhs, rhs)))
        if not cases:
            return Val(kinds)
        k = multi_if([(c, _k(B)) for c, _ in cases], _k(U))
        return kinds_val(kinds, k, b=multi_if(cases, ZERO_SQL))

    def member(self, kinds: Kinds, a: Val, b: Val) -> Val:
        """`in`: substring for string-in-string, membership for scalar-in-list."""
        cases: list[tuple[Cond, Sql]] = []
        if S in a.kinds and S in b.kinds:
            cases.append((and_(is_kind(a, S), is_kind(b, S)), sql("(position({}, {}) > 0)", s_as(b, S), s_as(a, S))))
        keyed = SCALARS - {D}
        if a.kinds & keyed and L in b.kinds:
            has = sql("has({}, {})", list_keys(s_as(b, L), self.fresh()), scalar_key(a))
            cases.append((and_(is_any(a, keyed), is_kind(b, L)), has))
        if D in a.kinds and L in b.kinds:
            # a datetime is in a list holding an ISO string of its instant, in any accepted form
            e = self.fresh()
            instant = parse_datetime(json_string(e))
            found = sql(
                "arrayExists({} -> (ascii({}) = 34 AND ifNull({} = {}, 0)), JSONExtractArrayRaw({}))",
                e,
                e,
                instant,
                a.nv,
                s_as(b, L),
            )
            cases.append((and_(is_kind(a, D), is_kind(b, L)), found))
        if not cases:
            return Val(kinds)
        k = multi_if([(c, _k(B)) for c, _ in cases], _k(U))
        return kinds_val(kinds, k, b=multi_if(cases, ZERO_SQL))

    def boolean(self, x: Val) -> Sql:
        """boolean(): false for "false", 0, null, undefined and ""; true for any other value."""
        return by_kind(
            x,
            {
                B: lambda: x.bv,
                N: lambda: sql("toUInt8({} != 0)", x.nv),
                S: lambda: sql("toUInt8({} NOT IN ('', 'false'))", s_as(x, S)),
                D: ONE_SQL,
                L: ONE_SQL,
                O: ONE_SQL,
            },
            ZERO_SQL,
        )

    def number(self, kinds: Kinds, x: Val) -> Val:
        parsed = sql("toFloat64OrZero({})", s_as(x, S)) if S in x.kinds else None
        n = by_kind(
            x,
            {N: lambda: x.nv, D: lambda: x.nv, B: lambda: sql("toFloat64({})", x.bv), S: lambda: parsed or ZERO_SQL},
            sql("toFloat64(0)"),
        )
        numeric = "match({}, '^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?\\\\z')"
        valid_string = and_(sql(numeric, s_as(x, S)), _finite(parsed)) if parsed is not None else False
        k = by_kind(x, {N: _k(N), D: _k(N), B: _k(N), S: lambda: if_(valid_string, _k(N), _k(U))}, _k(U))
        return kinds_val(kinds, k, n=n)

    def string(self, kinds: Kinds, x: Val) -> Val:
        s = by_kind(
            x,
            {
                S: lambda: s_as(x, S),
                N: lambda: num_text(x.nv),
                B: lambda: sql("if({}, 'true', 'false')", x.bv),
                D: lambda: iso_text(x.nv),
            },
            sql("''"),
        )
        k = by_kind(x, {U: _k(U), Z: _k(Z), L: _k(U), O: _k(U)}, _k(S))
        return kinds_val(kinds, k, s=s)

    def datetime(self, kinds: Kinds, x: Val) -> Val:
        parsed = parse_datetime(s_as(x, S)) if S in x.kinds else None
        # epoch seconds, or milliseconds from 1e10 on (check.epoch_seconds)
        seconds = sql("if({} >= 1e10, {} / 1000, {})", x.nv, x.nv, x.nv) if N in x.kinds else None
        in_range = sql("({} >= -2208988800. AND {} < 10413792000.)", seconds, seconds) if seconds is not None else None
        if not (DATETIME_MIN == -2208988800.0 and DATETIME_MAX == 10413792000.0 and MILLIS_FROM == 1e10):
            raise AssertionError(
                "invariant: DATETIME_MIN == -2208988800.0 and DATETIME_MAX == 10413792000.0 and MILLIS_FROM == 1e10"
            )
        n = by_kind(
            x,
            {D: lambda: x.nv, N: lambda: seconds or x.nv, S: lambda: sql("ifNull({}, 0.)", present(parsed))},
            sql("toFloat64(0)"),
        )
        k = by_kind(
            x,
            {
                D: _k(D),
                N: lambda: if_(in_range or False, _k(D), _k(U)),
                S: lambda: if_(sql("isNotNull({})", present(parsed)), _k(D), _k(U)),
            },
            _k(U),
        )
        return kinds_val(kinds, k, n=n)


ZERO_SQL = sql("toUInt8(0)")
ONE_SQL = sql("toUInt8(1)")


def _string_eq(a: Val, b: Val) -> Cond:
    """`a` and `b` are equal strings (the side with a JSON text compares that, `string_equals`)."""
    if a.json is None and b.json is not None:
        a, b = b, a
    return and_(is_kind(b, S), string_equals(a, s_as(b, S)))


def _stored_at(item: Val, n: Sql) -> Cond:
    """A list literal element, as the list stores it, is an ISO string of the instant `n`.

    A string element is parsed; a datetime element is stored as its `string()` text,
    whole seconds, so it matches the instant of that text: floor(seconds).
    """
    text = (
        and_(is_kind(item, S), _null_false(sql("({} = {})", parse_datetime(s_as(item, S)), n)))
        if S in item.kinds
        else False
    )
    stamp = and_(is_kind(item, D), sql("(floor({}) = {})", item.nv, n)) if D in item.kinds else False
    return or_(text, stamp)


def _presence_only(root: TNode) -> frozenset[str]:
    """Properties that `root` uses only as `defined(properties[name])`, never reading the value."""
    defined: set[str] = set()
    read: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        match node:
            case Apply(Op.DEFINED, (Prop(name),)):
                defined.add(name)
            case Prop(name):
                read.add(name)
            case Apply(_, args):
                stack.extend(args)
            case ListOf(items):
                stack.extend(items)
    return frozenset(defined - read)


def _truth(v: Val) -> Cond:
    """`and`/`or` operand: true only for boolean true (undefined and other kinds are false).

    `b` is 0 whenever the kind is not boolean (values.py), so `b` alone is the answer.
    """
    return v.b if v.b is not None else False


def _finite(n: Sql | None) -> Cond:
    return sql("isFinite({})", n) if n is not None else False


def _null_false(c: Sql) -> Sql:
    return sql("ifNull({}, 0)", c)


def _numeric_fn(op: Op, n: Sql) -> Sql:
    match op:
        case Op.NEG:
            return sql("(-{})", n)
        case Op.FLOOR:
            return sql("floor({})", n)
        case Op.CEIL:
            return sql("ceil({})", n)
        case _:
            # JavaScript Math.round: halves go up (-2.5 -> -2), unlike ClickHouse round().
            return sql("if({} - floor({}) >= 0.5, ceil({}), floor({}))", n, n, n, n)


def _pack(v: Val) -> Sql:
    return sql(
        "tuple(toUInt8({}), toUInt8({}), toFloat64({}), toString({}))",
        v.kind,
        v.b if v.b is not None else sql("0"),
        v.n if v.n is not None else sql("0"),
        v.s if v.s is not None else sql("''"),
    )


def _unpack(v: Val, whole: Sql) -> Val:
    def part(i: int) -> Sql:
        return sql("tupleElement({}, {})", whole, number(i))

    return Val(
        v.kinds,
        part(1) if v.k is not None else None,
        part(2) if v.b is not None else None,
        part(3) if v.n is not None else None,
        part(4) if v.s is not None else None,
    )
