"""Footfall's processes: gateway, worker, query, app (management), migrate, standalone (embedded)."""
