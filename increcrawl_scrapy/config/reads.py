"""Typed reads of settings, with errors that name the setting and the value."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import regex
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object


class ConfigError(ValueError):
    """A setting has a value the crawl cannot run with. The message names it."""

    def __init__(self, name: str, value: Any, why: str) -> None:
        super().__init__(f"{name}={value!r}: {why}")
        self.setting = name
        self.value = value


def check_format(name: str, value: str) -> None:
    if value not in ("markdown", "html"):
        raise ConfigError(name, value, "formats are 'markdown' and 'html'")


class Reader:
    """Typed reads with errors that name the setting and the value."""

    def __init__(self, settings: BaseSettings, defaults: Mapping[str, Any]) -> None:
        self.settings = settings
        self.defaults = defaults

    def raw(self, name: str) -> Any:
        return self.settings.get(name, self.defaults[name])

    def unset(self, name: str) -> bool:
        """Whether the setting is unset (None): its default is not what was asked."""
        return self.settings.get(name) is None

    def text_or_env(self, name: str) -> str:
        """The setting, else the environment variable of the same name."""
        value = self.settings.get(name)
        if value is None or value == "":
            value = os.environ.get(name, "")
        if not isinstance(value, str):
            raise ConfigError(name, value, "must be a string")
        return value

    def text(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str):
            raise ConfigError(name, value, "must be a string")
        return value

    def flag(self, name: str) -> bool:
        value = self.raw(name)
        if isinstance(value, bool):
            return value
        try:
            return BaseSettings({name: value}).getbool(name)
        except ValueError:
            raise ConfigError(name, value, "must be true or false") from None

    def number(
        self,
        name: str,
        kind: Callable[[Any], Any],
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        above: float | None = None,
    ) -> Any:
        value = self.raw(name)
        if isinstance(value, bool):
            raise ConfigError(name, value, "must be a number")
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ConfigError(name, value, "must be a number") from None
        if kind is int and isinstance(value, float) and value != number:
            raise ConfigError(name, value, "must be a whole number")
        if number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(name, value, "must be a finite number")
        if minimum is not None and number < minimum:
            raise ConfigError(name, value, f"must be at least {minimum:g}")
        if above is not None and number <= above:
            raise ConfigError(name, value, f"must be greater than {above:g}")
        if maximum is not None and number > maximum:
            raise ConfigError(name, value, f"must be at most {maximum:g}")
        return number

    def duration(self, name: str) -> float | None:
        """Seconds, as a number or a string with a unit (``"7d"``, ``"12h"``,
        ``"90m"``, ``"2w"``, ``"30s"``); None or empty: unset."""
        value = self.raw(name)
        if value is None or value == "":
            return None
        text = str(value).strip().lower()
        unit = _UNITS.get(text[-1:]) if text else None
        try:
            seconds = float(text[:-1]) * unit if unit else float(text)
        except ValueError:
            raise ConfigError(name, value, "must be seconds or a duration such as 7d") from None
        if not 0 < seconds < float("inf"):
            raise ConfigError(name, value, "must be a positive duration")
        return seconds

    def clock(self, name: str) -> Callable[[], float]:
        # A hook for tests and simulations: a callable returning Unix seconds.
        value = self.raw(name)
        if value is None:
            return time.time
        if isinstance(value, str):
            try:
                value = load_object(value)
            except (ImportError, NameError, ValueError) as exc:
                raise ConfigError(name, value, f"cannot be imported ({exc})") from None
        if not callable(value):
            raise ConfigError(name, value, "must be a callable returning Unix seconds")
        return cast("Callable[[], float]", value)

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        value = self.raw(name)
        if not isinstance(value, str) or value.lower() not in allowed:
            raise ConfigError(name, value, f"must be one of {', '.join(allowed)}")
        return value.lower()

    def strings(
        self,
        name: str,
        *,
        check: Callable[[str, str], None] | None = None,
        comma_separated: bool = True,
    ) -> tuple[str, ...]:
        value = self.raw(name)
        if isinstance(value, str) and value.lstrip().startswith("["):
            # ``-s NAME='["a", "b"]'`` from the command line or a Scrapyd job.
            try:
                value = json.loads(value)
            except ValueError:
                raise ConfigError(name, value, "is not a valid JSON list") from None
        if isinstance(value, str):
            parts = value.split(",") if comma_separated else [value]
            items = [part.strip() for part in parts if part.strip()]
        elif isinstance(value, list | tuple | set | frozenset):
            items = list(value)
        else:
            raise ConfigError(name, value, "must be a list of strings")
        for item in items:
            if not isinstance(item, str) or not item:
                raise ConfigError(name, value, f"has a non-string or empty entry {item!r}")
            if check is not None:
                check(name, item)
        return tuple(items)


def check_regex(name: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(name, pattern, f"not a valid regular expression ({exc})") from None


def compile_user_pattern(pattern: str) -> Any:
    """A user's volatile rule (``INCRECRAWL_VOLATILE_PATTERNS``), compiled; a bad one raises.

    Users' rules run under the regex module: it can stop a rule that backtracks (a
    timeout) and lets other threads run meanwhile (no GIL).
    """
    try:
        return regex.compile(pattern, regex.MULTILINE | regex.VERSION0)
    except regex.error as exc:
        raise ConfigError(
            "INCRECRAWL_VOLATILE_PATTERNS", pattern, f"not a valid regular expression ({exc})"
        ) from None


#: The units of a duration string (``Reader.duration``), in seconds.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0, "w": 604_800.0}
