"""Data-deletion tasks (`data_deletions`): the tracked jobs of `POST /api/app/data-deletions/v3.0/`
(`footfall.services.app.data_deletion`)."""

from footfall.shared.schema.catalog import DATA_DELETIONS

STATEMENTS = [DATA_DELETIONS.create_statement()]
