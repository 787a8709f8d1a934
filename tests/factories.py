"""Seeded generator of realistic raw import events, plus the one `dedupe()`.

`make_dataset(seed)` returns per-project lists of raw `/import` events (import order = the list order).
Everything is derived from `random.Random(seed)`: the same seed gives byte-identical datasets.

What the data deliberately contains (each project, in its own time zone):
- user journeys: App Open -> Sign Up -> View Item (repeats) -> Add To Cart -> Purchase, with steps out of order,
  steps within 2 s of each other, gaps just under/over common windows, journeys that start shortly before the
  suggested `to_date` and complete after it, and returning users over several weeks (retention/frequency);
- events exactly on local midnight (and 1 ms before), on hour edges, at and around DST transitions
  (America/New_York, Europe/Berlin, Australia/Lord_Howe's 30-minute change; Asia/Kolkata's +05:30);
- exact duplicates (same event/time/distinct_id/$insert_id, sometimes with `time` re-expressed in the other
  unit), "conflicting" duplicates whose later copy has different properties (the LAST copy wins),
  reused $insert_ids with a different time (NOT duplicates), late events (arriving far later in the list);
- empty distinct_id, integer distinct_ids, unicode ids/names/values, strings over 255 characters (stored
  truncated), numbers as strings, floats, booleans, null, lists, nested objects, 10-20 custom properties.
It never generates `ip` or `token` (the service would lift/enrich them), reserved ids, or future times.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import ClassVar
from zoneinfo import ZoneInfo

__all__ = [
    "DEFAULT_ZONES",
    "FUNNELS",
    "Dataset",
    "ProjectSpec",
    "dedupe",
    "make_dataset",
    "normalize_key",
    "time_to_ms",
]

DEFAULT_ZONES: dict[int, str] = {
    1: "UTC",
    2: "America/New_York",
    3: "Europe/Berlin",
    4: "Australia/Lord_Howe",
    5: "Asia/Kolkata",
}
# 2024-03-04 .. 2024-04-14 covers US DST start (03-10), EU DST start (03-31), Lord Howe DST end (04-07).
DEFAULT_START = date(2024, 3, 4)
DEFAULT_DAYS = 42
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_STR = 255

# Saved-funnel definitions the tests can store and query (funnel_id -> definition).
FUNNELS: dict[int, dict] = {
    1: {
        "name": "Signup to purchase",
        "length": 1,
        "length_unit": "day",
        "steps": [{"event": "Sign Up"}, {"event": "View Item"}, {"event": "Purchase"}],
    },
    2: {
        "name": "Open, any view, cart, buy (1 hour)",
        "length": 1,
        "length_unit": "hour",
        "steps": [
            {"event": "App Open"},
            {
                "event": "View Item",
                "custom_event": {"id": 101, "name": "Any View", "events": ["View Item", "page view"]},
            },
            {"event": "Add To Cart"},
            {"event": "Purchase", "selector": 'number(properties["price"]) > 10'},
        ],
    },
    3: {
        "name": "Repeat views",
        "length": 30,
        "length_unit": "minute",
        "steps": [{"event": "View Item"}, {"event": "View Item"}, {"event": "Purchase"}],
    },
}

EVENT_NAMES = [
    "App Open",
    "Sign Up",
    "View Item",
    "Add To Cart",
    "Purchase",
    "Search",
    "page view",
    "Page View",
    "Logout",
    "Ünïcødé ☃ Event",
]


@dataclass(frozen=True)
class ProjectSpec:
    tz: str
    events: list[dict]
    from_date: str = ""  # suggested query range (inclusive local days); data extends before and after it
    to_date: str = ""


@dataclass(frozen=True)
class Dataset:
    seed: int
    projects: dict[int, ProjectSpec]
    now: datetime  # UTC; every event is earlier; "today" and "yesterday" have events
    funnels: dict[int, dict] = field(default_factory=lambda: copy.deepcopy(FUNNELS))


def time_to_ms(value: int | float) -> int:
    """Import rule: values >= 1e10 are milliseconds, smaller ones seconds; fractions of a ms are truncated."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"time must be a number, got {value!r}")
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return int(exact) if exact >= Decimal(10) ** 10 else int(exact * 1000)


