"""The warehouse seam: one client over clickhouse-connect (chDB in-process or a ClickHouse server)."""

from footfall.shared.warehouse.client import ClickHouseWarehouse, Warehouse, WarehouseError, open_warehouse

__all__ = ["ClickHouseWarehouse", "Warehouse", "WarehouseError", "open_warehouse"]
