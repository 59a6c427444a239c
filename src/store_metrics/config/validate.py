"""Checks for option values, shared by the configuration reader and the backend factories.

Each check raises ``ConfigError`` naming the option and what it
accepts, so a typo in ``airflow.cfg`` and a bad argument in Python read the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import ConfigError
from ..naming import is_valid_prefix

_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}


def boolean(option: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(option, value, "true, false")


def choice(option: str, value: object, accepted: Iterable[str]) -> str:
    accepted = list(accepted)
    text = str(value).strip().lower()
    if text not in accepted:
        raise ConfigError(option, value, accepted)
    return text


def port(option: str, value: object) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(option, value, "an integer port from 1 to 65535") from None
    if not 1 <= number <= 65535:
        raise ConfigError(option, value, "an integer port from 1 to 65535")
    return number


def positive_seconds(option: str, value: object, *, allow_zero: bool = False) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not (number >= 0 if allow_zero else number > 0) or number == float("inf"):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(option, value, f"a number of seconds {bound}")
    return number


def number_between(option: str, value: object, low: float, high: float, unit: str) -> float:
    """A number from ``low`` to ``high`` (inclusive), e.g. milliseconds."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not low <= number <= high:  # also rejects nan
        raise ConfigError(option, value, f"a number of {unit} from {low:g} to {high:g}")
    return number


def positive_int(option: str, value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(option, value, "an integer >= 1")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(option, value, "an integer >= 1") from None
    if number < 1:
        raise ConfigError(option, value, "an integer >= 1")
    return number


def nonnegative_int(option: str, value: object) -> int:
    """An integer >= 0 (a rate, where 0 means "no limit")."""
    if isinstance(value, bool):
        raise ConfigError(option, value, "an integer >= 0")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(option, value, "an integer >= 0") from None
    if number < 0:
        raise ConfigError(option, value, "an integer >= 0")
    return number


def host(option: str, value: object) -> str:
    text = str(value).strip()
    if not text or any(c.isspace() for c in text) or "/" in text:
        raise ConfigError(option, value, "a host name or IP address")
    return text


def prefix(option: str, value: object) -> str:
    text = str(value).strip()
    if not is_valid_prefix(text):
        raise ConfigError(
            option, value, "dot-separated words of letters, digits and '_', each starting with a letter"
        )
    return text


def http_url(option: str, value: object) -> str:
    """An ``http://`` or ``https://`` URL with a host and no query or fragment, without its trailing
    ``/``; empty means "not set"."""
    from urllib.parse import urlsplit

    text = str(value).strip()
    if not text:
        return ""
    accepted = "an http:// or https:// URL with a host and no query or fragment, or empty (not set)"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(option, value, accepted) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(option, value, accepted)
    if any(c.isspace() for c in text):
        raise ConfigError(option, value, accepted)
    return text.rstrip("/")


def file_path(option: str, value: object) -> str:
    """An absolute path (the file is read when used, where it is mounted); empty means "not set"."""
    text = str(value).strip()
    if not text:
        return ""
    if not text.startswith("/") or "\0" in text:
        raise ConfigError(option, value, "an absolute path to a file, or empty (not set)")
    return text


# One PromQL label matcher: a label name, an operator, a double-quoted value with Go's escapes.
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"\s*(?:,|$)')


def label_matchers(option: str, value: object) -> str:
    """PromQL label matchers, comma-separated (``cluster="east",job=~"airflow-.*"``), returned as
    given without surrounding blanks or a trailing comma; empty means "not set". Braces, metric names
    (``__name__``: the tab picks the series itself) and anything else PromQL would read as more than
    matchers are refused: the value is pasted into a selector."""
    text = str(value).strip().rstrip(",").rstrip()
    if not text:
        return ""
    at = 0
    while at < len(text):
        matched = _MATCHER.match(text, at)
        if matched is None or matched.group(1) == "__name__":
            raise ConfigError(
                option,
                value,
                'PromQL label matchers, comma-separated (cluster="east" or cluster="east",job=~"airflow.*"), '
                "or empty (not set)",
            )
        at = matched.end()
    return text
