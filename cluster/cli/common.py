"""What every ``cluster`` command shares: where the data dir and the NameServers are, and how
results are printed (rich tables, JSON, times).

``--json`` follows one convention per kind of output: commands that print records (send, consume,
query, dlq list/show/resend, group reset-offset, topic list) print JSON Lines, one object per line
as each record is ready; commands that print one document (topic route, status, controller) print
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime

from rocketbox.cluster.clock import parse_time_ms
from rocketbox.cluster.config import NAMESRV_PORT_DEFAULT, name_problem
from rocketbox.cluster.supervision.run_state import read_state_file


DATA_DIR_DEFAULT = os.environ.get("ROCKETBOX_DATA_DIR", os.path.join(os.path.expanduser("~"), ".rocketbox"))


# Tables written to a pipe or file are never cut to a terminal's width (rich assumes 80 columns).
PIPE_WIDTH = 1000


def new_console():
    from rich.console import Console
    return Console() if sys.stdout.isatty() else Console(width=PIPE_WIDTH, no_color=True)


def print_json(value) -> None:
    """One JSON document (the output of a command that shows one thing)."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def print_json_line(value) -> None:
    """One record of a JSON Lines stream, flushed so a reader sees it at once."""
    print(json.dumps(value, sort_keys=True, default=str), flush=True)


def table(title: str, columns: list[str], rows: list[list]):
    from rich.table import Table
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    return table


def namesrv_env(state: dict) -> str:
    out = []
    for child in state.get("children", []):
        endpoint = (child.get("ready_info") or {}).get("endpoint", "")
        if child.get("role") == "namesrv" and endpoint.startswith("tcp://"):
            out.append(endpoint[len("tcp://"):])
    return ";".join(out)


def namesrv(args) -> str | None:
    if getattr(args, "namesrv", None):
        return args.namesrv
    if os.environ.get("ROCKETBOX_NAMESRV"):
        return os.environ["ROCKETBOX_NAMESRV"]
    state = read_state_file(args.data_dir)
    if state:
        env = namesrv_env(state)
        if env:
            return env
    return f"127.0.0.1:{NAMESRV_PORT_DEFAULT}"


def client_config(args):
    """The ClientConfig of a command's clients: its NameServers (``namesrv``), over RocketMQ's
    remoting protocol when the address given is a remoting door (mqadmin's ``-n host:9876``), so
    that habit works as it does with mqadmin (door_probe.py)."""
    from rocketbox.cluster.cli.door_probe import namesrv_transport
    from rocketbox.cluster.config import ClientConfig, namesrv_endpoints
    addresses = namesrv(args)
    given = getattr(args, "namesrv", None) or os.environ.get("ROCKETBOX_NAMESRV")
    # A data dir's run state names its native door: only an address the user gave is probed.
    transport = namesrv_transport(addresses) if given else "native"
    if transport == "native" and getattr(args, "account_problem", None):
        raise ValueError(args.account_problem)
    return ClientConfig(namesrv_endpoints=namesrv_endpoints(addresses), transport=transport,
                        **(remoting_credentials(args) if transport == "remoting" else {}))


def remoting_credentials(args) -> dict:
    """On the remoting door ``--account NAME`` signs with NAME's accessKey and secretKey, read from
    the cluster's ACL file (the data dir's, else $ROCKETBOX_ACL_FILE) as RocketMQ's tools sign."""
    account = getattr(args, "act_as", None)
    if not account:
        return {}
    from rocketbox.cluster.account_keys import ACL_FILE_ENV
    from rocketbox.cluster.acl.acl_file import read_acl_file
    from rocketbox.cluster.cli.up_settings import remembered
    acl_file = remembered(args.data_dir).get("acl_file") or os.environ.get(ACL_FILE_ENV)
    entry = read_acl_file(acl_file).accounts.get(account) if acl_file else None
    if entry is None:
        raise ValueError(f"--account {account} on the remoting door needs its secretKey: no account {account!r} "
                         f"in {acl_file or 'any ACL file (give ' + ACL_FILE_ENV + ')'}")
    return {"access_key": entry.access_key, "secret_key": entry.secret_key}


def open_admin(args):
    from rocketbox.cluster.client.admin import Admin
    return Admin(config=client_config(args))


def int_within(low: int, high: int):
    """argparse type: an integer in [low, high], else a usage error naming the range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value
    return parse


def valid_name(kind: str):
    """argparse type: a topic or group name the cluster would take (RocketMQ's [%|a-zA-Z0-9_-],
    at most 127 characters), else a usage error naming what is wrong, before anything connects."""
    def parse(text: str) -> str:
        problem = name_problem(kind, text)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text
    parse.__name__ = f"{kind} name"   # what argparse calls it in its own messages
    return parse


topic_name = valid_name("topic")
consumer_group_name = valid_name("consumer group")
producer_group_name = valid_name("producer group")


def unknown_group_problem(admin, group: str) -> str | None:
    """Why ``group`` is no consumer group of this cluster (no master has a subscription group of
    that name, which a member's heartbeat or a first commit makes), or None when one has it."""
    if group in admin.consumer_groups():
        return None
    return (f"consumer group {group} is not known to any broker master (no subscription group of that name; "
            f"a group has one once a member of it has started or committed an offset)")


def time_ms(text: str) -> int:
    """argparse type: epoch milliseconds, or an ISO 8601 time (local unless it names a zone)."""
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().isoformat(timespec="milliseconds")
