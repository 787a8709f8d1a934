"""Organizations, regions, service-account creators and `last_used` (semantics-2 §15, §17).

Only additions: projects get `organization_id` (default 1, the organization every deployment
starts with) and `region` (default "": a project created before regions belongs to whichever
deployment holds it); service accounts get `creator`; `service_account_usage` records logins.
A store made from the current catalog already has the columns (m0002 renders them), so the
`ADD COLUMN IF NOT EXISTS` statements change only older stores.
"""

from footfall.shared.schema.catalog import PROJECTS, SERVICE_ACCOUNT_USAGE, SERVICE_ACCOUNTS, Table


def _add_column(table: Table, name: str) -> str:
    column = next(c for c in table.columns if c.name == name)
    return f"ALTER TABLE {table.name} ADD COLUMN IF NOT EXISTS {column.definition()}"


STATEMENTS = [
    _add_column(PROJECTS, "organization_id"),
    _add_column(PROJECTS, "region"),
    _add_column(SERVICE_ACCOUNTS, "creator"),
    SERVICE_ACCOUNT_USAGE.create_statement(),
]
