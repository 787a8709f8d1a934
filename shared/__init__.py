"""Code used by more than one Footfall service: events, configuration, credentials, warehouse."""
