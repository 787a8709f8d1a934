"""`Params`: the bound values of one query, handed to clickhouse-connect as `parameters=`.

`add(value, ch_type)` stores the value under a fresh name and returns the server-side
placeholder `{p3:String}`. Values never appear in SQL text; the ClickHouse type comes
from a fixed list so a type string cannot smuggle text either.
"""

from __future__ import annotations

import math
import re
from typing import Any

from footfall.shared.sql.sql import Sql, _unchecked

__all__ = ["Params"]

_TYPES = frozenset(
    {
        "String",
        "Float64",
        "Int64",
        "UInt64",
        "UInt32",
        "UInt8",
        "Bool",
        "Date",
        "DateTime64(3, 'UTC')",
        "Array(String)",
        "Array(UInt64)",
        "Array(Float64)",
        "Array(Tuple(String, String))",
    }
)
_PREFIX = re.compile(r"[a-z][a-z_]{0,15}")


class Params:
    """Bound values of one query. One `Params` per query; fragments from several compilers share it."""

    def __init__(self, prefix: str = "p") -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"bad parameter prefix {prefix!r}")
        self._prefix = prefix
        self._values: dict[str, Any] = {}

    def add(self, value: Any, ch_type: str) -> Sql:
        if ch_type not in _TYPES:
            raise ValueError(f"unsupported parameter type {ch_type!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("parameters must be finite numbers")
        name = f"{self._prefix}{len(self._values)}"
        self._values[name] = value
        return _unchecked("{" + name + ":" + ch_type + "}")

    @property
    def values(self) -> dict[str, Any]:
        """A copy of the collected values, for clickhouse-connect's `parameters=`."""
        return dict(self._values)

    def __len__(self) -> int:
        return len(self._values)
