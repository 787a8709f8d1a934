"""The query service: answers `/api/query/*` (≡ `/api/2.0/*`) and raw export from ClickHouse."""
