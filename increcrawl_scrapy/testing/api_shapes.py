"""Bodies the Geonode API documents: its three error shapes and FastAPI-style
request validation. Used by the stand-in server."""

from __future__ import annotations

import uuid
from typing import Any

#: Extraction error codes and whether the API marks them retryable.
EXTRACTION_ERRORS: dict[str, bool] = {
    "RATE_LIMITED": True,
    "WORK_CONCURRENCY_LIMITED": True,
    "WORK_CONCURRENCY_LEASE_EXPIRED": True,
    "TEMPORARY_BLOCK": True,
    "NETWORK_ERROR": True,
    "CAPTCHA_CHALLENGE": False,
    "PERMANENT_BLOCK": False,
    "INVALID_URL": False,
    "INVALID_WAIT_FOR_SELECTOR": False,
    "WAIT_FOR_SELECTOR_TIMEOUT": False,
    "UNPROCESSABLE_CONTENT": False,
    "AUTH_REQUIRED": False,
    "TIMEOUT": True,
    "CANCELLED": False,
    "PAYMENT_REQUIRED": False,
    "INTERNAL_ERROR": True,
    "PROXY_ERROR": True,
}

FORMATS = ("markdown", "html")
PROXY_TYPES = ("datacenter", "residential", "mix")
WAIT_UNTIL = ("commit", "domcontentloaded", "load", "networkidle")


def correlation_id() -> str:
    return uuid.uuid4().hex


def api_error(
    code: str, message: str, *, retryable: bool, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Shape 1: 400/401/402/408/429/500/503."""
    return {
        "code": code,
        "message": message,
        "retryable": retryable,
        "correlation_id": correlation_id(),
        "details": details,
    }


def extraction_error(
    code: str, message: str, *, details: dict[str, str] | None = None
) -> dict[str, Any]:
    """Shape 2: 422 when the extraction itself failed."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "retryable": EXTRACTION_ERRORS[code],
        "correlation_id": correlation_id(),
    }
    if details:
        error["details"] = details
    return {"error": error, "tokens_charged": 0}


def gateway_html(status: int) -> bytes:
    title = {502: "502 Bad Gateway", 504: "504 Gateway Time-out"}.get(status, str(status))
    return (
        f"<html><head><title>{title}</title></head><body>"
        f"<center><h1>{title}</h1></center><hr><center>nginx</center></body></html>"
    ).encode()


