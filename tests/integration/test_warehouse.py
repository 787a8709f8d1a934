"""The warehouse layer on chDB: DSNs, migrations, bound parameters, dedup, metadata, bootstrap."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import orjson
import pytest

from footfall.services.app.bootstrap import BOOTSTRAP_FILE, bootstrap_if_empty, write_bootstrap_file
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.store import store_batch
from footfall.shared.auth import Authenticator, AuthError
from footfall.shared.config import BootstrapSettings, Env, StoreSettings
from footfall.shared.credentials import lookup_key
from footfall.shared.events import Event
from footfall.shared.events.model import event_dedup_key
from footfall.shared.metadata import MetadataError, MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.schema.catalog import NO_USER_KEY
from footfall.shared.schema.migrate import discover
from footfall.shared.schema.migrations.m0016_user_key import STATEMENTS as M0016
from footfall.shared.streams import EVENTS
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.warehouse.dsn import Dsn, DsnError, parse_dsn

pytestmark = pytest.mark.warehouse

NOW_MS = int(time.time() * 1000)

# -- DSN ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("chdb:///var/lib/footfall/chdb", Dsn("chdb", path="/var/lib/footfall/chdb")),
        ("chdb:///data/with%20space", Dsn("chdb", path="/data/with space")),
        ("http://localhost", Dsn("http", host="localhost", port=8123)),
        ("https://ch.example.com", Dsn("https", host="ch.example.com", port=8443)),
        (
            "http://writer:p%40ss%3Aword@10.0.0.5:18123/analytics",
            Dsn("http", host="10.0.0.5", port=18123, username="writer", password="p@ss:word", database="analytics"),
        ),
        ("https://u@[::1]:9443/", Dsn("https", host="::1", port=9443, username="u")),
    ],
    ids=["chdb", "chdb-quoted", "http-defaults", "https-defaults", "http-full", "https-ipv6-user-only"],
)
def test_parse_dsn(text: str, expected: Dsn) -> None:
    assert parse_dsn(text) == expected


def test_chdb_dsn_is_embedded() -> None:
    assert parse_dsn("chdb:///x").embedded
    assert not parse_dsn("http://h").embedded


@pytest.mark.parametrize(
    "text",
    [
        "",
        "/abs/path",
        "chdb:relative/path",
        "chdb://relative/path",
        "http://",
        "http:///db",
        "http://host:notaport/db",
        "http://host:99999",
        "http://host/db/extra",
        "postgres://u:p@h/db",
        "clickhouse://h",
    ],
    ids=[
        "empty", "bare-path", "chdb-relative", "chdb-host-part", "http-no-host", "http-empty-host",
        "bad-port", "port-out-of-range", "nested-database", "postgres", "native-protocol",
    ],
)  # fmt: skip
def test_parse_dsn_errors(text: str) -> None:
    with pytest.raises(DsnError):
        parse_dsn(text)


def test_settings_default_dsn_is_absolute_chdb(tmp_path: Path) -> None:
    dsn = parse_dsn(StoreSettings(data_dir=tmp_path / "data").dsn)
    assert dsn.embedded and dsn.path == str((tmp_path / "data" / "chdb").resolve())


# -- migrations --------------------------------------------------------------------------------

TABLES = {"events", "projects", "project_credentials", "service_accounts", "service_account_projects"}


def tables(wh: ClickHouseWarehouse) -> set[str]:
    return {r[0] for r in wh.query("SELECT name FROM system.tables WHERE database = currentDatabase()")}


def test_migrations_apply_once_and_are_idempotent(warehouse: ClickHouseWarehouse) -> None:
    for table in tables(warehouse):
        warehouse.command(f"DROP TABLE IF EXISTS `{table}`")
    versions = [v for v, _, _ in discover()]
    assert versions == sorted(set(versions)) and versions[:2] == [1, 2]
    assert apply_migrations(warehouse) == versions
    assert apply_migrations(warehouse) == []
    assert TABLES | {"schema_migrations"} <= tables(warehouse)
    ledger = warehouse.query("SELECT version, name FROM schema_migrations FINAL ORDER BY version")
    assert [v for v, _ in ledger] == versions
    assert ledger[0][1] == "m0001_events"


def test_migration_interrupted_before_ledger_is_rerun_safely(warehouse: ClickHouseWarehouse) -> None:
    apply_migrations(warehouse)
    last = max(v for v, _, _ in discover())
    warehouse.command("DELETE FROM schema_migrations WHERE version = {v:UInt32}", {"v": last})
    assert apply_migrations(warehouse) == [last]  # its DDL runs again (IF NOT EXISTS)
    assert apply_migrations(warehouse) == []


def test_events_table_shape(clean_warehouse: ClickHouseWarehouse) -> None:
    engine, sorting_key, partition_key = clean_warehouse.query(
        "SELECT engine, sorting_key, partition_key FROM system.tables "
        "WHERE database = currentDatabase() AND name = 'events'"
    )[0]
    assert engine == "ReplacingMergeTree"
    for column in ("project_id", "event", "time", "distinct_id", "insert_id"):
        assert column in sorting_key
    assert "toYYYYMM(time)" in partition_key
    columns = {r[0] for r in clean_warehouse.query("SELECT name FROM system.columns WHERE table = 'events' "
                                                   "AND database = currentDatabase()")}  # fmt: skip
    assert set(EVENTS.table.column_names) <= columns
    assert {"city", "region", "country_code", "ingested_at"} <= columns


def test_user_key_is_stable_stored_on_insert_and_computed_for_older_parts(clean_warehouse: ClickHouseWarehouse) -> None:
    """The per-user reports group by `user_key`: every part must hold the same key for an id,
    whether it was written with the column, before it (computed when read), or by the
    migration's background pass; and the keys are pinned, so an engine upgrade that changed
    the hash would fail here instead of splitting users between old and new parts."""
    wh = clean_warehouse
    wh.command("ALTER TABLE events DROP COLUMN user_key SETTINGS mutations_sync = 2")  # a store before m0016
    try:
        store_batch(EVENTS, wh, Enricher(None), [ev(0, distinct_id="u1"), ev(1, distinct_id="")], NOW_MS)
        wh.command(M0016[0])  # the column only: the old part computes it when read
        store_batch(EVENTS, wh, Enricher(None), [ev(2, distinct_id="u1"), ev(3, distinct_id="ключ")], NOW_MS)
        pinned = {
            "": 0xF4F2CED447AB02427DE0A38047D74950,
            "u1": 0x15DCC3FB3C61B01B5703B5E4CB72BD88,
            "ключ": 0xE48DC9122E9DD5602E7CC9B987E23BED,
        }
        query = "SELECT insert_id, distinct_id, user_key FROM events ORDER BY insert_id"
        expected = [(f"ins-{n}", d, pinned[d]) for n, d in enumerate(["u1", "", "u1", "ключ"])]
        assert wh.query(query) == expected
        assert wh.query(f"SELECT {NO_USER_KEY}") == [(pinned[""],)]
        wh.command("ALTER TABLE events MATERIALIZE COLUMN user_key SETTINGS mutations_sync = 2")
        assert wh.query(query) == expected
        parts = "FROM system.parts_columns WHERE database = currentDatabase() AND table = 'events' AND active"
        assert wh.query(f"SELECT uniqExact(name), uniqExactIf(name, column = 'user_key') {parts}") == [(2, 2)]
    finally:
        for statement in M0016:  # the session store as the migrations left it
            wh.command(statement)


# -- bound parameters --------------------------------------------------------------------------

HOSTILE = [
    "x'); DROP TABLE events; --",
    "quote ' and \\' and \\\\",
    "{p0:String} braces",
    'double " quote',
    "semi;colon\nnewline\ttab",
    "unicode ☃ \U0001f600",
]


@pytest.mark.parametrize("value", HOSTILE, ids=["drop", "quotes", "placeholder", "double-quote", "controls", "unicode"])
def test_parameters_are_data_not_sql(clean_warehouse: ClickHouseWarehouse, value: str) -> None:
    assert clean_warehouse.query("SELECT {v:String}", {"v": value}) == [(value,)]
    repo = MetadataRepository(clean_warehouse)
    name = value.replace("\n", " ").replace("\t", " ")  # project names refuse control characters (issue 12)
    repo.create_project(name, "UTC", project_id=7)
    rows = clean_warehouse.query("SELECT project_id FROM projects FINAL WHERE name = {n:String}", {"n": name})
    assert rows == [(7,)]
    assert [p.name for p in repo.list_projects()] == [name]
    assert "events" in tables(clean_warehouse)


# -- events: dedup -----------------------------------------------------------------------------


def ev(n: int, **kw: object) -> Event:
    fields: dict[str, object] = {
        "project_id": 1,
        "event": "Page View",
        "time_ms": NOW_MS - 3_600_000 + n,
        "distinct_id": f"u{n % 3}",
        "insert_id": f"ins-{n}",
        "properties": {"n": n, "s": "☃", "nested": {"a": [1, 2]}},
        "ip": None,
    }
    fields.update(kw)
    return Event(**fields)  # type: ignore[arg-type]


def stored(wh: ClickHouseWarehouse, final: bool = True) -> list[tuple[object, ...]]:
    return wh.query(
        f"SELECT insert_id, event, distinct_id, toUnixTimestamp64Milli(time), properties FROM events "
        f"{'FINAL' if final else ''} WHERE project_id = {{p:UInt64}} ORDER BY insert_id",
        {"p": 1},
    )


def test_insert_round_trip(clean_warehouse: ClickHouseWarehouse) -> None:
    events = [ev(i) for i in range(5)]
    assert store_batch(EVENTS, clean_warehouse, Enricher(None), events, NOW_MS).dropped == 0
    rows = stored(clean_warehouse)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (e.insert_id, e.event, e.distinct_id, e.time_ms) for e in events
    ]
    assert orjson.loads(rows[0][4]) == events[0].properties
    hashes = clean_warehouse.query("SELECT insert_id, dedup_hash FROM events ORDER BY insert_id")
    assert [h.encode("latin-1") if isinstance(h, str) else h for _, h in hashes] == [event_dedup_key(e) for e in events]


def test_same_events_twice_surface_once_with_final(clean_warehouse: ClickHouseWarehouse) -> None:
    events = [ev(i) for i in range(10)]
    for _ in range(2):  # e.g. a retried request, or a replay after a restart
        store_batch(EVENTS, clean_warehouse, Enricher(None), events, int(time.time() * 1000))
    assert len(stored(clean_warehouse, final=False)) == 20  # not merged yet: both copies are there
    assert [r[0] for r in stored(clean_warehouse)] == sorted(e.insert_id for e in events)
    distinct = clean_warehouse.query("SELECT uniqExact(dedup_hash) FROM events WHERE project_id = 1")
    assert distinct == [(10,)]


def test_reused_insert_id_with_other_time_is_not_a_duplicate(clean_warehouse: ClickHouseWarehouse) -> None:
    a = ev(1)
    b = ev(1, time_ms=a.time_ms + 1)
    c = ev(1, distinct_id="someone-else")
    d = ev(1, event="Other")
    assert store_batch(EVENTS, clean_warehouse, Enricher(None), [a, b, c, d], NOW_MS).dropped == 0
    assert len(stored(clean_warehouse)) == 4


def test_in_batch_duplicates_dropped(clean_warehouse: ClickHouseWarehouse) -> None:
    events = [ev(0), ev(1), ev(0), ev(2), ev(1), ev(0, properties={"different": True})]
    result = store_batch(EVENTS, clean_warehouse, Enricher(None), events, NOW_MS)
    assert result.dropped == 3
    assert len(result.keys) == 3
    assert len(stored(clean_warehouse, final=False)) == 3


def test_projects_do_not_deduplicate_each_other(clean_warehouse: ClickHouseWarehouse) -> None:
    assert store_batch(EVENTS, clean_warehouse, Enricher(None), [ev(0), ev(0, project_id=2)], NOW_MS).dropped == 0
    assert clean_warehouse.query("SELECT count() FROM events FINAL") == [(2,)]


def test_empty_batch_inserts_nothing(clean_warehouse: ClickHouseWarehouse) -> None:
    assert store_batch(EVENTS, clean_warehouse, Enricher(None), [], NOW_MS).keys == []
    assert clean_warehouse.query("SELECT count() FROM events") == [(0,)]


# -- metadata ----------------------------------------------------------------------------------


def test_metadata_round_trip(clean_warehouse: ClickHouseWarehouse) -> None:
    repo = MetadataRepository(clean_warehouse)
    p1 = repo.create_project("Shop", "Europe/Berlin")
    p2 = repo.create_project("Blog")
    assert (p1.project_id, p2.project_id) == (1, 2)
    assert [(p.project_id, p.name, p.timezone) for p in repo.list_projects()] == [
        (1, "Shop", "Europe/Berlin"),
        (2, "Blog", "UTC"),
    ]
    repo.add_project_credential(1, "token", "tok-shop")
    repo.add_project_credential(1, "secret", "sec-shop")
    repo.add_project_credential(2, "token", "tok-blog")
    sa = repo.create_service_account("robot", "robot-secret")
    other = repo.create_service_account("reader", "reader-secret")
    assert other == sa + 1
    repo.grant(sa, 1, "admin")
    repo.grant(sa, 2, "analyst")
    repo.grant(other, 2, "consumer")

    directory = repo.load_directory()
    assert set(directory.projects) == {1, 2}
    assert directory.tokens == {lookup_key("tok-shop"): 1, lookup_key("tok-blog"): 2}
    assert directory.secrets == {lookup_key("sec-shop"): 1}
    robot = directory.accounts["robot"]
    assert (robot.sa_id, robot.roles) == (sa, {1: "admin", 2: "analyst"})
    assert directory.accounts["reader"].roles == {2: "consumer"}

    auth = Authenticator(directory)
    basic = "Basic robot:robot-secret"
    assert auth.for_import(basic, "1").project_id == 1
    with pytest.raises(AuthError) as err:
        auth.for_import(basic, "2")  # analyst there
    assert err.value.status == 403
    assert auth.for_import("Basic tok-blog:", None).project_id == 2
    assert auth.for_query("Basic sec-shop:", None).project_id == 1


def test_grant_update_and_revoke(clean_warehouse: ClickHouseWarehouse) -> None:
    repo = MetadataRepository(clean_warehouse)
    repo.create_project("P", project_id=1)
    sa = repo.create_service_account("svc", "s")
    repo.grant(sa, 1, "consumer")
    repo.grant(sa, 1, "owner")  # a newer row replaces the role
    repo.add_project_credential(1, "token", "old-token")
    repo.add_project_credential(1, "token", "new-token")
    repo.revoke_project_credential(1, "token", "old-token")
    directory = repo.load_directory()
    assert directory.accounts["svc"].roles == {1: "owner"}
    assert directory.tokens == {lookup_key("new-token"): 1}


def test_metadata_refuses_bad_values(clean_warehouse: ClickHouseWarehouse) -> None:
    repo = MetadataRepository(clean_warehouse)
    with pytest.raises(MetadataError):
        repo.create_project("P", "Mars/Olympus_Mons")
    with pytest.raises(MetadataError):
        repo.add_project_credential(1, "password", "x")
    with pytest.raises(MetadataError):
        repo.create_service_account("user:name", "s")
    with pytest.raises(MetadataError):
        repo.create_service_account("", "s")
    with pytest.raises(MetadataError):
        repo.grant(1, 1, "superuser")
    assert repo.list_projects() == []


def test_credentials_of_unknown_projects_are_not_loaded(clean_warehouse: ClickHouseWarehouse) -> None:
    repo = MetadataRepository(clean_warehouse)
    repo.create_project("P", project_id=1)
    repo.add_project_credential(5, "token", "orphan")
    sa = repo.create_service_account("svc", "s")
    repo.grant(sa, 5, "owner")
    directory = repo.load_directory()
    assert directory.tokens == {}
    assert directory.accounts["svc"].roles == {}


# -- bootstrap ---------------------------------------------------------------------------------

BOOT_ENV = {
    "FOOTFALL_BOOTSTRAP_TOKEN": "boot-token-0123456789",
    "FOOTFALL_BOOTSTRAP_SECRET": "boot-project-secret",
    "FOOTFALL_BOOTSTRAP_SA_USERNAME": "boot-sa",
    "FOOTFALL_BOOTSTRAP_SA_SECRET": "boot-sa-secret",
}


def all_metadata_text(wh: ClickHouseWarehouse) -> str:
    parts = []
    for table in ("projects", "project_credentials", "service_accounts", "service_account_projects"):
        parts.extend(repr(row) for row in wh.query(f"SELECT * FROM {table}"))
    return "\n".join(parts)


def test_bootstrap_creates_project_1_once(clean_warehouse: ClickHouseWarehouse, tmp_path: Path) -> None:
    repo = MetadataRepository(clean_warehouse)
    created = bootstrap_if_empty(repo, BootstrapSettings(), tmp_path)
    assert created is not None
    assert (created["project_id"], created["project_name"], created["timezone"]) == (1, "Default", "UTC")
    assert created["service_account"]["role"] == "owner"
    assert bootstrap_if_empty(repo, BootstrapSettings(), tmp_path) is None
    assert [(p.project_id, p.name) for p in repo.list_projects()] == [(1, "Default")]

    path = tmp_path / BOOTSTRAP_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert orjson.loads(path.read_bytes()) == created

    # The printed credentials work; only their hashes are in the tables.
    auth = Authenticator(repo.load_directory())
    sa = created["service_account"]
    assert auth.for_import(f"Basic {created['project_token']}:", None).project_id == 1
    assert auth.for_import(f"Basic {created['project_secret']}:", None).project_id == 1
    assert auth.for_import(f"Basic {sa['username']}:{sa['secret']}", "1").role == "owner"
    text = all_metadata_text(clean_warehouse)
    for clear in (created["project_token"], created["project_secret"], sa["secret"]):
        assert clear not in text


def test_bootstrap_random_credentials_differ(clean_warehouse: ClickHouseWarehouse, tmp_path: Path) -> None:
    first = bootstrap_if_empty(MetadataRepository(clean_warehouse), BootstrapSettings(), tmp_path / "a")
    for table in ("projects", "project_credentials", "service_accounts", "service_account_projects"):
        clean_warehouse.command(f"TRUNCATE TABLE {table}")
    second = bootstrap_if_empty(MetadataRepository(clean_warehouse), BootstrapSettings(), tmp_path / "b")
    assert first and second
    for key in ("project_token", "project_secret"):
        assert first[key] != second[key]
    assert first["service_account"]["secret"] != second["service_account"]["secret"]


def test_bootstrap_honours_environment(clean_warehouse: ClickHouseWarehouse, tmp_path: Path) -> None:
    repo = MetadataRepository(clean_warehouse)
    created = bootstrap_if_empty(repo, BootstrapSettings.from_env(Env(BOOT_ENV)), tmp_path)
    assert created is not None
    assert created["project_token"] == BOOT_ENV["FOOTFALL_BOOTSTRAP_TOKEN"]
    assert created["project_secret"] == BOOT_ENV["FOOTFALL_BOOTSTRAP_SECRET"]
    assert created["service_account"]["username"] == "boot-sa"
    assert created["service_account"]["secret"] == "boot-sa-secret"
    auth = Authenticator(repo.load_directory())
    assert auth.for_import("Basic boot-token-0123456789:", None).project_id == 1
    assert auth.for_import("Basic boot-sa:boot-sa-secret", "1").project_id == 1
    assert "boot-sa-secret" not in all_metadata_text(clean_warehouse)
    assert orjson.loads((tmp_path / BOOTSTRAP_FILE).read_bytes())["project_token"] == "boot-token-0123456789"


def test_bootstrap_skipped_when_a_project_exists(clean_warehouse: ClickHouseWarehouse, tmp_path: Path) -> None:
    repo = MetadataRepository(clean_warehouse)
    repo.create_project("Mine", project_id=3)
    assert bootstrap_if_empty(repo, BootstrapSettings(), tmp_path) is None
    assert not (tmp_path / BOOTSTRAP_FILE).exists()


def test_bootstrap_file_mode_fixed_on_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "nested" / BOOTSTRAP_FILE
    path.parent.mkdir()
    path.write_text("old")
    os.chmod(path, 0o644)
    write_bootstrap_file(path, {"project_token": "t"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert orjson.loads(path.read_bytes()) == {"project_token": "t"}
