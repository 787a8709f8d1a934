"""The catalog: every warehouse table, its columns and their ClickHouse types, written once.

Migrations render their `CREATE TABLE` statements from it (`Table.create_statement`), the
stream row builders fill its columns in its order (`Table.column_names`), and the SQL
layer takes identifiers only from it (`footfall.shared.sql.ident`, `footfall.shared.sql.scope`).

A table is a *tenant* table when each row belongs to one project: the SQL layer reads it
only through a source built from a `Scope`, which writes the project guard (and, for a
time-ordered table, the time range) itself. Every tenant table's sorting key starts with
`project_id`, so the guard is also what the primary index prunes by.

A column added later is added here *and* by a migration (`ALTER TABLE … ADD COLUMN IF NOT
EXISTS`), so that a new store created from the catalog and an old one upgraded by the
migrations end up alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "COHORTS",
    "DATA_DELETIONS",
    "ENGAGE_SESSIONS",
    "EVENTS",
    "EVENT_COUNTS_15M",
    "EXPERIMENTS",
    "ID_COUNTERS",
    "KNOWN_IDS",
    "MIGRATION_JOBS",
    "NO_USER_KEY",
    "PROFILES",
    "PROFILE_HEADS",
    "PROFILE_UPDATES",
    "PROJECTS",
    "PROJECT_CREDENTIALS",
    "PROJECT_RETENTION",
    "SAVED_FUNNELS",
    "SAVED_REPORTS",
    "SERVICE_ACCOUNTS",
    "SERVICE_ACCOUNT_PROJECTS",
    "SERVICE_ACCOUNT_USAGE",
    "TABLES",
    "USER_KEY",
    "USER_KEY_EXPRESSION",
    "Column",
    "Table",
]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    codec: str | None = None
    default: str | None = None

    def definition(self) -> str:
        text = f"{self.name} {self.type}"
        if self.default is not None:
            text += f" DEFAULT {self.default}"
        if self.codec is not None:
            text += f" CODEC({self.codec})"
        return text


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    engine: str
    order_by: str
    partition_by: str | None = None
    tenant: bool = True  # one project per row: read only through a scoped source
    time_column: str | None = None  # time-ordered: every read also carries a time range
    ttl: str | None = None  # a TTL expression: rows expire (are deleted on merges) after it
    settings: str | None = None  # table SETTINGS of the CREATE (new tables only)

    def __post_init__(self) -> None:
        names = self.column_names
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate column names")
        if self.tenant and not self.order_by.startswith("(project_id") and self.order_by != "project_id":
            raise ValueError(f"{self.name}: a tenant table's sorting key must start with project_id")
        if self.time_column is not None and self.time_column not in names:
            raise ValueError(f"{self.name}: unknown time column {self.time_column}")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> MappingProxyType[str, str]:
        return MappingProxyType({c.name: c.type for c in self.columns})

    def create_statement(self) -> str:
        columns = ",\n    ".join(c.definition() for c in self.columns)
        partition = f"\nPARTITION BY {self.partition_by}" if self.partition_by else ""
        ttl = f"\nTTL {self.ttl}" if self.ttl else ""
        settings = f"\nSETTINGS {self.settings}" if self.settings else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {self.name}\n(\n    {columns}\n)\n"
            f"ENGINE = {self.engine}{partition}\nORDER BY {self.order_by}{ttl}{settings}"
        )


_UTC_MS = "DateTime64(3, 'UTC')"
_UTC_US = "DateTime64(6, 'UTC')"

# Events (m0001). ReplacingMergeTree over the full dedup identity: rows with the same
# sorting key are duplicates and merges keep the most recently ingested copy.
# The hot property columns (`footfall.shared.schema.hot`, one per FOOTFALL_HOT_PROPERTIES name)
# are added at start, outside this list: MATERIALIZED from `properties`, never inserted, not in
# `SELECT *`, and read only through the compiler's property seam.
EVENTS = Table(
    "events",
    (
        Column("project_id", "UInt64"),
        Column("time", _UTC_MS),
        Column("event", "LowCardinality(String)"),
        Column("distinct_id", "String"),
        Column("insert_id", "String"),
        Column("properties", "String", codec="ZSTD(1)"),
        Column("city", "LowCardinality(String)"),
        Column("region", "LowCardinality(String)"),
        Column("country_code", "LowCardinality(String)"),
        Column("dedup_hash", "FixedString(16)"),
        Column("ingested_at", _UTC_MS),
    ),
    engine="ReplacingMergeTree(ingested_at)",
    partition_by="toYYYYMM(time)",
    order_by="(project_id, toDate(time), event, distinct_id, time, insert_id)",
    time_column="time",
)

# The user key of an event (m0016): a 128-bit SipHash of its distinct_id, a MATERIALIZED column
# of events outside the list above (like the hot columns: the warehouse computes it on insert,
# it is never inserted and not in `SELECT *`). The per-user reports group and join by it: a
# fixed-width number instead of a string both to read and to hash. Two ids share a key with
# probability ~2^-128 per pair. `sipHash128Reference` is the standard SipHash-2-4-128 (the
# engine keeps its output stable across versions, unlike the older `sipHash128`), so keys
# stored by one version match those another computes.
USER_KEY = "user_key"
_USER_KEY_OF = "reinterpretAsUInt128(sipHash128Reference({}))"
USER_KEY_EXPRESSION = _USER_KEY_OF.format("distinct_id")
NO_USER_KEY = _USER_KEY_OF.format("''")  # the key of '' (never a user)

# Exact per-quarter-hour distinct sets of events and users (m0003).
EVENT_COUNTS_15M = Table(
    "event_counts_15m",
    (
        Column("project_id", "UInt64"),
        Column("event", "LowCardinality(String)"),
        Column("quarter", "DateTime('UTC')"),
        Column("events", "AggregateFunction(uniqExact, FixedString(16))"),
        Column("users", "AggregateFunction(uniqExact, String)"),
    ),
    engine="AggregatingMergeTree",
    partition_by="toYYYYMM(quarter)",
    order_by="(project_id, event, quarter)",
    time_column="quarter",
)

# Metadata (m0002): versioned by `updated_at`, read with FINAL, `deleted` rows skipped.
PROJECTS = Table(
    "projects",
    (
        Column("project_id", "UInt64"),
        Column("name", "String"),
        Column("timezone", "String"),
        Column("created_at", _UTC_MS),
        Column("updated_at", _UTC_MS),
        Column("deleted", "UInt8", default="0"),
        # m0009: the owning organization, and the data-residency region ("" = before regions)
        Column("organization_id", "UInt64", default="1"),
        Column("region", "LowCardinality(String)", default="''"),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="project_id",
    tenant=False,  # the directory of projects itself: read by the credential layer
)

# Retention (m0015): days of events a project keeps (footfall.shared.retention); no row, or
# days = 0, keeps everything. Versioned by `updated_at`, read with FINAL.
PROJECT_RETENTION = Table(
    "project_retention",
    (
        Column("project_id", "UInt64"),
        Column("days", "UInt32"),
        Column("updated_at", _UTC_MS),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="project_id",
    tenant=False,  # read whole to render the tables' TTL rules
)

PROJECT_CREDENTIALS = Table(
    "project_credentials",
    (
        Column("project_id", "UInt64"),
        Column("kind", "LowCardinality(String)"),
        Column("lookup", "String"),
        Column("secret_hash", "String"),
        Column("created_at", _UTC_MS),
        Column("updated_at", _UTC_MS),
        Column("deleted", "UInt8", default="0"),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(project_id, kind, lookup)",
    tenant=False,  # looked up across projects by keyed hash: that is how a request finds its project
)

SERVICE_ACCOUNTS = Table(
    "service_accounts",
    (
        Column("sa_id", "UInt64"),
        Column("organization_id", "UInt64"),
        Column("username", "String"),
        Column("secret_hash", "String"),
        Column("created_at", _UTC_MS),
        Column("expires_at", f"Nullable({_UTC_MS})"),
        Column("updated_at", _UTC_MS),
        Column("deleted", "UInt8", default="0"),
        Column("creator", "Nullable(UInt64)"),  # m0009: the creating service account (null: the CLI)
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="sa_id",
    tenant=False,
)

# When a service account last logged in (m0009): written at most once a minute per account and
# process; the newest row per account counts.
SERVICE_ACCOUNT_USAGE = Table(
    "service_account_usage",
    (
        Column("sa_id", "UInt64"),
        Column("last_used", _UTC_MS),
    ),
    engine="ReplacingMergeTree(last_used)",
    order_by="sa_id",
    tenant=False,
)

SERVICE_ACCOUNT_PROJECTS = Table(
    "service_account_projects",
    (
        Column("sa_id", "UInt64"),
        Column("project_id", "UInt64"),
        Column("role", "LowCardinality(String)"),
        Column("updated_at", _UTC_MS),
        Column("deleted", "UInt8", default="0"),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(sa_id, project_id)",
    tenant=False,
)


def _saved(name: str) -> Table:
    """Saved funnels and reports (m0004): one versioned row per item; `body` is JSON text."""
    return Table(
        name,
        (
            Column("project_id", "UInt64"),
            Column("item_id", "UInt64"),
            Column("name", "String"),
            Column("body", "String"),
            Column("created_at", _UTC_US),
            Column("updated_at", _UTC_US),
            Column("deleted", "UInt8", default="0"),
        ),
        engine="ReplacingMergeTree(updated_at)",
        order_by="(project_id, item_id)",
    )


SAVED_FUNNELS = _saved("saved_funnels")
SAVED_REPORTS = _saved("saved_reports")

# Profiles (m0005): user profiles (`group_key` '') and group profiles (`group_key` the group
# property, `profile_id` the group id) share both tables.
#
# `profile_updates` is the log: every accepted update, kept so that state can be rebuilt.
# `seq` is the arrival order (ties of `time` apply in it); duplicates (same dedup hash: project,
# group key, profile, operation, value, `$time`) collapse on merge to their first arrival
# (`first_arrival` is the version: the highest value is the lowest seq).
PROFILE_UPDATES = Table(
    "profile_updates",
    (
        Column("project_id", "UInt64"),
        Column("group_key", "String"),
        Column("profile_id", "String"),
        Column("time", _UTC_MS),
        Column("seq", "UInt64"),
        Column("op", "LowCardinality(String)"),
        Column("value", "String", codec="ZSTD(1)"),
        Column("ignore_time", "UInt8"),
        Column("city", "LowCardinality(String)"),
        Column("region", "LowCardinality(String)"),
        Column("country_code", "LowCardinality(String)"),
        Column("dedup_hash", "FixedString(16)"),
        Column("first_arrival", "UInt64"),
        Column("ingested_at", _UTC_MS),
    ),
    engine="ReplacingMergeTree(first_arrival)",
    order_by="(project_id, group_key, profile_id, time, dedup_hash)",
    # The store reads whole logs of a few hundred profiles per commit (its late updates):
    # granules of 1,024 rows instead of 8,192 read an eighth of the rows around each one
    # (measured: ~5 % more profile updates/s over 60 s). Tables created before keep 8,192.
    settings="index_granularity = 1024",
)

# The newest arrival logged for each profile (fed from `profile_updates` by the materialised
# view of m0005): what a state's `seen_seq` is compared with, without reading the log.
PROFILE_HEADS = Table(
    "profile_heads",
    (
        Column("project_id", "UInt64"),
        Column("group_key", "String"),
        Column("profile_id", "String"),
        Column("max_seq", "SimpleAggregateFunction(max, UInt64)"),
    ),
    engine="AggregatingMergeTree",
    order_by="(project_id, group_key, profile_id)",
)

# Every non-empty distinct id a project's events carry (fed from `events` by the materialised view
# of m0008): the event half of the cohort universe (semantics-2 §13.4), without scanning events.
KNOWN_IDS = Table(
    "known_ids",
    (
        Column("project_id", "UInt64"),
        Column("distinct_id", "String"),
        Column("first_seen", f"SimpleAggregateFunction(min, {_UTC_MS})"),
        Column("last_seen", f"SimpleAggregateFunction(max, {_UTC_MS})"),
    ),
    engine="AggregatingMergeTree",
    order_by="(project_id, distinct_id)",
)

# `profiles` is the current state: one row per profile, replaced on every change (the highest
# `version` wins). A deleted profile is a row with `deleted` = 1 (it still remembers the newest
# update seen, so an older update arriving late is replayed in its place). `last_time` and
# `last_seq` are the ($time, seq) position of the newest update applied (in time order);
# `seen_seq` the highest seq (the latest arrival) the state includes, so a state that is
# behind its log (a crash between the log and the state insert) is noticed and rebuilt.
PROFILES = Table(
    "profiles",
    (
        Column("project_id", "UInt64"),
        Column("group_key", "String"),
        Column("profile_id", "String"),
        Column("properties", "String", codec="ZSTD(1)"),
        Column("deleted", "UInt8"),
        Column("last_time", _UTC_MS),
        Column("last_seq", "UInt64"),
        Column("seen_seq", "UInt64"),
        Column("version", "UInt64"),
        Column("updated_at", _UTC_MS),
    ),
    engine="ReplacingMergeTree(version)",
    order_by="(project_id, group_key, profile_id)",
)

# `/engage` paging snapshots (m0006): the ordered member list of one query's page 0, written
# only when the result has more than one page, so that the session's later pages keep their
# membership and order. Rows expire a day after the session was created (`ENGAGE_SESSION_HOURS`
# in services/query/reports/engage; reads also check `created_at`, as TTL deletes on merges).
ENGAGE_SESSIONS = Table(
    "engage_sessions",
    (
        Column("project_id", "UInt64"),
        Column("session_id", "String"),
        Column("group_key", "String"),  # the collection: '' users, else the group key
        Column("position", "UInt32"),  # 0-based rank by profile id
        Column("profile_id", "String"),
        Column("created_at", _UTC_MS),
    ),
    engine="MergeTree",
    partition_by="toYYYYMMDD(created_at)",
    order_by="(project_id, session_id, position)",
    ttl="toDateTime(created_at) + INTERVAL 25 HOUR",
)

# Cohorts (m0007): one versioned row per change of a cohort, like the saved funnels; a delete is
# a row with `deleted` = 1. `definition` is the canonical JSON object of
# `footfall.shared.cohorts.definitions` (name, description, is_visible, is_static and the
# dynamic or static definition); the other columns repeat what listings need.
COHORTS = Table(
    "cohorts",
    (
        Column("project_id", "UInt64"),
        Column("cohort_id", "UInt64"),
        Column("name", "String"),
        Column("description", "String"),
        Column("is_visible", "UInt8"),
        Column("is_static", "UInt8"),
        Column("definition", "String", codec="ZSTD(1)"),
        Column("created_at", _UTC_US),
        Column("updated_at", _UTC_US),
        Column("deleted", "UInt8", default="0"),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(project_id, cohort_id)",
)

# Deployment-wide id counters (m0007): the highest id handed out per name (`cohort`), so that ids
# unique across projects are allocated without reading any project's rows. Not a tenant table.
ID_COUNTERS = Table(
    "id_counters",
    (
        Column("name", "String"),
        Column("value", "UInt64"),
    ),
    engine="ReplacingMergeTree(value)",
    order_by="name",
    tenant=False,
)

# Experiments (m0010, semantics-2 §16): one versioned row per change of an experiment, like the
# cohorts; a delete is a row with `deleted` = 1 (the id then answers 404). `record` is the JSON
# object of `footfall.services.app.experiments.model` (definition, lifecycle dates, decision and
# the results frozen at conclusion); the other columns repeat what listings filter by.
EXPERIMENTS = Table(
    "experiments",
    (
        Column("project_id", "UInt64"),
        Column("experiment_id", "String"),  # a UUID's canonical text
        Column("name", "String"),
        Column("status", "LowCardinality(String)"),
        Column("archived", "UInt8"),
        Column("record", "String", codec="ZSTD(1)"),
        Column("created_at", _UTC_US),
        Column("updated_at", _UTC_US),
        Column("deleted", "UInt8", default="0"),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(project_id, experiment_id)",
)

# Migration jobs (m0014, semantics-2 §14.2): one versioned row per change of a job
# (ReplacingMergeTree by `updated_at`, microseconds, strictly increasing per job), read with
# FINAL. `record` is the job's JSON (`footfall.services.migrate.model.Job.record`, its cursor
# included); `secret` the Fernet-encrypted source credentials, "" once the job cannot run again.
MIGRATION_JOBS = Table(
    "migration_jobs",
    (
        Column("project_id", "UInt64"),
        Column("job_id", "String"),  # a UUID's canonical text
        Column("state", "LowCardinality(String)"),
        Column("record", "String", codec="ZSTD(1)"),
        Column("secret", "String"),
        Column("updated_at", _UTC_US),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(project_id, job_id)",
)

# Data-deletion tasks (m0011): one versioned row per state of a task (PENDING, STARTED, SUCCESS,
# FAILURE), read with FINAL; `distinct_ids` is the JSON array of the ids whose data goes.
DATA_DELETIONS = Table(
    "data_deletions",
    (
        Column("project_id", "UInt64"),
        Column("task_id", "String"),
        Column("distinct_ids", "String", codec="ZSTD(1)"),
        Column("compliance_type", "LowCardinality(String)"),
        Column("status", "LowCardinality(String)"),
        Column("requested_by", "Nullable(UInt64)"),
        Column("error", "String", default="''"),
        Column("created_at", _UTC_MS),
        Column("finished_at", f"Nullable({_UTC_MS})"),
        Column("updated_at", _UTC_US),
    ),
    engine="ReplacingMergeTree(updated_at)",
    order_by="(project_id, task_id)",
)

TABLES = MappingProxyType(
    {
        t.name: t
        for t in (
            EVENTS,
            EVENT_COUNTS_15M,
            PROJECTS,
            PROJECT_CREDENTIALS,
            PROJECT_RETENTION,
            SERVICE_ACCOUNTS,
            SERVICE_ACCOUNT_PROJECTS,
            SERVICE_ACCOUNT_USAGE,
            SAVED_FUNNELS,
            SAVED_REPORTS,
            PROFILE_UPDATES,
            PROFILE_HEADS,
            PROFILES,
            KNOWN_IDS,
            ENGAGE_SESSIONS,
            COHORTS,
            ID_COUNTERS,
            EXPERIMENTS,
            MIGRATION_JOBS,
        )
    }
)
