"""The migration service (semantics-2.md §14, §15.2): Amplitude and Mixpanel-compatible sources
imported as resumable background jobs through the ingestion streams."""
