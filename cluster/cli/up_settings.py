"""What ``cluster up`` was asked, remembered in its data dir so a later ``up`` there starts the
same cluster, not one rebuilt from defaults: a flag not given takes the value the data dir was made with; a flag given
with another value is refused in one line naming it, before anything starts.

The store's sizes come in two profiles: ``dev`` (the default, sized for a laptop: 64 MiB CommitLog
segments and a 42 MB IndexFile) and ``rocketmq`` (RocketMQ's own: 1 GiB segments, a 401 MB
IndexFile), for servers.
"""

from __future__ import annotations

import glob
import json
import os

from rocketbox.cluster.acl.auth_store import AUTH_FILE_NAME
from rocketbox.cluster.config import (BROKER_PORT_DEFAULT, BROKER_REMOTING_PORT_DEFAULT, METRICS_PORT_DEFAULT,
                                      NAMESRV_PORT_DEFAULT, NAMESRV_REMOTING_PORT_DEFAULT)
from rocketbox.cluster.file_modes import private_dir
from rocketbox.cluster.proxy.settings import PROXY_PORT_DEFAULT
from rocketbox.cluster.console.settings import CONSOLE_HOST_DEFAULT, CONSOLE_PORT_DEFAULT

SETTINGS_FILE = "up-settings.json"
MIB = 1024 * 1024

STORE_PROFILES = {
    "dev": {"commitlog_file_size_bytes": 64 * MIB, "index_slot_count": 500_000, "index_entry_count_max": 2_000_000},
    "rocketmq": {"commitlog_file_size_bytes": 1024 * MIB, "index_slot_count": 5_000_000,
                 "index_entry_count_max": 20_000_000},
}

# Every remembered flag and its default (argparse gives None for a flag not on the command line).
DEFAULTS = {
    "namesrvs": 1, "brokers": 1, "slaves": 0, "failover": False, "broker_role": "async", "flush_mode": "async",
    "no_auto_create_topic": False, "host": "127.0.0.1", "role": "all", "broker_name": None, "slave_id": 0,
    "master_address": None, "master_ha_address": "", "namesrv_port": NAMESRV_PORT_DEFAULT,
    "broker_port": BROKER_PORT_DEFAULT, "store_sizes": "dev", "commitlog_file_size_bytes": 0,
    "namesrv_remoting_port": NAMESRV_REMOTING_PORT_DEFAULT, "broker_remoting_port": BROKER_REMOTING_PORT_DEFAULT,
    "no_remoting": False, "config": None, "namesrv_config": None, "metrics_port": METRICS_PORT_DEFAULT,
    "no_metrics": False, "proxy_port": PROXY_PORT_DEFAULT, "no_proxy": False,
    "console_port": CONSOLE_PORT_DEFAULT, "console_host": CONSOLE_HOST_DEFAULT, "no_console": False,
    "console_trust_loopback": False, "acl_file": None, "insecure": False, "controller_secret": None,
    "tls_mode": None, "tls_cert": None, "tls_key": None,
}


CONFIG_FILE_FLAGS = ("config", "namesrv_config")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _existing_segment_bytes(data_dir: str) -> int | None:
    """The CommitLog segment size of a data dir made before settings were remembered."""
    for path in sorted(glob.glob(os.path.join(data_dir, "*", "store", "commitlog", "[0-9]" * 20))):
        return os.path.getsize(path)
    return None


def remembered(data_dir: str) -> dict:
    """What the data dir was made with ({} for a new one); OSError or ValueError when unreadable."""
    path = os.path.join(data_dir, SETTINGS_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        segment = _existing_segment_bytes(data_dir)
        return {} if segment is None else {"commitlog_file_size_bytes": segment}


def access_file(data_dir: str) -> str | None:
    """The file the cluster of ``data_dir`` checks callers against: ACL 2.0's auth/auth.json when
    there is one, else the plain_acl.yml it was started with; None without access control.
    OSError or ValueError when the remembered settings are unreadable."""
    auth_file = os.path.join(data_dir, "auth", AUTH_FILE_NAME)
    return auth_file if os.path.exists(auth_file) else remembered(data_dir).get("acl_file")


def resolve(args) -> str | None:
    """Fill ``args``' remembered flags from the data dir (or the defaults); the conflict, if any."""
    try:
        saved = remembered(args.data_dir)
    except (OSError, ValueError) as exc:
        return f"cannot read {os.path.join(args.data_dir, SETTINGS_FILE)}: {exc}"
    for name, default in DEFAULTS.items():
        given = getattr(args, name)
        # A config file may be added to a data dir made without one: its keys meet the same checks.
        added_file = name in CONFIG_FILE_FLAGS and saved.get(name) is None
        if given is not None and name in saved and saved[name] != given and not added_file:
            return (f"{args.data_dir} was made with {_flag(name)} {saved[name]}, not {given}: "
                    f"leave the flag out to reuse it, or use another --data-dir")
        setattr(args, name, given if given is not None else saved.get(name, default))
    return None


def save(args) -> None:
    private_dir(args.data_dir)
    with open(os.path.join(args.data_dir, SETTINGS_FILE), "w") as f:
        json.dump({name: getattr(args, name) for name in DEFAULTS}, f, indent=2, sort_keys=True)


def store_overrides(args) -> dict:
    """The store settings of the chosen profile, with an explicit segment size on top."""
    store = dict(STORE_PROFILES[args.store_sizes])
    if args.commitlog_file_size_bytes:
        store["commitlog_file_size_bytes"] = args.commitlog_file_size_bytes
    return store
