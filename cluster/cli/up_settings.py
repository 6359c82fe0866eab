"""What ``cluster up`` was asked, remembered in its data dir so a later ``up`` there starts the
same cluster, not one rebuilt from defaults: a flag not given takes the value the data dir was made with; a flag given
with another value replaces it (access control on, off or another ACL file, slaves added, ports, flush and
replication modes), said on stderr and remembered, unless what is on disk ties it down (segment sizes, role, names:
``FIXED``), which is refused in one line naming why and the way out, before anything starts.

The store's sizes come in two profiles: ``dev`` (the default, sized for a laptop: 64 MiB CommitLog
segments and a 42 MB IndexFile) and ``rocketmq`` (RocketMQ's own: 1 GiB segments, a 401 MB
IndexFile), for servers.
"""

from __future__ import annotations

import glob
import json
import os

from rocketbox.cluster.account_keys import AUTH_FILE_NAME
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
    "no_metrics": False, "proxy_port": PROXY_PORT_DEFAULT, "no_proxy": False, "grpc_front": "native",
    "console_port": CONSOLE_PORT_DEFAULT, "console_host": CONSOLE_HOST_DEFAULT, "no_console": False,
    "console_trust_loopback": False, "acl_file": None, "insecure": False, "controller_secret": None,
    "tls_mode": None, "tls_cert": None, "tls_key": None,
}


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


# What a later ``up`` in the same data dir cannot change, and why: what is on disk was made for it.
FIXED = {
    "store_sizes": "its CommitLog segments on disk have that profile's size",
    "commitlog_file_size_bytes": "its CommitLog segments on disk have that size",
    "role": "its stores are those of that role",
    "broker_name": "its broker groups' stores are under those names",
    "slave_id": "its store is that replica's",
}


# The flag that turns each remembered switch back off (cluster_cmds.add_shape_arguments adds them).
SWITCH_OFF = {"failover": "--no-failover", "no_auto_create_topic": "--auto-create-topic", "no_remoting": "--remoting",
              "no_metrics": "--metrics", "no_proxy": "--proxy", "no_console": "--console",
              "console_trust_loopback": "--no-console-trust-loopback", "insecure": "--no-insecure"}


def _shown(name: str, value, given: bool = True) -> str:
    """A given (or remembered) value as the user would type it ("without --acl-file" for none)."""
    if value is False and given and name in SWITCH_OFF:
        return SWITCH_OFF[name]
    if value is None or value is False:
        return f"without {_flag(name)}"
    if value is True:
        return _flag(name)
    return f"{_flag(name)} {value}"


def _refusal(name: str, saved: dict, given) -> str | None:
    """Why ``given`` may not replace what the data dir remembers for ``name`` (None: it may)."""
    was = saved[name]
    why = FIXED.get(name)
    if name == "failover" and was and not given:
        why = "its controller may have made a slave the master (the static roles would put the old master back)"
    elif name == "slaves" and saved.get("failover") and (given or 0) < (was or 0):
        why = "the controller counts the replicas left out as members of each group's sync state set"
    elif name == "brokers" and (given or 0) < (was or 0):
        why = "the broker groups left out hold messages and offsets the cluster would no longer serve"
    if why is None:
        return None
    return f"the data dir was made {_shown(name, was, given=False)}, and {why}"


def resolve(args) -> str | None:
    """Fill ``args``' remembered flags from the data dir (or the defaults); the refusal, if any.

    A flag given with another value than remembered replaces it (and is remembered by ``save``),
    each such change in ``args.changed_settings`` for ``up`` to say; only what the data dir's
    contents tie down (``FIXED``: segment sizes, role, names; a failover cluster's replicas; fewer
    broker groups) is refused, naming why and the two ways out. ``--no-acl`` turns access control
    off (``acl_file`` None given explicitly)."""
    try:
        saved = remembered(args.data_dir)
    except (OSError, ValueError) as exc:
        return f"cannot read {os.path.join(args.data_dir, SETTINGS_FILE)}: {exc}"
    no_acl = getattr(args, "no_acl", False)
    if no_acl and "acl_file" in getattr(args, "given_now", ()):
        return "--no-acl and --acl-file contradict each other: give one"
    changed = []
    for name, default in DEFAULTS.items():
        value = None if name == "acl_file" and no_acl else getattr(args, name)
        explicit = value is not None or (name == "acl_file" and no_acl)
        if explicit and name in saved and saved[name] != value:
            now, was = _shown(name, value), _shown(name, saved[name], given=False)
            refusal = _refusal(name, saved, value)
            if refusal:
                return (f"{args.data_dir}: {now} cannot replace what it was made with: {refusal}. "
                        f"Leave {now.split()[0]} out to keep {was}, or give another --data-dir for a new cluster")
            changed.append(f"{args.data_dir} was made {was}; now {now} (remembered for the next up)")
        setattr(args, name, value if explicit else saved.get(name, default))
    args.changed_settings = changed
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
