"""Hot property columns: one materialised column per popular event property.

`FOOTFALL_HOT_PROPERTIES` (`footfall.shared.config.HotSettings`) names the properties; for
each, the `events` table gets a column holding exactly what the expression compiler reads
for it, the raw JSON text of the value ('' when the property is missing):

    hp_browser_1a2b3c4d String MATERIALIZED JSONExtractRaw(properties, '$browser') CODEC(ZSTD(1))

MATERIALIZED: the warehouse computes it from `properties` on every insert, so ingestion
does not change, `SELECT *` and `INSERT` without a column list ignore it, and `/export`
(which reads the `properties` text) is untouched. The columns are table-wide (all projects).

Adding a name at a later start adds the column (`ADD COLUMN IF NOT EXISTS`) and starts
`MATERIALIZE COLUMN` (one mutation for all the columns added at that start, one pass over
`properties`), which writes it into the parts already stored, in the background. Until a
part has been rewritten, reading the column from it returns the column's expression
computed on the fly (verified on chDB 26.9: a part written before the column existed
answers `JSONExtractRaw(properties, name)` for it, under FINAL and in PREWHERE too;
`tests/integration/query/test_hot_columns.py` holds it to that), so the compiler may read
the column as soon as it exists: answers are exact at once and get faster as the mutation
proceeds. Removing a name stops its use; the column stays (drop it
by hand with `ALTER TABLE events DROP COLUMN <name>` to save its insert cost).

The column name is derived from the property name (a readable part and a hash of the full
name), so it is an identifier whatever the name, and two names never share one (a 32-bit
hash collision among the configured names is refused). Which
names are in use is process state, set by the composition roots (`use`) after `ensure`
and read by the compiler's property seam (`footfall.shared.expr.values`) through
`footfall.shared.sql.ident.hot_column`. Profiles keep their properties in JSON only.

The same seam counts the event properties it reads from the JSON text (`take_reads`): with
FOOTFALL_HOT_AUTO, `footfall.shared.schema.hot_auto` makes the most read of them hot. Such
a column carries the comment `auto-hot:<name>` (`mark_auto`), by which any process finds it
again (`auto_names`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import structlog

from footfall.shared.schema.catalog import EVENTS

if TYPE_CHECKING:
    from footfall.shared.warehouse.client import Warehouse

__all__ = [
    "MAX_NAME",
    "active_column",
    "add_statement",
    "auto_names",
    "check_name",
    "column_name",
    "ensure",
    "expression",
    "in_use",
    "in_use_columns",
    "mark_auto",
    "materialize_statement",
    "take_reads",
    "use",
    "using",
]

log = structlog.get_logger(__name__)

MAX_NAME = 255
PREFIX = "hp_"
TYPE = "String"
CODEC = "ZSTD(1)"
_COLUMN = re.compile(r"\Ahp_[a-z0-9_]{0,24}_[0-9a-f]{8}\Z")

AUTO_COMMENT = "auto-hot:"  # the comment of a column made hot by `hot_auto`, before its property name
_MAX_COUNTED = 10_000  # distinct property names counted between two `take_reads`

_in_use: dict[str, str] = {}  # property name -> column name, events only
_reads: Counter[str] = Counter()  # event property -> reads from the JSON text since `take_reads`
_reads_lock = threading.Lock()


def check_name(name: str) -> str:
    """A property name that may be hot: 1-255 characters, no control characters."""
    if not name or len(name) > MAX_NAME or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"a hot property name has 1 to {MAX_NAME} characters and no control characters: {name!r}")
    return name


def column_name(name: str) -> str:
    """`hp_<readable part>_<8 hex digits of the name's hash>`: an identifier for any name."""
    readable = re.sub(r"[^a-z0-9]+", "_", check_name(name).lower()).strip("_")[:24]
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=4).hexdigest()
    column = f"{PREFIX}{readable}_{digest}"
    if not _COLUMN.match(column):  # pragma: no cover - the construction guarantees it
        raise AssertionError(column)
    return column


def _literal(text: str) -> str:
    """A ClickHouse string literal (operator configuration, or a name `hot_auto.AUTO_NAME`
    let through: no character that could end or escape it)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def expression(name: str) -> str:
    return f"JSONExtractRaw(properties, {_literal(check_name(name))})"


def add_statement(name: str) -> str:
    return (
        f"ALTER TABLE {EVENTS.name} ADD COLUMN IF NOT EXISTS {column_name(name)} {TYPE} "
        f"MATERIALIZED {expression(name)} CODEC({CODEC})"
    )


def materialize_statement(names: Iterable[str]) -> str:
    """One mutation that writes the columns of `names` into the stored parts (one pass over
    `properties`); asynchronous: the embedded engine's sessions wait for mutations by
    default (`mutations_sync` = 1), and a start must not wait for the whole table."""
    commands = ", ".join(f"MATERIALIZE COLUMN {column_name(n)}" for n in names)
    return f"ALTER TABLE {EVENTS.name} {commands} SETTINGS mutations_sync = 0"


def _existing(warehouse: Warehouse) -> dict[str, tuple[str, str, str]]:
    """column -> (type, default kind, default expression) of the events table's hot columns."""
    rows = warehouse.query(
        "SELECT name, type, default_kind, default_expression FROM system.columns "
        "WHERE database = currentDatabase() AND table = {t:String} AND startsWith(name, {p:String})",
        {"t": EVENTS.name, "p": PREFIX},
    )
    return {str(n): (str(t), str(k), str(e)) for n, t, k, e in rows}


