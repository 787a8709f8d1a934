"""Workers: consume raw events, enrich (GeoIP), drop duplicates (Redis), insert into ClickHouse,
then commit. `process.py` and `write.py` are also what the embedded service runs inline."""
