"""The warehouse seam: one client over clickhouse-connect (chDB in-process or a ClickHouse server)."""

from shared.warehouse.client import ClickHouseWarehouse, Warehouse, WarehouseError, open_warehouse
from shared.warehouse.migrate import apply_migrations

__all__ = ["ClickHouseWarehouse", "Warehouse", "WarehouseError", "apply_migrations", "open_warehouse"]
