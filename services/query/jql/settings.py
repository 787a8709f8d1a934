"""The JQL limits from the environment (`FOOTFALL_JQL_*`)."""

from __future__ import annotations

from footfall.services.query.jql.engine import JqlLimits
from footfall.shared.config import Env

__all__ = ["jql_limits"]


def jql_limits(env: Env) -> JqlLimits:
    """`FOOTFALL_JQL_TIMEOUT_SECONDS` (120), `FOOTFALL_JQL_MEMORY_MB` (512),
    `FOOTFALL_JQL_MAX_OUTPUT_BYTES` (100 MB)."""
    return JqlLimits(
        timeout_seconds=env.number("JQL_TIMEOUT_SECONDS", JqlLimits.timeout_seconds),
        memory_mb=env.integer("JQL_MEMORY_MB", JqlLimits.memory_mb),
        max_output_bytes=env.integer("JQL_MAX_OUTPUT_BYTES", JqlLimits.max_output_bytes),
    )
