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
def import_envelopes(
    body: bytes,
    project_id: int,
    now_ms: int,
    body_bytes: int,
    limits: tuple[int, int, int, int, int, int, int, int],
    reserved_ids: list[str],
) -> tuple[list[bytes], list[bytes], list[int]] | None: ...

class Envelopes:
    def __len__(self) -> int: ...
    def keys(self) -> bytes: ...
    def digests(self) -> bytes: ...
    def block(
        self, fresh: list[int], columns: list[tuple[str, str]], ingested_at_ms: int, hot: bool
    ) -> tuple[bytes, bytes, bytes, int, bool]: ...

def decode_envelopes(values: list[bytes], geo: bool, hot: list[tuple[str, str]]) -> Envelopes | None: ...
def partition_hash(key: bytes) -> int: ...
