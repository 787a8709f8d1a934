"""Reading query parameters the way existing clients send them.

Parameters come from the query string and/or a form body
(`application/x-www-form-urlencoded`); list parameters are JSON strings; unknown
parameters are ignored. Every reader names the parameter in its error.

A form body is read only once the caller's credentials are known to be valid, and at
most `limit` bytes of it (`QueryService.wrap`): `form_body_expected` says whether a request
has one (a multipart body is refused with 415: parameters are text, never files), and
`parse_form` decodes it as Starlette would. Any other body is never read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any, Literal, overload
from urllib.parse import parse_qsl

import orjson
from starlette.requests import Request

from footfall.shared.errors import FootfallError, ParamError

FORM_TYPE = "application/x-www-form-urlencoded"


def form_body_expected(request: Request) -> bool:
    """True for a POST with a form body (to be read after authentication); 415 for a
    multipart one."""
    if request.method != "POST":
        return False
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media.startswith("multipart/"):
        raise FootfallError(
            415, f"multipart bodies are not accepted by the query interface: send the parameters as {FORM_TYPE}"
        )
    return media == FORM_TYPE


def parse_form(body: bytes) -> dict[str, str]:
    """The fields of a urlencoded body (the last of a repeated name wins), decoded as
    Starlette decodes forms: bytes as Latin-1, `%xx` escapes as UTF-8."""
    return dict(parse_qsl(body.decode("latin-1"), keep_blank_values=True))


class Params:
    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)

    @classmethod
    def from_parts(cls, query: Mapping[str, str], form: Mapping[str, str] | None = None) -> Params:
        """The form's fields, then the query string's (which wins over the body)."""
        values = dict(form or {})
        values.update(query)
        return cls(values)

    def get(self, name: str) -> str | None:
        value = self.values.get(name)
        return None if value is None or value == "" else value

    def required(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise ParamError(f"Missing required parameter: {name}")
        return value

    @overload
    def date(self, name: str, *, required: Literal[True] = True) -> date: ...

    @overload
    def date(self, name: str, *, required: bool) -> date | None: ...

    def date(self, name: str, *, required: bool = True) -> date | None:
        raw = self.required(name) if required else self.get(name)
        if raw is None:
            return None
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise ParamError(f"Error in {name}: invalid date {raw!r}, expected yyyy-mm-dd") from None

    @overload
    def integer(self, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int: ...

    @overload
    def integer(
        self, name: str, default: None = None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None: ...

    def integer(
        self, name: str, default: int | None = None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        raw = self.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ParamError(f"Error in {name}: {raw!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise ParamError(f"Error in {name}: must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ParamError(f"Error in {name}: must be at most {maximum}")
        return value

    def boolean(self, name: str, default: bool = False) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes"):
            return True
        if lowered in ("0", "false", "no"):
            return False
        raise ParamError(f"Error in {name}: {raw!r} is not a boolean")

    @overload
    def choice(self, name: str, allowed: Sequence[str], default: str) -> str: ...

    @overload
    def choice(self, name: str, allowed: Sequence[str], default: None = None) -> str | None: ...

    def choice(self, name: str, allowed: Sequence[str], default: str | None = None) -> str | None:
        raw = self.get(name)
        if raw is None:
            return default
        if raw not in allowed:
            raise ParamError(f"Error in {name}: {raw!r} is not one of {', '.join(allowed)}")
        return raw

    def json_list(self, name: str, *, required: bool = False) -> list[Any] | None:
        raw = self.required(name) if required else self.get(name)
        if raw is None:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ParamError(f"Error in {name}: must be a JSON array") from None
        if not isinstance(value, list):
            raise ParamError(f"Error in {name}: must be a JSON array")
        return value

    def string_list(self, name: str, *, required: bool = False) -> list[str] | None:
        values = self.json_list(name, required=required)
        if values is None:
            return None
        if not all(isinstance(v, str) for v in values):
            raise ParamError(f"Error in {name}: must be a JSON array of strings")
        return values


def check_range(from_date: date, to_date: date) -> None:
    if to_date < from_date:
        raise ParamError("Error in to_date: to_date is before from_date")
