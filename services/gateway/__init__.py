"""The import gateway: authenticates, decodes and validates `/import` requests and hands the
accepted events to an `Sink` (Kafka in the distributed shape, inline storage when embedded)."""
