"""Hot columns chosen by use: the event properties reports read most from the JSON text.

`start_hot_columns` is what a query process (`footfall query`, `footfall serve`) does at
start: the configured names (FOOTFALL_HOT_PROPERTIES) and, with FOOTFALL_HOT_AUTO > 0,
the properties made hot automatically before (by this process or another: their columns'
comment names them, `hot.auto_names`) get their columns and are read from them.

With FOOTFALL_HOT_AUTO > 0 it also returns `AutoHot`, which every FOOTFALL_HOT_AUTO_SECONDS
takes the counts of the event properties compiled queries read from the JSON text
(`hot.take_reads`) and makes hot those read at least FOOTFALL_HOT_AUTO_READS times, most
read first, while fewer than FOOTFALL_HOT_AUTO are: `hot.ensure` adds the column (computed
on insert from then on) and starts the mutation that fills the stored parts in the
background; answers are exact from the first query either way (see `hot`), and get faster
as the mutation proceeds. A column made hot stays so (an operator drops it by hand).
Off by default: on a large store the mutation takes one core for minutes (511 s for 11
columns on 100M events, bench `query_segmentation`), and every hot column adds insert CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import structlog

from footfall.shared import metrics
from footfall.shared.config import HotSettings
from footfall.shared.schema import hot

if TYPE_CHECKING:
    from footfall.shared.warehouse.client import Warehouse

__all__ = ["AUTO_NAME", "AutoHot", "choose", "promote", "start_hot_columns"]

log = structlog.get_logger(__name__)


# The names a round may choose. They come from request text and end up in DDL (the column's
# expression and comment, where ClickHouse takes no bound values), so only through this
# whitelist: no quote, backslash or other character a literal could be escaped with. Other
# names stay readable from the JSON text, and an operator may still configure them.
AUTO_NAME = re.compile(r"\A[A-Za-z0-9_$.:\- ]{1,100}\Z")


def choose(reads: Mapping[str, int], hot_now: set[str], room: int, min_reads: int) -> list[str]:
    """The properties to make hot: read at least `min_reads` times, not hot yet, names of
    `AUTO_NAME`; the most read first (ties by name), at most `room`."""
    picked: list[str] = []
    for name, count in sorted(reads.items(), key=lambda item: (-item[1], item[0])):
        if len(picked) >= room or count < min_reads:
            break
        if name not in hot_now and AUTO_NAME.match(name):
            picked.append(name)
    return picked


def promote(warehouse: Warehouse, configured: tuple[str, ...], settings: HotSettings, reads: Mapping[str, int]) -> None:
    """One round (blocking): make the most read properties hot, then read every hot property
    (configured, and automatic ones of any process) from its column."""
    auto = hot.auto_names(warehouse)
    picked = choose(reads, {*configured, *auto}, settings.auto - len(auto), settings.auto_reads)
    usable = hot.ensure(warehouse, [*auto, *picked])  # one call: one mutation for what is missing
    added = [n for n in picked if n in usable]
    if added:
        hot.mark_auto(warehouse, added)
        metrics.HOT_AUTO_ADDED.inc(len(added))
        log.info("hot_columns_auto", properties=added, reads={n: reads[n] for n in added})
    _use(configured, usable)


def _use(configured: tuple[str, ...], usable: tuple[str, ...]) -> None:
    """Read the configured names and the other usable ones (made hot by use) from their columns."""
    hot.use(dict.fromkeys((*configured, *usable)))
    metrics.HOT_COLUMNS.labels("configured").set(len(configured))
    metrics.HOT_COLUMNS.labels("auto").set(len(set(usable) - set(configured)))


class AutoHot:
    """The background rounds of `promote` (a `lifecycle.Background`)."""

    def __init__(self, warehouse: Warehouse, configured: tuple[str, ...], settings: HotSettings) -> None:
        self.warehouse = warehouse
        self.configured = configured
        self.settings = settings
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="hot-columns-auto")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def round(self) -> None:
        reads = hot.take_reads()
        metrics.HOT_AUTO_JSON_READS.inc(sum(reads.values()))
        try:
            await self.warehouse.run(promote, self.warehouse, self.configured, self.settings, reads)  # blocking IO
        except Exception as exc:  # the store is away or refused the ALTER: the next round tries again
            log.warning("hot_columns_auto_failed", error=str(exc)[:500])

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.auto_seconds)
            await self.round()


def start_hot_columns(warehouse: Warehouse, settings: HotSettings) -> AutoHot | None:
    """At a query process's start (blocking): the hot columns in use; `AutoHot` to run beside
    the app when FOOTFALL_HOT_AUTO > 0."""
    auto = hot.auto_names(warehouse) if settings.auto > 0 else ()
    # One `ensure` for both: the columns a start adds are filled by one mutation (one pass).
    usable = hot.ensure(warehouse, [*settings.names, *auto])
    configured = tuple(n for n in usable if n in settings.names)
    _use(configured, usable)
    if settings.auto <= 0:
        return None
    hot.take_reads()  # counts start with this process's queries
    return AutoHot(warehouse, configured, settings)
