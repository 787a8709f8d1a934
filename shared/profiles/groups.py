"""`data_group_id`: the numeric id of a group key (the group property name), as `/engage` takes it.

Mixpanel addresses a group key by a signed 64-bit id (semantics.md §4: "may be negative,
e.g. -1405123841946871899"). Ours is deterministic, so every process and every store agrees
without a registry: the first 8 bytes of blake2b(group_key as UTF-8, digest_size=8) read
as a signed big-endian integer.
"""

from __future__ import annotations

import hashlib

__all__ = ["data_group_id"]


def data_group_id(group_key: str) -> int:
    """The signed 64-bit id of `group_key`."""
    digest = hashlib.blake2b(group_key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
