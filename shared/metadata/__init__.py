"""Projects, credentials, service accounts and organizations: the model, the `Directory`
snapshot the request path reads (no warehouse round trip per request), the warehouse store
(`MetadataRepository`) and its in-memory twin (`MemoryMetadataStore`).

Organizations are ids (semantics-2 §17.1): a deployment starts with organization 1; each
project and each service account belongs to exactly one.
"""

from footfall.shared.metadata.memory import MemoryMetadataStore
from footfall.shared.metadata.model import (
    DEFAULT_ORGANIZATION,
    MAX_NAME_LENGTH,
    AccountRecord,
    Directory,
    MetadataError,
    Project,
    ServiceAccount,
    check_name,
    check_role,
    check_timezone,
    check_username,
    to_ms,
)
from footfall.shared.metadata.store import CREDENTIAL_KINDS, MetadataRepository, MetadataStore, now
from footfall.shared.metadata.usage import UsageRecorder

__all__ = [
    "CREDENTIAL_KINDS",
    "DEFAULT_ORGANIZATION",
    "MAX_NAME_LENGTH",
    "AccountRecord",
    "Directory",
    "MemoryMetadataStore",
    "MetadataError",
    "MetadataRepository",
    "MetadataStore",
    "Project",
    "ServiceAccount",
    "UsageRecorder",
    "check_name",
    "check_role",
    "check_timezone",
    "check_username",
    "now",
    "to_ms",
]
