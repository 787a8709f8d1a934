"""Types of the Rust extension (`fastpath/`, built by setup.py): see `fast_import.py`."""

def import_rows(
    body: bytes,
    columns: list[tuple[str, str]],
    project_id: int,
    now_ms: int,
    ingested_at_ms: int,
    body_bytes: int,
    geo: bool,
    limits: tuple[int, int, int, int, int, int, int, int],
    reserved_ids: list[str],
    hot: list[tuple[str, str]],
) -> tuple[bytes, bytes, int, int, bool] | None: ...
def dumps(body: bytes) -> bytes: ...
