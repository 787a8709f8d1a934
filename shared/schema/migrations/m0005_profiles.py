"""User and group profiles: the update log and the current state (see the catalog for both)."""

from footfall.shared.schema.catalog import PROFILE_UPDATES, PROFILES

STATEMENTS = [PROFILE_UPDATES.create_statement(), PROFILES.create_statement()]
