"""Where each broker setting comes from, in one order (highest first):

1. a flag given to this ``cluster up`` (or ``config show``);
2. the broker.conf given to it now (``-c``);
3. a live change (mqadmin updateBrokerConfig, kept in the broker's store: ``live_settings.py``);
4. what the data dir remembers (an earlier ``up``'s flags and broker.conf);
5. the default.

Why this order: Apache RocketMQ's updateBrokerConfig rewrites the broker's config file
(Configuration.persist writes every setting to brokerConfigPath, the ``-c`` file), so a restart
with that file keeps the live value, and a later edit of the file wins over it. RocketBox does not
rewrite the user's file; it gives the same outcome: a restart that names no file (the remembered
one) keeps the live change, and naming the file (or a flag) again is the later edit, which wins.
``cluster up`` therefore drops, before the brokers start, the live values of the settings a flag
or the file given now sets (``drop_superseded_live``), and says so; ``config show`` prints what
the brokers will run with and the source of each value (``broker_sources``).
"""

from __future__ import annotations

from rocketbox.cluster.cli.up_config import BROKER_FLAGS, BROKER_TOPOLOGY, NO_FILES
from rocketbox.cluster.config_file import BROKER_TABLE, to_file_value
from rocketbox.cluster.live_settings import read_live, with_values, write_live
from rocketbox.cluster.rocketmq_defaults import broker_config_answer

LIVE = "live (updateBrokerConfig)"
DEFAULT = "default"
_PATH_KEY = {key.path: name for name, key in BROKER_TABLE.items()}


def _flag_of_path() -> dict[str, str]:
    """field path -> the ``up`` flag (argument name) that sets it."""
    out = {}
    for name, file_flag in BROKER_FLAGS.items():
        if name in BROKER_TABLE:
            out[BROKER_TABLE[name].path] = file_flag.flag
    for path, hint in BROKER_TOPOLOGY.items():
        out.setdefault(path, hint.split()[0].lstrip("-").replace("-", "_"))
    out.update({"store.commitlog_file_size_bytes": "commitlog_file_size_bytes", "acl_enable": "acl_file",
                "acl_file": "acl_file", "tls_server_mode": "tls_mode", "tls_server_cert_path": "tls_cert",
                "tls_server_key_path": "tls_key"})
    return out


_FLAG_OF_PATH = _flag_of_path()


def _given_now(args) -> frozenset:
    return getattr(args, "given_now", frozenset())


def _file_given_now(args) -> bool:
    return "config" in _given_now(args)


def superseding_paths(args) -> set[str]:
    """The field paths a flag or the file given now sets: they win over live changes."""
    given = _given_now(args)
    paths = {path for path, flag in _FLAG_OF_PATH.items() if flag in given}
    if _file_given_now(args):
        files = getattr(args, "file_settings", None) or NO_FILES
        paths |= {BROKER_TABLE[name].path for name in files.broker_keys}
    return paths


def live_values(cfg, args) -> dict:
    """The live changes this broker will run with: those no flag or file given now replaces."""
    superseded = superseding_paths(args)
    return {path: value for path, value in read_live(cfg.store.store_dir).items() if path not in superseded}


def running_config(cfg, args):
    """``cfg`` (what the topology gives the broker) as the broker will run it: with its live changes."""
    return with_values(cfg, live_values(cfg, args))


def drop_superseded_live(brokers, args) -> list[str]:
    """Remove from each broker's live changes those a flag or the file given now sets; one note
    for each value that changes so."""
    superseded = superseding_paths(args)
    notes = []
    for cfg in brokers:
        store_dir = cfg.store.store_dir
        live = read_live(store_dir)
        dropped = {path: value for path, value in live.items() if path in superseded}
        if not dropped:
            continue
        write_live(store_dir, {path: value for path, value in live.items() if path not in dropped})
        for path, value in sorted(dropped.items()):
            name = _PATH_KEY.get(path, path)
            key = BROKER_TABLE.get(name)
            old = to_file_value(key, value) if key else value
            new = broker_config_answer(cfg).get(name)
            if str(old) != str(new):
                notes.append(f"{_label(cfg)}: {name}={new} from {_now_source(path, args)} replaces the live "
                             f"change {name}={old} (updateBrokerConfig)")
    return notes


def _label(cfg) -> str:
    return cfg.broker_name if cfg.broker_id == 0 else f"{cfg.broker_name}-s{cfg.broker_id}"


def _now_source(path: str, args) -> str:
    flag = _FLAG_OF_PATH.get(path)
    if flag in _given_now(args):
        return "--" + flag.replace("_", "-")
    return args.config


def broker_sources(cfg, args) -> dict[str, tuple[str, str]]:
    """key -> (value the broker will run with, where it came from), for one broker of the topology."""
    live = live_values(cfg, args)
    values = broker_config_answer(with_values(cfg, live))
    given = _given_now(args)
    files = getattr(args, "file_settings", None) or NO_FILES
    remembered = getattr(args, "remembered_flags", frozenset())
    out = {}
    for name, value in values.items():
        key = BROKER_TABLE.get(name)
        path = key.path if key else None
        # A key the file may give in a flag's stead (listenPort: --broker-remoting-port), else the flag of its field.
        flag = BROKER_FLAGS[name].flag if name in BROKER_FLAGS else _FLAG_OF_PATH.get(path)
        if path in live:
            source = LIVE
        elif flag in given:
            source = "flag --" + flag.replace("_", "-")
        elif name in files.broker_keys:
            source = ("file " if _file_given_now(args) else "remembered file ") + args.config
        elif flag and flag in remembered:
            source = "remembered --" + flag.replace("_", "-")
        else:
            source = DEFAULT
        out[name] = (value, source)
    return out

