"""Embedded mode: one process, every interface on one port, chDB as the store."""