class Validator:
    """Collects FastAPI-style ``detail`` entries (shape 3) while reading a body."""

    def __init__(self, body: Any, where: str = "body") -> None:
        self.body = body if isinstance(body, dict) else {}
        self.where = where
        self.detail: list[dict[str, Any]] = []
        if not isinstance(body, dict):
            self.fail([], "model_attributes_type", "Input should be a valid dictionary", body)

    def fail(
        self, loc: list[str | int], kind: str, msg: str, value: Any = None, **ctx: Any
    ) -> None:
        entry: dict[str, Any] = {"type": kind, "loc": [self.where, *loc], "msg": msg}
        entry["input"] = value
        if ctx:
            entry["ctx"] = ctx
        self.detail.append(entry)

    def required_str(self, name: str) -> str | None:
        if name not in self.body:
            self.fail([name], "missing", "Field required", None)
            return None
        return self.string(name)

    def string(self, name: str, default: str | None = None) -> str | None:
        value = self.body.get(name, default)
        if value is not None and not isinstance(value, str):
            self.fail([name], "string_type", "Input should be a valid string", value)
            return None
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.body.get(name, default)
        if not isinstance(value, bool):
            self.fail([name], "bool_type", "Input should be a valid boolean", value)
            return default
        return value

    def choice(self, name: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.body.get(name, default)
        if value not in allowed:
            self.fail([name], "enum", _enum_msg(allowed), value, expected=_enum_list(allowed))
            return default
        return str(value)

    def formats(self, default: list[str]) -> list[str]:
        value = self.body.get("formats", default)
        if not isinstance(value, list):
            self.fail(["formats"], "list_type", "Input should be a valid list", value)
            return default
        for index, item in enumerate(value):
            if item not in FORMATS:
                self.fail(
                    ["formats", index],
                    "enum",
                    _enum_msg(FORMATS),
                    item,
                    expected=_enum_list(FORMATS),
                )
        return [str(item) for item in value] or default

    def headers(self) -> dict[str, str] | None:
        value = self.body.get("headers")
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(["headers"], "dict_type", "Input should be a valid dictionary", value)
            return None
        for key, item in value.items():
            if not isinstance(item, str):
                self.fail(["headers", key], "string_type", "Input should be a valid string", item)
        return {str(k): str(v) for k, v in value.items()}

    def integer(self, name: str, default: int | None, *, ge: int | None = None) -> int | None:
        value = self.body.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail([name], "int_type", "Input should be a valid integer", value)
            return default
        if ge is not None and value < ge:
            self.fail(
                [name],
                "greater_than_equal",
                f"Input should be greater than or equal to {ge}",
                value,
                ge=ge,
            )
        return value

    def proxy(self) -> dict[str, Any] | None:
        value = self.body.get("proxy")
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(["proxy"], "dict_type", "Input should be a valid dictionary", value)
            return None
        kind = value.get("type", "residential")
        if kind not in PROXY_TYPES:
            self.fail(["proxy", "type"], "enum", _enum_msg(PROXY_TYPES), kind)
        country = value.get("country")
        if country is not None and not isinstance(country, str):
            self.fail(
                ["proxy", "country"], "string_type", "Input should be a valid string", country
            )
        return {"country": country, "type": kind}

    def wait_config(self) -> dict[str, Any] | None:
        value = self.body.get("wait_config")
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(["wait_config"], "dict_type", "Input should be a valid dictionary", value)
            return None
        until = value.get("wait_until")
        if until is not None and until not in WAIT_UNTIL:
            self.fail(["wait_config", "wait_until"], "enum", _enum_msg(WAIT_UNTIL), until)
        timeout = value.get("wait_timeout")
        if timeout is not None and (not isinstance(timeout, int) or not 0 <= timeout <= 30000):
            self.fail(
                ["wait_config", "wait_timeout"],
                "less_than_equal",
                "Input should be less than or equal to 30000",
                timeout,
            )
        return value

    def url_list(self, name: str, *, min_length: int, max_length: int) -> list[str]:
        if name not in self.body:
            self.fail([name], "missing", "Field required", None)
            return []
        value = self.body[name]
        if not isinstance(value, list):
            self.fail([name], "list_type", "Input should be a valid list", value)
            return []
        if len(value) < min_length:
            self.fail(
                [name],
                "too_short",
                f"List should have at least {min_length} item after validation, not {len(value)}",
                value,
                field_type="List",
                min_length=min_length,
                actual_length=len(value),
            )
        if len(value) > max_length:
            self.fail(
                [name],
                "too_long",
                f"List should have at most {max_length} items after validation, not {len(value)}",
                None,
                field_type="List",
                max_length=max_length,
                actual_length=len(value),
            )
        for index, item in enumerate(value[: max_length + 1]):
            if not isinstance(item, str):
                self.fail([name, index], "string_type", "Input should be a valid string", item)
        return [item for item in value if isinstance(item, str)]

    def body_dict(self) -> dict[str, Any]:
        return {"detail": self.detail}


def query_int(
    detail: list[dict[str, Any]], name: str, raw: str | None, default: int, low: int, high: int
) -> int:
    """Validate an integer query parameter the way FastAPI does."""
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        detail.append(
            {
                "type": "int_parsing",
                "loc": ["query", name],
                "msg": "Input should be a valid integer, unable to parse string as an integer",
                "input": raw,
            }
        )
        return default
    if value < low:
        detail.append(
            {
                "type": "greater_than_equal",
                "loc": ["query", name],
                "msg": f"Input should be greater than or equal to {low}",
                "input": raw,
                "ctx": {"ge": low},
            }
        )
    elif value > high:
        detail.append(
            {
                "type": "less_than_equal",
                "loc": ["query", name],
                "msg": f"Input should be less than or equal to {high}",
                "input": raw,
                "ctx": {"le": high},
            }
        )
    return value


def _enum_list(allowed: tuple[str, ...]) -> str:
    quoted = [f"'{a}'" for a in allowed]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _enum_msg(allowed: tuple[str, ...]) -> str:
    return f"Input should be {_enum_list(allowed)}"
