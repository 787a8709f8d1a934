"""Denial of service through `footfall serve` (issue 15): bodies are read only after
authentication and never beyond their cap (measured with the server's RSS), multipart is
refused on the query interface, answers are bounded before any work, raw export has its
per-project limits and holds its slot while it streams, and slow or vanishing clients
neither hold connections nor cause 500s."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.e2e.conftest import CREDS, ServeProcess

pytestmark = [pytest.mark.e2e]

SECRET = (CREDS["FOOTFALL_BOOTSTRAP_SECRET"], "")
SA = (CREDS["FOOTFALL_BOOTSTRAP_SA_USERNAME"], CREDS["FOOTFALL_BOOTSTRAP_SA_SECRET"])
MB = 1024 * 1024
ENV = {
    "FOOTFALL_HEADER_TIMEOUT_SECONDS": "1",
    "FOOTFALL_BODY_TIMEOUT_SECONDS": "1",
    "FOOTFALL_EXPORT_RATE_PER_SECOND": "3",
    "FOOTFALL_EXPORT_CONCURRENCY": "1",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("dos") / "data", env=ENV)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _basic(auth: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()


def rss(server: ServeProcess) -> int:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def streamed_post(
    server: ServeProcess, path: str, total: int, *, auth: tuple[str, str] | None, content_type: str
) -> int:
    """POST a chunked body of `total` bytes (sent while the server reads it); the answer's status."""
    head = [f"POST {path} HTTP/1.1", "Host: test", f"Content-Type: {content_type}", "Transfer-Encoding: chunked"]
    if auth is not None:
        head.append(f"Authorization: {_basic(auth)}")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    answered = threading.Event()

    def send() -> None:
        chunk = b"a=" + b"x" * (MB - 2)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            for _ in range(total // MB):
                if answered.is_set():
                    return
                sock.sendall(framed)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            return  # the server answered and closed

    sender = threading.Thread(target=send)
    sender.start()
    try:
        data = b""
        while b"\r\n" not in data:
            got = sock.recv(4096)
            if not got:
                raise AssertionError(f"connection closed without an answer: {data!r}")
            data += got
        return int(data.split(b" ", 2)[1])
    finally:
        answered.set()
        sock.close()
        sender.join(30)


def test_bodies_are_read_after_auth_and_capped_while_reading(server: ServeProcess) -> None:
    seg = "/api/2.0/segmentation"
    form = "application/x-www-form-urlencoded"
    params = {"event": "e", "from_date": "2024-01-01", "to_date": "2024-01-02"}
    assert httpx.post(server.base + seg, data=params, auth=SECRET).status_code == 200  # a form body still works
    before = rss(server)
    statuses: list[int] = []
    threads = [
        threading.Thread(
            target=lambda: statuses.append(streamed_post(server, seg, 200 * MB, auth=None, content_type=form))
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert statuses == [401, 401, 401]
    assert streamed_post(server, seg, 200 * MB, auth=SECRET, content_type=form) == 413
    funnels = "/api/app/projects/1/funnels"
    assert streamed_post(server, funnels, 300 * MB, auth=SA, content_type="application/json") == 413
    grown = rss(server) - before
    assert grown < 40 * MB, f"RSS grew by {grown / MB:.0f} MB"
    # declared too large: refused before anything is read; multipart is never parsed
    r = httpx.post(server.base + seg, content=b"a=" * 200_000, headers={"Content-Type": form}, auth=SECRET)
    assert r.status_code == 413 and "FOOTFALL_QUERY_MAX_BODY_BYTES" in r.json()["error"]
    r = httpx.post(server.base + seg, files={"f": ("f.txt", b"x" * 1000)}, data=params, auth=SECRET)
    assert r.status_code == 415 and "multipart" in r.json()["error"]


def test_answers_are_bounded_before_any_work(server: ServeProcess) -> None:
    seg = server.base + "/api/2.0/segmentation"
    year = {"event": "e", "from_date": "2024-01-01", "to_date": "2024-12-31", "unit": "hour"}
    r = httpx.get(seg, params={**year, "on": 'properties["p"]', "limit": "10000"}, auth=SECRET)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert "FOOTFALL_QUERY_MAX_CELLS" in message and "limit" in message and "8784 buckets" in message
    assert httpx.get(seg, params={**year, "on": 'properties["p"]', "limit": "100"}, auth=SECRET).status_code == 200
    started = time.monotonic()
    wide = {"event": "e", "from_date": "1971-01-01", "to_date": "2100-12-31", "unit": "hour"}
    r = httpx.get(seg, params=wide, auth=SECRET)
    assert r.status_code == 400 and "buckets" in r.json()["error"]
    assert time.monotonic() - started < 0.5


def _import(server: ServeProcess, n: int, padding: int) -> None:
    now = int(time.time())
    pad = "x" * padding
    for first in range(0, n, 1000):
        events = [
            {"event": "e", "properties": {"time": now - i, "distinct_id": f"u{i}", "$insert_id": f"i{i}", "pad": pad}}
            for i in range(first, min(n, first + 1000))
        ]
        r = httpx.post(
            server.base + "/import?strict=1",
            content=orjson.dumps(events),
            auth=SECRET,
            timeout=60,
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 200, r.text


def test_export_limits_and_a_streaming_export_holds_its_slot(server: ServeProcess) -> None:
    _import(server, 21_000, 100)  # more than one page (20,000 rows) of NDJSON
    url = server.base + "/api/2.0/export"
    days = {"from_date": "2020-01-01", "to_date": time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86400))}
    time.sleep(1.1)
    r = httpx.get(url, params={**days, "limit": "100001"}, auth=SECRET)
    assert r.status_code == 400 and "limit" in r.json()["error"]
    # an export whose client does not read: the server waits (flow control) and keeps the slot
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.connect(("127.0.0.1", server.port))
    query = str(httpx.QueryParams(days))
    reader.sendall(
        f"GET /api/2.0/export?{query} HTTP/1.1\r\nHost: t\r\nAuthorization: {_basic(SECRET)}\r\n\r\n".encode()
    )
    assert reader.recv(64).startswith(b"HTTP/1.1 200")
    time.sleep(1.0)
    with httpx.Client(auth=SECRET, timeout=30) as client:
        busy = client.get(url, params=days)
        assert busy.status_code == 429 and "concurrent exports" in busy.json()["error"], busy.text
        assert busy.headers["Retry-After"] == "1"
        reader.close()  # the client leaves mid-stream: the slot comes back
        time.sleep(1.1)
        lines = client.get(url, params={**days, "limit": "20"}).content.splitlines()
        assert len(lines) == 20 and orjson.loads(lines[0])["event"] == "e"
        statuses = [client.get(url, params={**days, "limit": "1"}).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]  # 3 per second: the fourth within the second is refused


def _closed_by_server(s: socket.socket) -> bool:
    s.settimeout(3)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_and_vanishing_clients(server: ServeProcess) -> None:
    slow = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: te")  # and never the rest of the head
        slow.append(s)
    body = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    body.sendall(
        b"POST /import HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        + f"Authorization: {_basic(SECRET)}\r\nContent-Length: 100000\r\n\r\n[".encode()
    )
    time.sleep(2.5)
    assert all(_closed_by_server(s) for s in [*slow, body])
    for s in [*slow, body]:
        s.close()
    assert httpx.get(server.base + "/healthz", timeout=5).status_code == 200
    # a client that leaves mid-body: no 500 and no stack trace in the log
    gone = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    gone.sendall(
        b"POST /import HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        + f"Authorization: {_basic(SECRET)}\r\nContent-Length: 100000\r\n\r\n[{{".encode()
    )
    time.sleep(0.2)
    gone.close()
    time.sleep(0.5)
    assert "Traceback" not in server.log() and "unhandled_error" not in server.log()
