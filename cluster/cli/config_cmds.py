"""``cluster config show``: the settings every process of a cluster runs with, under broker.conf's
and namesrv.conf's keys: what ``up`` with the same flags and files (or what the data dir was made
with) starts."""

from __future__ import annotations

from rocketbox.cluster.cli.cluster_cmds import add_shape_arguments, topology_for_role
from rocketbox.cluster.cli.common import print_json
from rocketbox.cluster.config_file import NAMESRV_TABLE, settings_text
from rocketbox.cluster.rocketmq_defaults import broker_config_answer
from rocketbox.cluster.rocketmq_keys import properties_text


def effective_settings(args) -> dict[str, dict[str, str]]:
    """process name -> key -> value, NameServers first."""
    topology = topology_for_role(args)
    out = {}
    for i, namesrv in enumerate(topology.namesrvs):
        out[f"namesrv-{i}"] = settings_text(namesrv, NAMESRV_TABLE)
    for broker in topology.brokers + topology.slaves:
        name = broker.broker_name if broker.broker_id == 0 else f"{broker.broker_name}-s{broker.broker_id}"
        out[name] = broker_config_answer(broker)
    return out


def cmd_config_show(args) -> int:
    settings = effective_settings(args)
    if args.json:
        print_json(settings)
        return 0
    for name, values in settings.items():
        print(f"# {name}")
        print(properties_text(values))
    return 0


def add_parsers(sub) -> None:
    config = sub.add_parser("config", help="the effective settings of every process (config show)")
    config.add_argument("action", choices=("show",), help="show: every setting under its broker.conf key")
    add_shape_arguments(config)
    config.add_argument("--json", action="store_true", help="one JSON object: process -> key -> value")
    config.set_defaults(func=cmd_config_show)
