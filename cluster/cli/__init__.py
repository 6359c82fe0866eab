"""The ``cluster`` command: bring a cluster up and down, and talk to it.

    cluster up [--data-dir D] [--namesrvs N] [--brokers N] [--slaves N] [--flush-mode async|sync]
               [--store-sizes dev|rocketmq] [--no-auto-create-topic]
               [--broker-role async|sync] [--failover] [--detach]
               [--role all|namesrv|broker] [--broker-name NAME[,NAME]] [--host ADDR]
               [--slave-id N --master-address HOST:PORT [--master-ha-address HOST:PORT]]
    cluster status | down
    cluster up -c broker.conf [--namesrv-config namesrv.conf]      (RocketMQ's keys; flags win)
    cluster logs NAME [-n N] [-f]                  (a process's log, followed across rotations)
    cluster pause NAME | resume NAME               (SIGSTOP / SIGCONT one process: watch a failover)
    cluster acl keygen ACCOUNT | check [--acl-file F]  (an account's CURVE keys; the ACL file read back)
    cluster tls [--host H] [--out DIR]             (a self-signed certificate and key: <data dir>/tls/)
    cluster up --tls-mode permissive|enforcing [--tls-cert F --tls-key F]  (TLS on the remoting doors, proxy)
    cluster config show [the flags of up]          (every process's settings under broker.conf's keys)
    cluster topic create|update|list|route|delete [--queues N]
                                               [--message-type NORMAL|FIFO|DELAY|TRANSACTION|MIXED|PRIORITY]
    cluster send | consume
    cluster query --id MSG_ID_OR_OFFSET_MSG_ID | --msg-id ID --topic T | --key K --topic T [--begin --end --max]
                | --topic T [--broker B] --queue Q --offset N        (each with every group's consume status)
    cluster dlq list GROUP | show GROUP MSG_ID | resend GROUP (--msg-id ID | --all)
    cluster group reset-offset GROUP TOPIC --to-time ISO|EPOCH_MS [--no-force]
    cluster clusterList | brokerStatus | topicStatus | consumerProgress | consumerConnection
          | consumerStatus | updateSubGroup | deleteSubGroup | getBrokerConfig | updateBrokerConfig
          | deleteExpiredCommitLog | statsAll | haStatus   (mqadmin's verbs, short flags and #Column
            tables: mqadmin_cmds.py)
    cluster updateKvConfig | deleteKvConfig | updateOrderConf | getNamesrvConfig | updateNamesrvConfig
          | wipeWritePerm | addWritePerm | producerConnection | producer | brokerConsumeStats
          | cleanExpiredCQ | cleanUnusedTopic | cloneGroupOffset | queryCq | consumeMessageDirectly
            (mqadmin's NameServer verbs and rarer broker verbs: mqadmin_more.py)

Commands that talk to a cluster find its NameServers in ``--namesrv``, else in
``ROCKETBOX_NAMESRV``, else in the run-state file of ``--data-dir`` (an address without a port
means the default NameServer port). Read commands take ``--json`` (records as JSON Lines, one
document as one JSON object: ``common.py``). Everything binds to 127.0.0.1 by default.

Exit codes: 0 done; 1 the request failed or found nothing (an unknown group or topic, no such
message: the reason on stderr); 2 a usage error (a topic or group name the cluster could never
take included: ``common.valid_name``); 130 interrupted; 141 the reader of stdout went away (``| head``), as a process killed by
SIGPIPE would report.

Several hosts: ``cluster up --role namesrv --host A`` on one, and on each other host
``cluster --namesrv A:9871 up --role broker --host B --broker-name broker-b`` (``--host`` is
where the processes bind and the address routes advertise, so it must be reachable from
the other hosts); ``--slave-id N --master-address B:PORT`` starts a slave of a master elsewhere.
Such a ``--host`` needs access control (``--acl-file plain_acl.yml``) or ``--insecure``. With access
control the commands run against a data dir connect with the cluster's own CURVE key (beside the
ACL file the data dir was started with).
"""

from __future__ import annotations

import argparse
import os
import sys

from rocketbox.cluster.acl.curve import CurveKeyError, use_cluster_keys
from rocketbox.cluster.cli import (acl_cmds, admin_cmds, client_cmds, cluster_cmds, config_cmds, logs_cmds,
                                   mqadmin_cmds, mqadmin_more, pause_cmds, tls_cmds, up_config, up_settings)
from rocketbox.cluster.cli.client_cmds import query_problem
from rocketbox.cluster.cli.cluster_cmds import role_problem
from rocketbox.cluster.cli.common import DATA_DIR_DEFAULT
from rocketbox.cluster.cli.parsing import CommandParser
from rocketbox.cluster.file_modes import make_private


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="cluster", description="RocketBox: a RocketMQ-style cluster in a box")
    parser.add_argument("--data-dir", default=DATA_DIR_DEFAULT, help=f"default {DATA_DIR_DEFAULT}")
    parser.add_argument("--namesrv", help="NameServer addresses, host:port;host:port")
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (cluster_cmds, config_cmds, logs_cmds, pause_cmds, client_cmds, admin_cmds, mqadmin_cmds,
                     mqadmin_more, acl_cmds, tls_cmds):
        commands.add_parsers(sub)
    for verb in set(sub.choices.values()):
        _accept_global_options(verb)
    return parser


def _accept_global_options(parser: argparse.ArgumentParser) -> None:
    """--data-dir and --namesrv after the subcommand too (``cluster up --data-dir D``), and after
    a nested one (``cluster topic create T --data-dir D``). SUPPRESS: absent there, the value given
    before the subcommand (or the default) stays."""
    for flags, help_text in ((("--data-dir",), "as the global --data-dir, given after the subcommand"),
                             (("--namesrv",), "as the global --namesrv, given after the subcommand")):
        if not any(flag in parser._option_string_actions for flag in flags):
            parser.add_argument(*flags, dest=flags[0][2:].replace("-", "_"), default=argparse.SUPPRESS,
                                help=help_text)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in set(action.choices.values()):
                _accept_global_options(nested)


def _use_cluster_keys(data_dir: str) -> None:
    """A data dir started with access control: talk to its cluster with the cluster's own key."""
    try:
        acl_file = up_settings.remembered(data_dir).get("acl_file")
    except (OSError, ValueError):
        return
    if acl_file:
        try:
            use_cluster_keys(acl_file)
        except CurveKeyError as exc:
            print(f"warning: {exc}", file=sys.stderr)


EXIT_BROKEN_PIPE = 128 + 13   # what a shell reports for a process SIGPIPE ended


def main(argv=None) -> int:
    make_private()   # the data dir it makes, and what an in-process supervisor starts (file_modes.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = None
    if args.command == "topic" and args.action != "list" and not args.topic:
        problem = "a topic name is needed"
    elif args.command == "query":
        problem = query_problem(args)
    elif args.command in ("up", "config"):
        problem = up_config.load(args) or up_settings.resolve(args) or role_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _use_cluster_keys(args.data_dir)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Python would print a traceback when it flushes stdout at exit: point stdout at nothing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # the CLI reports; it does not dump a trace for a refused request
        from rocketbox.cluster.errors import ClientError
        if isinstance(exc, (ClientError, ValueError)):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
