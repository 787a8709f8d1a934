"""`render`: the finished text of a fragment. It never decides anything."""

from __future__ import annotations

from footfall.shared.sql.sql import Sql

__all__ = ["render"]


def render(fragment: Sql) -> str:
    if not isinstance(fragment, Sql):
        raise TypeError("render() takes an Sql fragment")
    return fragment.text
