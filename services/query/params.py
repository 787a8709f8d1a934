"""Reading query parameters the way existing clients send them.

Parameters come from the query string and/or a form body; list parameters are JSON
strings; unknown parameters are ignored. Every reader names the parameter in its error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any, Literal, overload

import orjson
from starlette.requests import Request

from footfall.shared.errors import ParamError


class Params:
    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)

    @classmethod
    async def from_request(cls, request: Request) -> Params:
        values: dict[str, str] = {}
        if request.method == "POST":
            content_type = request.headers.get("content-type", "")
            if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
                form = await request.form()
                values.update({k: v for k, v in form.items() if isinstance(v, str)})
        values.update(request.query_params)  # the query string wins over the body
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
