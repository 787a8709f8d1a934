"""The event model and its one validator, shared by the gateway, the worker and the embedded service."""

from footfall.shared.events.model import Event, Failure, dedup_key
from footfall.shared.events.validate import validate_batch, validate_event

__all__ = ["Event", "Failure", "dedup_key", "validate_batch", "validate_event"]
