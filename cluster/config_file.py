"""broker.conf and namesrv.conf: every setting under a key, as RocketMQ's config files have them.

A key is RocketMQ's own where RocketMQ has the setting (``rocketmq_keys.BROKER_KEYS``, with unit
factors), else our field's name in RocketMQ's camelCase (``flushLogicsIntervalMs`` for
``store.flush_logics_interval_ms``), so every setting can be written in a file and read back.
Pure: tables and conversions, no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from rocketbox.cluster.config import BrokerConfig, NamesrvConfig, StoreConfig
from rocketbox.cluster.rocketmq_keys import BROKER_KEYS, broker_properties, java_value

# NameServer settings RocketMQ names (namesrv.conf).
NAMESRV_KEYS: tuple[tuple[str, str, int], ...] = (
    ("listenPort", "remoting_port", 1),
    ("scanNotActiveBrokerInterval", "scan_interval_ms", 1),
    ("tls.server.mode", "tls_server_mode", 1),
    ("tls.server.certPath", "tls_server_cert_path", 1),
    ("tls.server.keyPath", "tls_server_key_path", 1),
)


class Key(NamedTuple):
    path: str     # field path in the config object: "store.flush_interval_ms"
    factor: int   # ours -> the file's unit: value * factor (> 0) or value // -factor (< 0)
    kind: type    # bool, int, float, str or tuple (of str)


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _fields(cls, prefix: str = "") -> dict[str, type]:
    """path -> the type of the field's value (from its default; ``store_dir`` has none: str)."""
    out = {}
    for field in dataclasses.fields(cls):
        if field.name == "store":
            continue
        default = field.default if field.default is not dataclasses.MISSING else ""
        out[prefix + field.name] = type(default)
    return out


def _table(explicit, fields: dict[str, type]) -> dict[str, Key]:
    table = {key: Key(path, factor, fields[path]) for key, path, factor in explicit if path in fields}
    named = {key.path for key in table.values()}
    for path, kind in fields.items():
        if path not in named:
            table[camel(path.rsplit(".", 1)[-1])] = Key(path, 1, kind)
    return table


BROKER_TABLE: dict[str, Key] = _table(BROKER_KEYS, {**_fields(BrokerConfig), **_fields(StoreConfig, "store.")})
NAMESRV_TABLE: dict[str, Key] = _table(NAMESRV_KEYS, _fields(NamesrvConfig))


def to_file_value(key: Key, value) -> str:
    if isinstance(value, tuple):
        return ";".join(value)
    if key.kind is int and key.factor != 1:
        value = value * key.factor if key.factor > 0 else value // -key.factor
    return java_value(value)


def from_file_value(name: str, key: Key, text: str):
    """The field's value from a file's text; ValueError naming the key when it does not parse."""
    text = text.strip()
    try:
        if key.kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError("not true or false")
            return text.lower() == "true"
        if key.kind is int:
            value = int(text)
            return value // key.factor if key.factor > 0 else value * -key.factor
        if key.kind is float:
            return float(text)
        if key.kind is tuple:
            return tuple(part.strip() for part in text.replace(",", ";").split(";") if part.strip())
        return text
    except ValueError as exc:
        raise ValueError(f"{name}={text!r}: {exc}") from None


class FileSettings(NamedTuple):
    values: dict[str, object]   # field path -> value
    unknown: list[str]          # keys no setting has


def read_settings(props: dict[str, str], table: dict[str, Key]) -> FileSettings:
    """A parsed file's settings by field path (``rocketmq_keys.parse_properties`` gives ``props``)."""
    values, unknown = {}, []
    for name, text in props.items():
        key = table.get(name)
        if key is None:
            unknown.append(name)
            continue
        values[key.path] = from_file_value(name, key, text)
    return FileSettings(values, sorted(unknown))


def _value_at(cfg, path: str):
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def settings_text(cfg, table: dict[str, Key]) -> dict[str, str]:
    """Every setting of ``cfg`` (a BrokerConfig or NamesrvConfig) under its key."""
    return {name: to_file_value(key, _value_at(cfg, key.path)) for name, key in table.items()}


def broker_settings(cfg: BrokerConfig) -> dict[str, str]:
    """Every setting of a broker under its key, with the derived ones RocketMQ shows (its ports,
    namesrvAddr): what getBrokerConfig answers and ``cluster config show`` prints."""
    return {**settings_text(cfg, BROKER_TABLE), **broker_properties(cfg)}
