"""``cluster config show``: the settings every process of a cluster will run with, under broker.conf's
and namesrv.conf's keys, and where each broker value comes from: what ``up`` with the same flags
and files (or what the data dir was made with) starts, with the brokers' live changes where they
still hold (``setting_sources.py`` has the order)."""

from __future__ import annotations

from rocketbox.cluster.cli.cluster_cmds import add_shape_arguments, topology_for_role
from rocketbox.cluster.cli.common import print_json
from rocketbox.cluster.cli.setting_sources import DEFAULT, broker_sources
from rocketbox.cluster.config_file import NAMESRV_TABLE, settings_text


def settings_with_sources(args) -> dict[str, dict[str, tuple[str, str]]]:
    """process name -> key -> (value, source), NameServers first."""
    topology = topology_for_role(args)
    out = {}
    for i, namesrv in enumerate(topology.namesrvs):
        out[f"namesrv-{i}"] = {key: (value, DEFAULT) for key, value in settings_text(namesrv, NAMESRV_TABLE).items()}
    for broker in topology.brokers + topology.slaves:
        name = broker.broker_name if broker.broker_id == 0 else f"{broker.broker_name}-s{broker.broker_id}"
        out[name] = broker_sources(broker, args)
    return out


def effective_settings(args) -> dict[str, dict[str, str]]:
    """process name -> key -> value, NameServers first."""
    return {name: {key: value for key, (value, _source) in settings.items()}
            for name, settings in settings_with_sources(args).items()}


def cmd_config_show(args) -> int:
    if args.json:
        print_json(effective_settings(args))
        return 0
    for name, settings in settings_with_sources(args).items():
        print(f"# {name}")
        width = min(max((len(key) + len(value) + 1 for key, (value, _source) in settings.items()), default=0), 48)
        for key, (value, source) in sorted(settings.items()):
            if name.startswith("namesrv-"):
                print(f"{key}={value}")
            else:
                print(f"{key}={value}".ljust(width + 2) + source)
        print()
    return 0


def add_parsers(sub) -> None:
    config = sub.add_parser("config", help="the settings every process will run with, and their sources (config show)")
    config.add_argument("action", choices=("show",),
                        help="show: every setting under its broker.conf key; for a broker, where its value comes "
                             "from (flag, file, live, remembered, default)")
    add_shape_arguments(config)
    config.add_argument("--json", action="store_true", help="one JSON object: process -> key -> value")
    config.set_defaults(func=cmd_config_show)
