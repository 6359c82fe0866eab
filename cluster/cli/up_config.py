"""``cluster up -c broker.conf [--namesrv-config namesrv.conf]``: settings from files in RocketMQ's
form (``config_file.py`` has the keys), under the command line's flags.

A key that a flag of ``up`` also sets (brokerName, flushDiskType, listenPort, ...) fills that flag
when the command line left it out, so a flag given wins; the other keys become every broker's (or
NameServer's) settings. Keys the topology decides per process (ports, ids, store directories) are
refused with the flag to use instead; unknown keys are warned about and ignored.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, NamedTuple

from rocketbox.cluster.config import ASYNC_MASTER, METRICS_PROM, SLAVE, SYNC_MASTER
from rocketbox.cluster.cli import up_settings
from rocketbox.cluster.config_file import BROKER_TABLE, NAMESRV_TABLE, from_file_value, read_settings
from rocketbox.cluster.rocketmq_keys import parse_properties


class FileFlag(NamedTuple):
    flag: str                        # the attribute of ``up``'s arguments
    convert: Callable[[str], object]  # the file's text -> the flag's value


def _role(text: str) -> str:
    roles = {ASYNC_MASTER: "async", SYNC_MASTER: "sync"}
    if text not in roles:
        detail = " (a slave starts with --slave-id N --master-address host:port)" if text == SLAVE else ""
        raise ValueError(f"brokerRole={text!r}: one of {', '.join(roles)}{detail}")
    return roles[text]


def _flush(text: str) -> str:
    modes = {"ASYNC_FLUSH": "async", "SYNC_FLUSH": "sync"}
    if text not in modes:
        raise ValueError(f"flushDiskType={text!r}: one of {', '.join(modes)}")
    return modes[text]


def _metrics_off(text: str) -> bool:
    types = {"DISABLE": True, METRICS_PROM: False}
    if text.strip() not in types:
        raise ValueError(f"metricsExporterType={text!r}: one of {', '.join(types)} (the Prometheus endpoint or none)")
    return types[text.strip()]


def _key(table, name: str):
    return lambda text: from_file_value(name, table[name], text)


BROKER_FLAGS: dict[str, FileFlag] = {
    "brokerName": FileFlag("broker_name", str.strip),
    "brokerIP1": FileFlag("host", str.strip),
    "brokerRole": FileFlag("broker_role", _role),
    "flushDiskType": FileFlag("flush_mode", _flush),
    "autoCreateTopicEnable": FileFlag("no_auto_create_topic",
                                      lambda text: not from_file_value("autoCreateTopicEnable",
                                                                       BROKER_TABLE["autoCreateTopicEnable"], text)),
    "mappedFileSizeCommitLog": FileFlag("commitlog_file_size_bytes", _key(BROKER_TABLE, "mappedFileSizeCommitLog")),
    "listenPort": FileFlag("broker_remoting_port", int),
    "namesrvAddr": FileFlag("namesrv", str.strip),
    "metricsExporterType": FileFlag("no_metrics", _metrics_off),
    "metricsPromExporterPort": FileFlag("metrics_port", int),
}
NAMESRV_FLAGS: dict[str, FileFlag] = {
    "listenPort": FileFlag("namesrv_remoting_port", int),
}
# Settings each process gets from the topology (its place in the cluster): key -> how to set it.
BROKER_TOPOLOGY = {
    "host": "--host", "port": "--broker-port", "remoting_port": "--broker-remoting-port",
    "namesrv_endpoints": "--namesrv", "broker_id": "--slave-id", "broker_name": "--broker-name",
    "broker_role": "--broker-role", "ha_port": "--broker-port (HA is its port + 1)",
    "ha_master_address": "--master-ha-address", "master_address": "--master-address",
    "controller_mode": "--failover", "store.store_dir": "--data-dir (<data dir>/<broker>/store)",
    "store.flush_mode": "--flush-mode",
}
NAMESRV_TOPOLOGY = {
    "host": "--host", "port": "--namesrv-port", "remoting_port": "--namesrv-remoting-port",
    "data_dir": "--data-dir", "controller_address": "--failover", "controller_peers": "--failover",
    "controller_secret_file": "--controller-secret",
}


class UpSettings(NamedTuple):
    broker: dict        # BrokerConfig field -> value, for every broker
    store: dict         # StoreConfig field -> value
    namesrv: dict       # NamesrvConfig field -> value
    warnings: list[str]
    # The broker file's keys whose value the brokers get from it: its settings, and the flags it filled.
    broker_keys: frozenset = frozenset()


def _apply(text: str, source: str, table, flags: dict[str, FileFlag], topology: dict, args,
           used: set | None = None) -> tuple[dict, list]:
    """(field path -> value of the keys that are no flag's, warnings); fills ``args``' unset flags
    (and adds to ``used`` the keys whose value is taken)."""
    props = parse_properties(text)
    warnings = []
    used = set() if used is None else used
    for name in [n for n in props if n in flags]:
        flag = flags[name]
        value = flag.convert(props.pop(name))
        if getattr(args, flag.flag, None) is None:
            setattr(args, flag.flag, value)
            used.add(name)
    settings = read_settings(props, table)
    warnings += [f"{source}: unknown key {name} (ignored)" for name in settings.unknown]
    owned = sorted(name for name in props if name in table and table[name].path in topology)
    if owned:
        raise ValueError(f"{source}: {', '.join(owned)} is set per process by the topology: use "
                         + "; ".join(f"{topology[table[name].path]} for {name}" for name in owned))
    used.update(name for name in props if name in table)
    return settings.values, warnings


def read_up_files(args, read_text: Callable[[str], str]) -> UpSettings:
    """The settings of ``args.config`` and ``args.namesrv_config`` (either may be None)."""
    broker, store, namesrv, warnings, broker_keys = {}, {}, {}, [], set()
    if getattr(args, "config", None):
        values, problems = _apply(read_text(args.config), args.config, BROKER_TABLE, BROKER_FLAGS,
                                  BROKER_TOPOLOGY, args, broker_keys)
        warnings += problems
        for path, value in values.items():
            if path.startswith("store."):
                store[path[len("store."):]] = value
            else:
                broker[path] = value
    if getattr(args, "namesrv_config", None):
        namesrv, problems = _apply(read_text(args.namesrv_config), args.namesrv_config, NAMESRV_TABLE,
                                   NAMESRV_FLAGS, NAMESRV_TOPOLOGY, args)
        warnings += problems
    return UpSettings(broker, store, namesrv, warnings, frozenset(broker_keys))


NO_FILES = UpSettings({}, {}, {}, [])


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def load(args) -> str | None:
    """Read the files ``up`` names (or the data dir was made with) into ``args.file_settings``,
    warnings to stderr; the problem that stops ``up``, if any."""
    try:
        saved = up_settings.remembered(args.data_dir)
    except (OSError, ValueError):
        saved = {}   # resolve() reports it
    # What this command line says, apart from what the data dir remembers: it beats live changes
    # (setting_sources.py has the order).
    args.given_now = frozenset(name for name in up_settings.DEFAULTS if getattr(args, name, None) is not None)
    args.remembered_flags = frozenset(name for name, value in saved.items() if name in up_settings.DEFAULTS
                                      and name not in args.given_now and value != up_settings.DEFAULTS[name])
    # What the data dir was made with comes before the file: a file's flag keys fill only what
    # neither the command line nor the data dir says (up_settings.resolve refuses a changed flag).
    for name in up_settings.DEFAULTS:
        if getattr(args, name, None) is None and name in saved:
            setattr(args, name, saved[name])
    for name in ("config", "namesrv_config", "acl_file", "tls_cert", "tls_key"):
        if getattr(args, name, None):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    try:
        args.file_settings = read_up_files(args, _read)
    except (OSError, ValueError) as exc:
        return f"config file: {exc}"
    for warning in args.file_settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return None
