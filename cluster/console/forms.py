"""Form and query values, checked: each bad value raises FormError with a sentence the page shows
(the process answers 400 and goes on serving)."""

from __future__ import annotations

from datetime import datetime

from rocketbox.cluster.clock import parse_time_ms


class FormError(ValueError):
    """A value the user typed is not usable; the message says which and why."""


def text_field(form, name: str, *, required: bool = False, max_len: int = 255, strip: bool = True,
               default: str = "") -> str:
    value = form.get(name)
    if value is None or not isinstance(value, str):
        value = default
    if strip:
        value = value.strip()
    if required and not value:
        raise FormError(f"{name.replace('_', ' ')} is required")
    if len(value) > max_len:
        raise FormError(f"{name.replace('_', ' ')} is longer than {max_len} characters")
    return value


def int_field(form, name: str, low: int, high: int, *, default: int | None = None) -> int:
    text = text_field(form, name)
    if not text:
        if default is None:
            raise FormError(f"{name.replace('_', ' ')} is required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise FormError(f"{name.replace('_', ' ')} must be a whole number, not {text[:40]!r}") from None
    if not low <= value <= high:
        raise FormError(f"{name.replace('_', ' ')} must lie in [{low}, {high}], not {value}")
    return value


def choice(form, name: str, allowed: tuple[str, ...], *, default: str = "") -> str:
    value = text_field(form, name, default=default) or default
    if value not in allowed:
        raise FormError(f"{name.replace('_', ' ')} must be one of {', '.join(a or '(none)' for a in allowed)}, "
                        f"not {value[:40]!r}")
    return value


def time_field(form, name: str, *, required: bool = False) -> int | None:
    """Epoch milliseconds from epoch milliseconds, ``now``, or an ISO 8601 time (a browser's
    datetime-local value); a time without a zone is the console host's local time."""
    text = text_field(form, name, required=required)
    if not text:
        return None
    if text.lower() == "now":
        return int(datetime.now().timestamp() * 1000)
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise FormError(f"{name.replace('_', ' ')}: {exc}") from None


def iso_local(epoch_ms: int | None) -> str:
    if not epoch_ms:
        return ""
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().isoformat(timespec="milliseconds")
