"""A stand-in of Amplitude's Export API serving a generated dataset in its real format.

`GET /api/2/export?start=YYYYMMDDTHH&end=YYYYMMDDTHH` with Basic `api_key:secret_key` answers a
zip holding one gzipped NDJSON member per upload hour that has data
(`<app>/<app>_<YYYY-MM-DD>_<H>#0.json.gz`, as Amplitude names them), 404 when the range has
none. Faults are switched on per test: a burst of 429s, 504 for every whole-day request of
some days, a connection dropped mid-body once, days and hours that answer 400 (too large).

`Dataset` generates Amplitude export records (the fields a real export line carries, with
reserved ids, missing times, late uploads, nulls and country names) — plain data, no Footfall
code. `serve(app)` runs any ASGI app on a free loopback port in a thread.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import random
import socket
import threading
import time
import uuid
import zipfile
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

API_KEY, SECRET_KEY = "amp-key", "amp-secret"
COUNTRIES = ["United States", "Germany", "Russia", "France", "Atlantis", "", None]
CITIES = ["Berlin", "Austin", "", None]
EVENTS = ["Signed up", "Viewed page", "Purchased", "session_start", "[Experiment] Exposure"]


def _fmt(moment: datetime, micro: bool = True) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f" if micro else "%Y-%m-%d %H:%M:%S")


@dataclass
class Dataset:
    """Records grouped by upload hour (`YYYYMMDDTHH`)."""

    by_hour: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    @property
    def records(self) -> list[dict[str, Any]]:
        return [r for h in sorted(self.by_hour) for r in self.by_hour[h]]

    def uploaded(self, first_day: datetime, days: int) -> list[dict[str, Any]]:
        """The records an export of these UTC days holds (a late upload may fall after them)."""
        wanted = {(first_day + timedelta(days=d)).strftime("%Y%m%d") for d in range(days)}
        return [r for h in sorted(self.by_hour) if h[:8] in wanted for r in self.by_hour[h]]

    @classmethod
    def generate(cls, first_day: datetime, days: int, per_day: int, seed: int = 7, users: int = 40) -> Dataset:
        rng = random.Random(seed)
        data = cls()
        for d in range(days):
            day = first_day + timedelta(days=d)
            for i in range(per_day):
                hour = rng.choice([0, 1, 5, 9, 13, 17, 22, 23])  # some hours stay empty (404)
                t = day + timedelta(hours=hour, seconds=rng.randrange(3600), microseconds=rng.randrange(10**6))
                u = rng.randrange(users)
                user_id: Any = f"user-{u}" if rng.random() < 0.7 else rng.choice([None, "", "undefined", 12345])
                device_id: Any = f"dev-{u}-{rng.randrange(2)}" if rng.random() < 0.95 else rng.choice(["unknown", None])
                rec: dict[str, Any] = {
                    "app": 187520,
                    "event_type": rng.choice(EVENTS),
                    "event_time": _fmt(t),
                    "client_event_time": _fmt(t),
                    "server_received_time": _fmt(t + timedelta(seconds=2)),
                    "server_upload_time": _fmt(t + timedelta(seconds=3)),
                    "user_id": user_id,
                    "device_id": device_id,
                    "amplitude_id": 10_000 + u,
                    "event_id": i,
                    "session_id": int(t.timestamp() * 1000) // 600_000 * 600_000,
                    "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
                    "city": rng.choice(CITIES),
                    "region": rng.choice(["Texas", "", None]),
                    "country": rng.choice(COUNTRIES),
                    "ip_address": f"81.2.69.{rng.randrange(1, 250)}",
                    "os_name": rng.choice(["ios", "android", None]),
                    "os_version": "17.1",
                    "device_model": rng.choice(["iPhone 15", None]),
                    "version_name": rng.choice(["2.1.0", None]),
                    "platform": rng.choice(["iOS", "Android", "Web"]),
                    "library": "amplitude-swift/1.0",
                    "language": "English",
                    "paying": None,
                    "processed_time": _fmt(t + timedelta(seconds=5)),
                    "user_creation_time": _fmt(t - timedelta(days=3)),
                    "data": {"path": "/2/httpapi"},
                    "group_properties": {},
                    "$schema": 12,
                    "event_properties": {
                        "plan": rng.choice(["free", "pro", None]),
                        "amount": rng.choice([1, 2.5, 10]),
                        "platform": "event-own",
                    },
                    "user_properties": {
                        "plan": "user-plan",
                        "tier": rng.choice(["a", "b"]),
                        "initial_utm_source": rng.choice(["EMPTY", "google"]),
                        "cohort": None,
                    },
                    "groups": {"company": rng.choice(["acme", "globex"])},
                }
                kind = rng.random()
                if kind < 0.05:  # no uuid, an $insert_id of Amplitude's own
                    rec["uuid"] = None
                    rec["$insert_id"] = f"ins-{d}-{i}"
                elif kind < 0.10:  # neither: the derived hash
                    rec["uuid"] = "not-a-uuid"
                elif kind < 0.12:  # no event time: the next time field is used
                    rec["event_time"] = None
                elif kind < 0.13:  # no time at all: invalid properties.time
                    for k in ("event_time", "client_event_time", "server_received_time", "server_upload_time"):
                        rec[k] = None
                elif kind < 0.14:
                    rec["event_type"] = ""  # malformed
                upload = t + timedelta(hours=1) if rng.random() < 0.1 else t  # a late upload: the next hour
                data.by_hour[upload.strftime("%Y%m%dT%H")].append(rec)
        return data


@dataclass
class Faults:
    burst_429: int = 0  # the first N requests answer 429
    split_days: set[str] = field(default_factory=set)  # YYYYMMDD: whole-day requests answer 504
    too_large_days: set[str] = field(default_factory=set)  # whole-day requests answer 400
    too_large_hours: set[str] = field(default_factory=set)  # YYYYMMDDTHH: single-hour requests answer 400
    drop_once: set[str] = field(default_factory=set)  # request starts whose first answer is cut mid-body
    requests: list[tuple[str, str]] = field(default_factory=list)
    slow: float = 0.0  # seconds per answer (to interrupt a job mid-way)


def _hours(start: str, end: str) -> Iterator[str]:
    t = datetime.strptime(start, "%Y%m%dT%H").replace(tzinfo=UTC)
    last = datetime.strptime(end, "%Y%m%dT%H").replace(tzinfo=UTC)
    while t <= last:
        yield t.strftime("%Y%m%dT%H")
        t += timedelta(hours=1)


def export_zip(data: Dataset, start: str, end: str) -> bytes | None:
    buffer = io.BytesIO()
    found = False
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for hour in _hours(start, end):
            records = data.by_hour.get(hour)
            if not records:
                continue
            found = True
            day, h = datetime.strptime(hour, "%Y%m%dT%H").strftime("%Y-%m-%d"), int(hour[-2:])
            lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
            archive.writestr(f"187520/187520_{day}_{h}#0.json.gz", gzip.compress(lines, 6))
        archive.writestr("187520/README.txt", b"not an export member")
    return buffer.getvalue() if found else None


def amplitude_app(data: Dataset, faults: Faults) -> Starlette:
    async def export(request: Request) -> Response:
        import base64

        start, end = request.query_params.get("start", ""), request.query_params.get("end", "")
        faults.requests.append((start, end))
        if faults.slow:
            await asyncio.sleep(faults.slow)
        expected = "Basic " + base64.b64encode(f"{API_KEY}:{SECRET_KEY}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return Response("Invalid credentials", status_code=401)
        if faults.burst_429 > 0:
            faults.burst_429 -= 1
            return Response("Too many requests", status_code=429)
        whole_day = start.endswith("T00") and start[:8] == end[:8] and start != end
        if whole_day and start[:8] in faults.split_days:
            return Response("Gateway timeout", status_code=504)
        if whole_day and start[:8] in faults.too_large_days:
            return Response("Export too large", status_code=400)
        if start == end and start in faults.too_large_hours:
            return Response("Export too large", status_code=400)
        body = export_zip(data, start, end)
        if body is None:
            return Response("No data", status_code=404)
        if start in faults.drop_once:
            faults.drop_once.discard(start)

            async def cut() -> AsyncIterator[bytes]:
                yield body[: len(body) // 2]
                raise ConnectionResetError("dropped mid-body")

            return StreamingResponse(cut(), media_type="application/zip", headers={"content-length": str(len(body))})
        return Response(body, media_type="application/zip")

    return Starlette(routes=[Route("/api/2/export", export)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run `app` on a free loopback port in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