def _parts_without(warehouse: Warehouse, columns: list[str]) -> dict[str, int]:
    """column -> how many active parts of events do not store it yet."""
    ((parts,),) = warehouse.query(
        "SELECT count() FROM system.parts WHERE database = currentDatabase() AND table = {t:String} AND active",
        {"t": EVENTS.name},
    )
    having = dict(
        warehouse.query(
            "SELECT column, uniqExact(name) FROM system.parts_columns WHERE database = currentDatabase() "
            "AND table = {t:String} AND active AND column IN {c:Array(String)} GROUP BY column",
            {"t": EVENTS.name, "c": columns},
        )
    )
    return {c: int(parts) - int(having.get(c, 0)) for c in columns}


def _materializing(warehouse: Warehouse) -> set[str]:
    """Columns with an unfinished MATERIALIZE COLUMN mutation on events."""
    rows = warehouse.query(
        "SELECT command FROM system.mutations WHERE database = currentDatabase() AND table = {t:String} "
        "AND NOT is_done",
        {"t": EVENTS.name},
    )
    found = set()
    for (command,) in rows:
        found.update(re.findall(r"MATERIALIZE COLUMN `?(hp_[a-z0-9_]+)`?", str(command)))
    return found


def ensure(warehouse: Warehouse, names: Iterable[str]) -> tuple[str, ...]:
    """Give `events` a hot column for each name (adding and materialising what is missing);
    return the names whose column is in place, in order. A column of that name that is not
    the expected materialised expression is left alone and not used (logged)."""
    wanted = list(dict.fromkeys(check_name(n) for n in names))
    if not wanted:
        return ()
    columns = {n: column_name(n) for n in wanted}
    if len(set(columns.values())) != len(columns):  # pragma: no cover - a 32-bit hash collision
        raise ValueError("two hot property names map to one column; rename one")
    before = _existing(warehouse)
    for name in wanted:
        if columns[name] not in before:
            warehouse.command(add_statement(name))
    after = _existing(warehouse)
    usable = []
    for name in wanted:
        type_, kind, expr = after.get(columns[name], ("", "", ""))
        if type_ != TYPE or kind != "MATERIALIZED" or not expr.startswith("JSONExtractRaw(properties, "):
            log.warning("hot_column_unusable", property=name, column=columns[name], type=type_, kind=kind)
            continue
        usable.append(name)
    if usable:
        missing = _parts_without(warehouse, [columns[n] for n in usable])
        running = _materializing(warehouse)
        todo = [n for n in usable if missing[columns[n]] and columns[n] not in running]
        if todo:
            warehouse.command(materialize_statement(todo))  # a mutation; it runs in the background
            log.info("hot_columns_materializing", properties=todo, parts=max(missing[columns[n]] for n in todo))
    return tuple(usable)


def use(names: Iterable[str]) -> None:
    """From now on, the compiler reads these properties of events from their hot columns
    (only names `ensure` returned: the columns must exist). One swap: a query compiled
    meanwhile sees the old set or the new one."""
    global _in_use
    _in_use = {n: column_name(n) for n in names}


def in_use() -> tuple[str, ...]:
    return tuple(_in_use)


def in_use_columns() -> tuple[tuple[str, str], ...]:
    """(property, column) of the names in use: what the `/import` fast path fills itself."""
    return tuple(_in_use.items())


@contextmanager
def using(names: Iterable[str]) -> Iterator[None]:
    """`use(names)` for a block, then the previous set again (tests, benchmarks)."""
    saved = tuple(_in_use)
    use(names)
    try:
        yield
    finally:
        use(saved)


def take_reads() -> dict[str, int]:
    """The event properties read from the JSON text since the last call, with their counts."""
    global _reads
    with _reads_lock:
        taken, _reads = _reads, Counter()
    return dict(taken)


def _note_read(name: str) -> None:
    with _reads_lock:
        if name in _reads or len(_reads) < _MAX_COUNTED:  # bounded: past the cap only known names count
            _reads[name] += 1


def mark_auto(warehouse: Warehouse, names: Iterable[str]) -> None:
    """Comment the columns of `names` as made hot automatically (`auto_names` finds them)."""
    for name in names:
        warehouse.command(
            f"ALTER TABLE {EVENTS.name} COMMENT COLUMN {column_name(name)} {_literal(AUTO_COMMENT + check_name(name))}"
        )


def auto_names(warehouse: Warehouse) -> tuple[str, ...]:
    """The properties whose column `mark_auto` commented (by any process), oldest column first."""
    rows = warehouse.query(
        "SELECT name, comment FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
        "AND startsWith(name, {p:String}) AND startsWith(comment, {c:String}) ORDER BY position",
        {"t": EVENTS.name, "p": PREFIX, "c": AUTO_COMMENT},
    )
    found = []
    for column, comment in rows:
        name = str(comment)[len(AUTO_COMMENT) :]
        try:
            if column_name(name) == column:  # a comment edited by hand names another column: ignored
                found.append(name)
        except ValueError:
            continue
    return tuple(found)


def active_column(table: str, name: str) -> str | None:
    """The hot column of property `name` of `table`, when it is in use (events only)."""
    if table != EVENTS.name:
        return None
    column = _in_use.get(name)
    if column is None:
        _note_read(name)
    return column