def normalize_key(raw: dict) -> tuple[str, int, str, str]:
    """The dedup key (event, time_ms, distinct_id, $insert_id) after the import normalisation
    (int distinct_id -> str, strings truncated to 255 characters)."""
    props = raw["properties"]
    return (
        raw["event"][:MAX_STR],
        time_to_ms(props["time"]),
        str(props["distinct_id"])[:MAX_STR],
        str(props["$insert_id"]),
    )


def dedupe(events: list[dict]) -> list[dict]:
    """Remove duplicates by (event, time_ms, distinct_id, $insert_id); the LAST copy wins.
    The survivors keep the position of their first occurrence (order is irrelevant to every report)."""
    position: dict[tuple, int] = {}
    out: list[dict] = []
    for raw in events:
        key = normalize_key(raw)
        if key in position:
            out[position[key]] = raw
        else:
            position[key] = len(out)
            out.append(raw)
    return out


# ----------------------------------------------------------------------------------------------- generation
def make_dataset(
    seed: int,
    n_events: int = 2000,
    zones: dict[int, str] | None = None,
    start: date = DEFAULT_START,
    days: int = DEFAULT_DAYS,
) -> Dataset:
    """About `n_events` raw events per project (before duplicates), spread over `days` local days from `start`."""
    rng = random.Random(seed)
    zones = dict(DEFAULT_ZONES if zones is None else zones)
    last_day = start + timedelta(days=days - 1)
    now = datetime(last_day.year, last_day.month, last_day.day, 18, 0, tzinfo=UTC)
    projects = {}
    for pid in sorted(zones):
        to_date = last_day - timedelta(days=5)
        gen = _ProjectGen(random.Random(rng.getrandbits(64)), ZoneInfo(zones[pid]), start, days, now, to_date)
        events = gen.run(n_events)
        projects[pid] = ProjectSpec(zones[pid], events, (start + timedelta(days=3)).isoformat(), to_date.isoformat())
    return Dataset(seed, projects, now)


def _ms(dt: datetime) -> int:
    return (dt - EPOCH) // timedelta(milliseconds=1)


