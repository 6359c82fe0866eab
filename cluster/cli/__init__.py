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
    cluster createUser | updateUser | deleteUser | getUser | listUser | createAcl | updateAcl
          | deleteAcl | getAcl | listAcl   (mqadmin's ACL 2.0 verbs: auth_cmds.py)

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
control, ``cluster --account NAME ...`` (or ``ROCKETBOX_ACCOUNT=NAME``) acts as that account of the ACL
file (its CURVE pair from ``cluster acl keygen NAME``; NAME may be the path of its ``.key_secret``);
without it, the commands run against a data dir started with an ACL file connect with the cluster's
own CURVE key, a superuser past every rule (the key beside the ACL file: whoever can read it is admin).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rocketbox.cluster.account_keys import ACL_ACCOUNT_ENV, ACL_FILE_ENV
from rocketbox.cluster.cli.common import DATA_DIR_DEFAULT
from rocketbox.cluster.cli.parsing import CommandParser
from rocketbox.cluster.file_modes import make_private

# The verbs of each commands module, in the order the full parser (``cluster --help``) lists them.
# A command line that names one builds only its module's parsers and imports only what that module
# does (``cluster up`` starts sooner: perf/RESULTS.md "The cluster command's critical path");
# tests/unit/test_cli_options.py checks this table against what each module's add_parsers adds.
COMMAND_VERBS = {
    "cluster_cmds": ("up", "status", "down"),
    "config_cmds": ("config",),
    "logs_cmds": ("logs",),
    "pause_cmds": ("pause", "resume"),
    "client_cmds": ("topic", "send", "consume", "query"),
    "admin_cmds": ("dlq", "group", "controller"),
    "mqadmin_cmds": ("clusterList", "brokerStatus", "topicStatus", "consumerProgress", "consumerConnection",
                     "consumerStatus", "updateSubGroup", "deleteSubGroup", "getBrokerConfig", "updateBrokerConfig",
                     "deleteExpiredCommitLog", "statsAll", "haStatus"),
    "mqadmin_more": ("updateKvConfig", "deleteKvConfig", "updateOrderConf", "getNamesrvConfig",
                     "updateNamesrvConfig", "wipeWritePerm", "addWritePerm", "producerConnection", "producer",
                     "brokerConsumeStats", "cleanExpiredCQ", "cleanUnusedTopic", "cloneGroupOffset", "queryCq",
                     "consumeMessageDirectly"),
    "acl_cmds": ("acl",),
    "auth_cmds": ("createUser", "updateUser", "deleteUser", "getUser", "listUser", "createAcl", "updateAcl",
                  "deleteAcl", "getAcl", "listAcl"),
    "tls_cmds": ("tls",),
}
_MODULE_OF_VERB = {verb: module for module, verbs in COMMAND_VERBS.items() for verb in verbs}
# The options the top-level parser takes before a verb, each with a value.
_GLOBAL_OPTIONS = ("--data-dir", "--namesrv", "--account")


def given_verb(argv) -> str | None:
    """The verb of a command line, or None when it cannot be told without the full parser (no verb,
    an unknown one, --help, an option argparse would take as an abbreviation): then every verb's
    parser is built, as argparse needs for its help and its errors."""
    words = list(argv)
    index = 0
    while index < len(words):
        word = words[index]
        if word in _GLOBAL_OPTIONS:
            index += 2
        elif word.split("=", 1)[0] in _GLOBAL_OPTIONS and "=" in word:
            index += 1
        elif word.startswith("-"):
            return None
        else:
            return word if word in _MODULE_OF_VERB else None
    return None


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or only of ``verb``'s module (``given_verb``)."""
    parser = CommandParser(prog="cluster", description="RocketBox: a RocketMQ-style cluster in a box")
    parser.add_argument("--data-dir", default=DATA_DIR_DEFAULT, help=f"default {DATA_DIR_DEFAULT}")
    parser.add_argument("--namesrv", help="NameServer addresses, host:port;host:port")
    parser.add_argument("--account", dest="act_as", metavar="NAME", default=os.environ.get(ACL_ACCOUNT_ENV) or None,
                        help=f"act as this account of the cluster's ACL file (its keys from `cluster acl keygen "
                             f"NAME`, or the path of its .key_secret; default ${ACL_ACCOUNT_ENV}); without it, a "
                             f"data dir started with an ACL file is used with the cluster's own key (a superuser)")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (COMMAND_VERBS if verb is None else (_MODULE_OF_VERB[verb],)):
        importlib.import_module(f"rocketbox.cluster.cli.{module}").add_parsers(sub)
    for verb in set(sub.choices.values()):
        _accept_global_options(verb)
    return parser


def _accept_global_options(parser: argparse.ArgumentParser) -> None:
    """--data-dir and --namesrv after the subcommand too (``cluster up --data-dir D``), and after
    a nested one (``cluster topic create T --data-dir D``). SUPPRESS: absent there, the value given
    before the subcommand (or the default) stays."""
    for flag, dest in (("--data-dir", "data_dir"), ("--namesrv", "namesrv"), ("--account", "act_as")):
        if flag not in parser._option_string_actions:
            parser.add_argument(flag, dest=dest, default=argparse.SUPPRESS,
                                help=f"as the global {flag}, given after the subcommand")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in set(action.choices.values()):
                _accept_global_options(nested)


# Verbs that connect to no door: they load no CURVE modules and set no client keys. (Keys the command
# held once reached the roles through ``up --detach``'s fork; a forked role now drops any it
# inherits, role_fork._become_own_process.)
VERBS_OF_NO_CLIENT = frozenset({"up", "config"})


def _use_keys(args) -> str | None:
    """The keys the command's clients connect with: ``--account``'s pair; else, on a data dir
    started with access control, the cluster's own (a superuser: past every rule). The problem, if any."""
    from rocketbox.cluster.cli import up_settings
    try:
        acl_file = up_settings.access_file(args.data_dir)
    except (OSError, ValueError):
        acl_file = None
    if not (args.act_as or acl_file):
        return None   # no access control: the CURVE modules stay unloaded (`cluster up` starts sooner)
    from rocketbox.cluster.acl.curve import ClientKeys, CurveKeyError, use_cluster_keys, use_for_process
    from rocketbox.cluster.config import ClientConfig
    if args.act_as:
        try:
            config = ClientConfig.for_account(args.act_as, acl_file or os.environ.get(ACL_FILE_ENV))
        except ValueError as exc:
            args.account_problem = f"--account {args.act_as}: {exc}"
            # A remoting door (-n host:9876) signs with the account's secretKey instead (common.py).
            return None if (args.namesrv or os.environ.get("ROCKETBOX_NAMESRV")) else args.account_problem
        use_for_process(ClientKeys(config.curve_server_key.encode(), config.curve_public_key.encode(),
                                   config.curve_secret_key.encode()))
    elif acl_file:
        try:
            use_cluster_keys(acl_file)
        except CurveKeyError as exc:
            print(f"warning: {exc}", file=sys.stderr)
    return None


EXIT_BROKEN_PIPE = 128 + 13   # what a shell reports for a process SIGPIPE ended


def main(argv=None) -> int:
    return _command(argv)[0]


def run() -> None:
    """The ``cluster`` program (its console script, ``python -m rocketbox.cluster.cli``): ``main()``,
    then exit. A verb that leaves nothing to tidy sets ``args.nothing_to_tidy`` (``up --detach``: its
    cluster runs on in a session of its own; no thread, client or log handler of the command's is
    left), and the process leaves as soon as its output is flushed: tearing the interpreter down
    frees every object one by one (70-130 ms after the banner, on the command's critical path)."""
    code, args = _command(None)
    if getattr(args, "nothing_to_tidy", False):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def _command(argv) -> tuple[int, argparse.Namespace]:
    make_private()   # the data dir it makes, and what an in-process supervisor starts (file_modes.py)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(given_verb(argv)).parse_args(argv)
    return _run_verb(args), args


def _run_verb(args) -> int:
    problem = None
    if args.command == "topic" and args.action != "list" and not args.topic:
        problem = "a topic name is needed"
    elif args.command == "query":
        from rocketbox.cluster.cli.client_cmds import query_problem
        problem = query_problem(args)
    elif args.command in ("up", "config"):
        from rocketbox.cluster.cli import up_config, up_settings
        from rocketbox.cluster.cli.cluster_cmds import role_problem
        problem = up_config.load(args) or up_settings.resolve(args) or role_problem(args)
    if not problem and args.command not in VERBS_OF_NO_CLIENT:
        problem = _use_keys(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
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
    run()
