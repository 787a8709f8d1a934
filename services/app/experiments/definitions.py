"""Validation of experiment request bodies (semantics-2.md §16.2, §16.5) into canonical values.

Every problem is a `ValidationError` (400 `validation_error`) naming the member
(`variants[1].key: ...`, `metrics[0].selector: syntax error at position 3: ...`).

Members. Create takes `name` (required), `description`, `hypothesis`, `settings`, `variants`,
`metrics`, `tags`; PATCH takes any of them plus `start_date`, `end_date` and `status`. The
read-only fields of the experiment record (`id`, `created`, `creator_*`, `exposures_cache`,
`results_cache`, `can_*`, … — what a client that sends a fetched record back would include) and
Mixpanel's access members (`global_access_type`, `access_type`, `can_edit`) are accepted and
ignored; any other member is refused, so a misspelt one is never silently dropped.

Decisions where §16.5 leaves the shapes open:

* `name`: 1–255 characters, not only spaces; `description` at most 400, `hypothesis` at most
  4000 characters (strings or null); `tags`: at most 50 strings of 1–255 characters, duplicates
  dropped (first kept).
* `variants`: at most 20 objects `{key, is_control, split, value, description}` (unknown members
  refused); `key` 1–255 characters, unique; exactly one `is_control: true` unless the list is
  empty (a draft may have none; launching needs two or more); `split` a number in [0, 1], given
  for every variant or for none (then equal shares), and the splits add up to 1 (±1e-6). Splits
  are informational: Footfall assigns nobody.
* `metrics`: at most 20 objects `{id, kind, type, event, selector}`; `id` 1–64 characters,
  unique, default the first free `m1`, `m2`, …; `kind` `primary` (default), `secondary` or
  `guardrail`; `type` `conversion` (default) or `total`; `event` 1–255 characters; `selector` an
  event expression of the segmentation language (checked when saved; "" or null: none).
* `settings`: merged member by member into the stored settings (a member set to null returns to
  its default), so `{"settings": {"confidence": 0.9}}` changes only the confidence. The analysis
  settings are checked: `exposure_event`, `experiment_name_property`, `variant_name_property`,
  `experiment_name` (1–255 characters), `model` (`frequentist`, `sequential`, `bayesian`),
  `confidence` (a number strictly between 0 and 1). Other members are kept as given.
  `decision` is written by `decide` only: sending it back unchanged is accepted, changing it is a
  400. Returned settings show every analysis setting with its effective value; `experiment_name`
  defaults to the experiment's name and follows renames until it is set explicitly.
* Dates (`start_date`, `end_date`, and force_conclude's `end_date`): `YYYY-MM-DD` is the start
  (for `start_date`) or the last second (for `end_date`) of that day in the project's time zone;
  otherwise an ISO 8601 datetime (`2024-03-10T12:00:00Z`, an offset, or naive = the project's time
  zone). Fractions of a second are dropped: dates are kept and shown to the second, and an event
  belongs to the range when its time, to the second, does. Years 1971–2199; null clears a date
  where the lifecycle allows it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from footfall.services.app.experiments.model import STATUSES, Experiment, ValidationError
from footfall.shared.expr import ExprError, check_expr, parse_expr

__all__ = [
    "ANALYSIS_SETTINGS",
    "CREATE_MEMBERS",
    "DEFAULT_SETTINGS",
    "MAX_METRICS",
    "MAX_VARIANTS",
    "PATCH_MEMBERS",
    "effective_settings",
    "merge_settings",
    "parse_create",
    "parse_date",
    "parse_patch",
    "parse_variants",
]

MAX_VARIANTS = 20
MAX_METRICS = 20
MAX_TAGS = 50
MAX_TEXT = 255
MAX_DESCRIPTION = 400
MAX_HYPOTHESIS = 4000
MAX_METRIC_ID = 64
MODELS = ("frequentist", "sequential", "bayesian")
KINDS = ("primary", "secondary", "guardrail")
TYPES = ("conversion", "total")

DEFAULT_SETTINGS: Mapping[str, Any] = {
    "exposure_event": "$experiment_started",
    "experiment_name_property": "Experiment name",
    "variant_name_property": "Variant name",
    "model": "frequentist",
    "confidence": 0.95,
}
ANALYSIS_SETTINGS = (
    "exposure_event",
    "experiment_name_property",
    "variant_name_property",
    "experiment_name",
    "model",
    "confidence",
)
CREATE_MEMBERS = frozenset({"name", "description", "hypothesis", "settings", "variants", "metrics", "tags"})
PATCH_MEMBERS = CREATE_MEMBERS | {"start_date", "end_date", "status"}
# Read-only fields of the record and Mixpanel's access members: accepted, ignored.
IGNORED_MEMBERS = frozenset(
    {
        "id",
        "content_type",
        "created",
        "creator_id",
        "creator_name",
        "creator_email",
        "modified",
        "deleted",
        "is_favorited",
        "pinned_date",
        "last_modified_by_id",
        "last_modified_by_name",
        "last_modified_by_email",
        "can_view",
        "can_update_basic",
        "can_update_restricted",
        "can_update_visibility",
        "is_superadmin",
        "allow_staff_override",
        "can_share",
        "is_shared_with_project",
        "exposures_cache",
        "results_cache",
        "feature_flag",
        "global_access_type",
        "access_type",
        "can_edit",
    }
)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EARLIEST = datetime(1971, 1, 1, tzinfo=UTC)
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: object, member: str, limit: int, *, nullable: bool = False, blank: bool = True) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ValidationError(member, "must be a string" + (" or null" if nullable else ""))
    if len(value) > limit:
        raise ValidationError(member, f"at most {limit} characters")
    if not blank and not value.strip():
        raise ValidationError(member, "must not be empty")
    return value


def _required_text(value: object, member: str, limit: int = MAX_TEXT) -> str:
    text = _text(value, member, limit, blank=False)
    if text is None:  # unreachable: not nullable
        raise ValidationError(member, "required")
    return text


def _members(obj: Mapping[str, Any], allowed: frozenset[str] | set[str], where: str) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        prefix = f"{where}." if where else ""
        raise ValidationError(f"{prefix}{unknown[0]}", "unknown member")


def _object(value: object, member: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(member, "must be a JSON object")
    return value


def _list(value: object, member: str, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError(member, "must be a JSON array")
    if len(value) > limit:
        raise ValidationError(member, f"at most {limit} items")
    return value


# ------------------------------------------------------------------------------------------- parts
def parse_tags(value: object) -> tuple[str, ...]:
    items = _list(value, "tags", MAX_TAGS)
    return tuple(dict.fromkeys(_required_text(t, f"tags[{i}]") for i, t in enumerate(items)))


_VARIANT_MEMBERS = frozenset({"key", "is_control", "split", "value", "description"})


def parse_variants(value: object) -> tuple[dict[str, Any], ...]:
    items = _list(value, "variants", MAX_VARIANTS)
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"variants[{i}]"
        obj = _object(item, where)
        _members(obj, _VARIANT_MEMBERS, where)
        if "key" not in obj:
            raise ValidationError(f"{where}.key", "required")
        key = _required_text(obj["key"], f"{where}.key")
        if any(v["key"] == key for v in out):
            raise ValidationError(f"{where}.key", f"duplicate variant key {key!r}")
        control = obj.get("is_control", False)
        if not isinstance(control, bool):
            raise ValidationError(f"{where}.is_control", "must be true or false")
        split = obj.get("split")
        if split is not None and (not _is_number(split) or not 0 <= split <= 1):
            raise ValidationError(f"{where}.split", "must be a number between 0 and 1")
        description = _text(obj.get("description"), f"{where}.description", MAX_DESCRIPTION, nullable=True)
        out.append(
            {"key": key, "is_control": control, "split": split, "value": obj.get("value"), "description": description}
        )
    if not out:
        return ()
    controls = sum(1 for v in out if v["is_control"])
    if controls != 1:
        raise ValidationError("variants", f"exactly one variant must have is_control true (found {controls})")
    given = [v["split"] is not None for v in out]
    if not any(given):
        for v in out:
            v["split"] = 1 / len(out)
    elif not all(given):
        raise ValidationError(f"variants[{given.index(False)}].split", "give a split for every variant or for none")
    else:
        total = math.fsum(v["split"] for v in out)
        if abs(total - 1) > 1e-6:
            raise ValidationError("variants", f"the splits must add up to 1 (they add up to {total:g})")
    return tuple(out)


_METRIC_MEMBERS = frozenset({"id", "kind", "type", "event", "selector"})


def _choice(value: object, member: str, choices: tuple[str, ...]) -> str:
    if value not in choices or not isinstance(value, str):
        raise ValidationError(member, "must be one of " + ", ".join(choices))
    return value


def parse_metrics(value: object) -> tuple[dict[str, Any], ...]:
    items = _list(value, "metrics", MAX_METRICS)
    objs = [_object(item, f"metrics[{i}]") for i, item in enumerate(items)]
    ids: list[str | None] = []
    for i, obj in enumerate(objs):
        _members(obj, _METRIC_MEMBERS, f"metrics[{i}]")
        if obj.get("id") is None:
            ids.append(None)
            continue
        named = _required_text(obj["id"], f"metrics[{i}].id", MAX_METRIC_ID)
        if named in ids:
            raise ValidationError(f"metrics[{i}].id", f"duplicate metric id {named!r}")
        ids.append(named)
    taken = {i for i in ids if i is not None}
    counter = 0
    out = []
    for i, obj in enumerate(objs):
        where = f"metrics[{i}]"
        given = ids[i]
        if given is None:
            counter += 1
            while f"m{counter}" in taken:
                counter += 1
            given = f"m{counter}"
            taken.add(given)
        metric_id = given
        if "event" not in obj:
            raise ValidationError(f"{where}.event", "required")
        event = _required_text(obj["event"], f"{where}.event")
        selector = _text(obj.get("selector"), f"{where}.selector", 4096, nullable=True) or None
        if selector is not None:
            try:
                check_expr(parse_expr(selector))
            except ExprError as exc:
                raise ValidationError(f"{where}.selector", exc.message) from None
        out.append(
            {
                "id": metric_id,
                "kind": _choice(obj.get("kind", "primary"), f"{where}.kind", KINDS),
                "type": _choice(obj.get("type", "conversion"), f"{where}.type", TYPES),
                "event": event,
                "selector": selector,
            }
        )
    return tuple(out)


def _setting(name: str, value: object) -> object:
    member = f"settings.{name}"
    if name == "model":
        return _choice(value, member, MODELS)
    if name == "confidence":
        if not _is_number(value) or not 0 < value < 1:  # type: ignore[operator]
            raise ValidationError(member, "must be a number between 0 and 1 (exclusive), such as 0.95")
        return float(value)  # type: ignore[arg-type]
    return _required_text(value, member)


def merge_settings(current: Mapping[str, Any], value: object) -> dict[str, Any]:
    """`value` (a settings object from a request) merged into the stored `current` settings."""
    given = _object(value, "settings")
    out = dict(current)
    for name, item in given.items():
        if name == "decision":
            if item != current.get("decision"):
                raise ValidationError("settings.decision", "is recorded by the decide action, not by an update")
            continue
        if item is None:
            out.pop(name, None)
        elif name in ANALYSIS_SETTINGS:
            out[name] = _setting(name, item)
        else:
            out[name] = item
    return out


def effective_settings(experiment: Experiment) -> dict[str, Any]:
    """The settings as returned and analysed: every analysis setting with its effective value."""
    return {**DEFAULT_SETTINGS, "experiment_name": experiment.name, **experiment.settings}


def parse_date(value: object, member: str, tz: str, *, end: bool) -> datetime | None:
    """A request date as a UTC instant to the second (see the module notes), or None for null."""
    if value is None:
        return None
    problem = "expected YYYY-MM-DD or an ISO 8601 datetime"
    if not isinstance(value, str) or not value.isascii() or len(value) > 64:
        raise ValidationError(member, problem)
    zone = ZoneInfo(tz)
    try:
        if _DAY.fullmatch(value):
            day = date.fromisoformat(value) + timedelta(days=1 if end else 0)
            moment = datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)
            moment -= timedelta(seconds=1 if end else 0)
        else:
            parsed = datetime.fromisoformat(value)
            moment = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationError(member, f"{problem}, got {value!r}") from None
    if not _EARLIEST <= moment < _LATEST:
        raise ValidationError(member, "must lie between the years 1971 and 2199")
    return moment.replace(microsecond=0)


# -------------------------------------------------------------------------------------------- bodies
def _check_members(body: Mapping[str, Any], allowed: frozenset[str]) -> None:
    _members(body, allowed | IGNORED_MEMBERS, "")


def _definition_members(body: Mapping[str, Any], current_settings: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "name" in body:
        out["name"] = _required_text(body["name"], "name")
    if "description" in body:
        out["description"] = _text(body["description"], "description", MAX_DESCRIPTION, nullable=True)
    if "hypothesis" in body:
        out["hypothesis"] = _text(body["hypothesis"], "hypothesis", MAX_HYPOTHESIS, nullable=True)
    if "tags" in body:
        out["tags"] = () if body["tags"] is None else parse_tags(body["tags"])
    if "variants" in body:
        out["variants"] = () if body["variants"] is None else parse_variants(body["variants"])
    if "metrics" in body:
        out["metrics"] = () if body["metrics"] is None else parse_metrics(body["metrics"])
    if "settings" in body:
        out["settings"] = (
            dict(current_settings) if body["settings"] is None else merge_settings(current_settings, body["settings"])
        )
    return out


def parse_create(body: Mapping[str, Any]) -> dict[str, Any]:
    """The members of a new experiment (`name` required)."""
    _check_members(body, CREATE_MEMBERS)
    if "name" not in body:
        raise ValidationError("name", "required")
    return _definition_members(body, {})


def parse_patch(body: Mapping[str, Any], current: Experiment, tz: str) -> dict[str, Any]:
    """The changes a PATCH asks for (members absent from the body are absent here)."""
    _check_members(body, PATCH_MEMBERS)
    out = _definition_members(body, current.settings)
    for name in ("start_date", "end_date"):
        if name in body:
            out[name] = parse_date(body[name], name, tz, end=name == "end_date")
    if "status" in body:
        out["status"] = _choice(body["status"], "status", STATUSES)
    return out