class _ProjectGen:
    def __init__(self, rng: random.Random, tz: ZoneInfo, start: date, days: int, now: datetime, to_date: date):
        self.rng, self.tz = rng, tz
        self.start_ms = _ms(datetime(start.year, start.month, start.day, tzinfo=tz))
        after = to_date + timedelta(days=1)
        self.to_end_ms = _ms(datetime(after.year, after.month, after.day, tzinfo=tz))  # end of suggested range
        self.now_ms = _ms(now)
        self.days = [start + timedelta(days=i) for i in range(days)]
        self.events: list[dict] = []
        self.seq = 0

    # ---- top level
    def run(self, n_events: int) -> list[dict]:
        rng = self.rng
        n_users = max(12, n_events // 25)
        self.users = [self._user(i) for i in range(n_users)]
        self._edges()
        while len(self.events) < n_events:
            self._journey(rng.choice(self.users))
        self._today_and_yesterday()
        self.events.sort(key=lambda e: time_to_ms(e["properties"]["time"]))
        return self._mess_up(self.events)

    def _user(self, i: int) -> dict:
        rng = self.rng
        kind = rng.random()
        uid: str | int = f"u{i:04d}" if kind < 0.8 else (f"usér-{i}-é😀" if kind < 0.9 else 100000 + i)
        return {
            "id": uid,
            "browser": rng.choice(["Chrome", "Firefox", "Safari", "Edge"]),
            "os": rng.choice(["Mac OS X", "Windows", "iOS", "Android", "Linux"]),
            "country": rng.choice(["US", "DE", "IN", "AU", "BR", "JP"]),
            "city": rng.choice(["New York", "München", "São Paulo", "東京", "Kraków", "Mumbai", "Zürich"]),
            "plan": rng.choice(["free", "free", "pro", "enterprise", None]),
            "first": self.start_ms - 5 * 86_400_000 + rng.randrange(int(0.8 * (self.now_ms - self.start_ms))),
        }

    # ---- one event
    def emit(self, name: str, t_ms: int, user: dict | None, extra: dict | None = None) -> dict:
        t_ms = min(t_ms, self.now_ms - 1)
        rng = self.rng
        self.seq += 1
        props: dict = {
            "time": t_ms // 1000 if t_ms % 1000 == 0 and rng.random() < 0.6 else t_ms,
            "distinct_id": "" if user is None else user["id"],
            "$insert_id": f"{rng.getrandbits(64):016x}-{self.seq:x}",
        }
        props.update(self._custom(name, user))
        if extra:
            props.update(extra)
        ev = {"event": name, "properties": props}
        self.events.append(ev)
        return ev

    def _custom(self, name: str, user: dict | None) -> dict:
        rng = self.rng
        u = user or {"browser": "Chrome", "os": "Linux", "country": "US", "city": "Zürich", "plan": None, "id": ""}
        pool = {
            "$browser": u["browser"],
            "$os": u["os"],
            "mp_country_code": u["country"],
            "$city": u["city"],
            "plan": u["plan"],
            "price": rng.choice([9.99, 20, 42, "42", "19.5", None, 0, 150.25, "abc", True]),
            "amount": rng.choice([round(rng.uniform(2000, 2500), 2), rng.randrange(0, 10_000), -35.5, "2100"]),
            "quantity": rng.choice([1, 2, 3, 5, "3", 2.5]),
            "is_trial": rng.choice([True, False, False, "false", None]),
            "tags": rng.sample(["new", "sale", "vip", "ünï", "🎉", "a b"], rng.randrange(0, 4)),
            "account_ids": rng.sample([1, 2, 3, 4, 17, 42], rng.randrange(0, 3)),
            "meta": {"source": rng.choice(["ads", "seo", "mail"]), "campaign": {"id": rng.randrange(5)}},
            "referrer": rng.choice(["https://www.facebook.com/x", "https://google.com/?q=Facebook", "", "direct"]),
            "score": round(rng.uniform(-5, 5), 3),
            "utm_source": rng.choice(["newsletter", "twitter", None]),
            "note": rng.choice(["Grüße", "日本語テキスト", "emoji 🎉🎊", 'quote " and \\ back', "café", "", " x "]),
            "$email": "" if rng.random() < 0.2 else f"{u['id']}@example.com",
            "page": rng.choice(["/home", "/pricing", "/docs/ä", "/"]),
            "version": rng.choice(["1.2.3", 2, 2.5, "2"]),
            "ratio": rng.choice([0.1, 0.2, 0.7, 1.0]),
            "flag": rng.choice([True, False]),
            "empty_list": [],
            "ключ": rng.choice(["значение", 7, None]),
            "long_text": "L" * rng.choice([10, 255, 256, 300]),
            "nested_list": rng.choice([["a", ["b"]], [{"k": 1}, "c"], [None, 1, "1"]]),
        }
        keys = sorted(pool)
        chosen = rng.sample(keys, rng.randint(10, 20))
        return {k: pool[k] for k in chosen}

    # ---- journeys
    GAPS_MS: ClassVar[list[int]] = [
        0,
        500,
        1000,
        1999,
        2000,
        2001,
        30_000,
        300_000,
        3_000_000,
        3_599_000,
        3_600_000,
        3_601_000,
        3 * 3_600_000,
        23 * 3_600_000,
        86_400_000,
        86_401_000,
    ]

    def _gap(self) -> int:
        return self.rng.choice(self.GAPS_MS) if self.rng.random() < 0.5 else self.rng.randrange(1000, 7_200_000)

    def _journey(self, user: dict) -> None:
        rng = self.rng
        t = user["first"] + rng.randrange(0, 25 * 86_400_000) if rng.random() < 0.7 else user["first"]
        if rng.random() < 0.15:  # a journey starting in the last hours of to_date, completing after it
            t = self.to_end_ms - rng.randrange(1, 3 * 3_600_000)
        kind = rng.random()
        anon = None if rng.random() < 0.05 else user
        gap = self._gap
        if kind < 0.55:
            names = ["App Open", "Sign Up"] + ["View Item"] * rng.randint(0, 3)
            names += [n for n in ("Add To Cart", "Purchase") if rng.random() < 0.6]
        elif kind < 0.7:  # out of order and/or (nearly) simultaneous
            names = rng.choice(
                [
                    ["Purchase", "View Item", "Sign Up"],
                    ["View Item", "Sign Up", "Purchase"],
                    ["Sign Up", "Purchase", "View Item", "Purchase"],
                    ["A", "B", "D", "C", "D", "E"],
                ]
            )
            gap = lambda: rng.choice([0, 500, 1000, 1999, 2000, 2001, 2500, 60_000])  # noqa: E731
        elif kind < 0.85:
            names = [rng.choice(EVENT_NAMES) for _ in range(rng.randint(1, 6))]
        else:  # a returning user: a few sessions over the following weeks
            for _ in range(rng.randint(2, 6)):
                t += rng.randrange(3_600_000, 9 * 86_400_000)
                for n in ["App Open"] + [rng.choice(EVENT_NAMES) for _ in range(rng.randint(0, 3))]:
                    if t < self.now_ms:
                        self.emit(n, t, anon)
                    t += rng.randrange(0, 600_000)
            return
        for n in names:
            if t >= self.now_ms:
                return
            self.emit(n, t, anon)
            t += gap()

    # ---- bucket edges, DST
    def _edges(self) -> None:
        rng = self.rng
        for d in self.days:
            midnight = _ms(datetime(d.year, d.month, d.day, tzinfo=self.tz))
            for t in (midnight, midnight - 1, midnight + rng.choice([1, 3_600_000, 12 * 3_600_000])):
                self.emit(rng.choice(EVENT_NAMES[:5]), t, rng.choice([*self.users, None]))
        # DST transitions: scan the UTC quarter hours for offset changes.
        t, prev = self.start_ms, None
        while t < self.now_ms:
            off = (EPOCH + timedelta(milliseconds=t)).astimezone(self.tz).utcoffset()
            if prev is not None and off != prev:
                for dt in (-3_600_000, -1_800_000, -1, 0, 1, 1_800_000, 1_799_999, 3_600_000, 5_400_000):
                    for name in ("App Open", "View Item"):
                        self.emit(name, t + dt, rng.choice(self.users))
            prev, t = off, t + 900_000

    def _today_and_yesterday(self) -> None:
        for back in (0, 1):
            for _ in range(40):
                t = self.now_ms - back * 86_400_000 - self.rng.randrange(1, 17 * 3_600_000)
                self.emit(self.rng.choice(EVENT_NAMES), t, self.rng.choice(self.users))

    # ---- duplicates and late arrivals
    def _mess_up(self, events: list[dict]) -> list[dict]:
        rng = self.rng
        out = list(events)
        for ev in rng.sample(events, max(1, len(events) // 50)):  # late events
            out.remove(ev)
            out.insert(rng.randrange(len(out) - len(out) // 10, len(out) + 1), ev)
        for ev in rng.sample(events, max(1, len(events) // 30)):  # exact duplicates (retries)
            dup = copy.deepcopy(ev)
            t = dup["properties"]["time"]
            if rng.random() < 0.3 and t < 10**10:
                dup["properties"]["time"] = t * 1000  # same instant, other unit
            out.insert(rng.randrange(out.index(ev) + 1, len(out) + 1), dup)
        for ev in rng.sample(events, max(1, len(events) // 200)):  # conflicting copies: last wins
            dup = copy.deepcopy(ev)
            custom = [k for k in sorted(dup["properties"]) if k not in ("time", "distinct_id", "$insert_id")]
            for k in custom[:3]:
                dup["properties"][k] = "last-copy-wins"
            out.append(dup)
        for ev in rng.sample(events, max(1, len(events) // 200)):  # same $insert_id, other time
            dup = copy.deepcopy(ev)
            dup["properties"]["time"] = time_to_ms(dup["properties"]["time"]) - 1000
            out.append(dup)
        return out
