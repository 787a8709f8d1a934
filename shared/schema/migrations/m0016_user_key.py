"""The events' user key (`catalog.USER_KEY`): a MATERIALIZED column, so inserts fill it and
parts stored before it compute it when read; the second statement writes it into those parts
in the background (asynchronous: a start does not wait for a pass over the whole table, and
until it is done the reads compute the same values)."""

from footfall.shared.schema.catalog import EVENTS, USER_KEY, USER_KEY_EXPRESSION

STATEMENTS = [
    f"ALTER TABLE {EVENTS.name} ADD COLUMN IF NOT EXISTS {USER_KEY} UInt128 MATERIALIZED {USER_KEY_EXPRESSION}",
    f"ALTER TABLE {EVENTS.name} MATERIALIZE COLUMN {USER_KEY} SETTINGS mutations_sync = 0",
]
