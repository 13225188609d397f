"""A Bot API call's parameters, from the query string, a form (urlencoded or multipart, as
aiogram sends them: every value a string, objects as JSON) or a JSON body, read with Telegram's
400s for what is missing or malformed."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from codemojex.telegram.sandbox.errors import bad_request
from codemojex.telegram.sandbox.guard import parse_json, read_json


async def read_params(request: web.Request) -> Params:
    values: dict[str, Any] = dict(request.query)
    if request.body_exists:
        if request.content_type == "application/json":
            try:
                body = await read_json(request)
            except ValueError as exc:  # a document too deep to parse included
                raise bad_request("can't parse JSON request body") from exc
            if not isinstance(body, dict):
                raise bad_request("the JSON request body must be an object")
            values.update(body)
        else:
            form = await request.post()
            values.update({key: value for key, value in form.items() if isinstance(value, str)})
    return Params(values)


class Params:
    """Typed access to one call's parameters; a bad value is Telegram's 400."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def has(self, name: str) -> bool:
        return self.values.get(name) not in (None, "")

    def integer(self, name: str, default: int | None = None) -> int | None:
        value = self.values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            raise bad_request(f"invalid {name} value")
        if isinstance(value, int):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise bad_request(f"invalid {name} value") from None

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        if value is None:
            return None
        return value if isinstance(value, str) else str(value)

    def flag(self, name: str) -> bool:
        value = self.values.get(name)
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1", "yes")
        return bool(value)

    def obj(self, name: str) -> Any:
        """A JSON value: as given in a JSON body, parsed when it came as a form string."""
        value = self.values.get(name)
        if isinstance(value, str):
            if not value:
                return None
            try:
                return parse_json(value)
            except ValueError:
                raise bad_request(f"can't parse {name} JSON object") from None
        return value
