"""`footfall directory publish`: the one-shot metadata owner.

Opens the store (applying migrations and creating the default project on first use,
like `footfall serve`), reads the credential directory and publishes it to the
compacted directory topic that gateways follow. A running `footfall worker` or
`footfall serve` (with Kafka) keeps publishing on change by itself; this command is for
the first start and for deployments where neither owns the metadata.
"""

from __future__ import annotations

import asyncio
import sys

from footfall.services.app.bootstrap import BOOTSTRAP_FILE, bootstrap_if_empty
from footfall.services.app.settings import ManagementSettings
from footfall.shared.kafka import Topics, ensure_topics
from footfall.shared.kafka.directory import DirectoryPublisher
from footfall.shared.metadata import Directory, MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.warehouse import open_warehouse


async def publish(settings: ManagementSettings, directory: Directory) -> None:
    topics = Topics.for_prefix(settings.kafka.topic_prefix)
    await ensure_topics(settings.kafka.bootstrap, topics)
    publisher = DirectoryPublisher(settings.kafka.bootstrap, topics.directory, timeout=settings.kafka.publish_timeout)
    try:
        await publisher.publish(directory)
    finally:
        await publisher.stop()


def publish_directory(settings: ManagementSettings) -> Directory:
    if not settings.kafka.bootstrap:
        raise SystemExit("footfall directory publish needs FOOTFALL_KAFKA_BOOTSTRAP")
    if not settings.store.warehouse_dsn:
        settings.store.make_data_dir()
    warehouse = open_warehouse(settings.store.dsn)
    try:
        apply_migrations(warehouse)
        repo = MetadataRepository(warehouse)
        if bootstrap_if_empty(repo, settings.bootstrap, settings.store.data_dir) is not None:
            print(
                f"created project 1; its credentials are in {settings.store.data_dir / BOOTSTRAP_FILE} (mode 0600)",
                file=sys.stderr,
            )
        directory = repo.load_directory()
    finally:
        warehouse.close()
    asyncio.run(publish(settings, directory))
    return directory
