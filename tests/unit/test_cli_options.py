"""The ``cluster`` command's options, read from its argparse parsers: every option and argument of
every subcommand says what it is for, and mqadmin's verbs take mqadmin's short flags."""

from __future__ import annotations

import argparse

import pytest

from rocketbox.cluster.cli import build_parser

# mqadmin's short flags per verb (its *SubCommand.java options) of the flags every verb shares:
# -n -t -g -b -c -k -i -o -s, plus the verb's own letters where they have one meaning there.
MQADMIN_SHORT_FLAGS = {
    "clusterList": {"-n", "-c", "-i"},
    "brokerStatus": {"-n", "-b", "-c"},
    "topicStatus": {"-n", "-t", "-c"},
    "consumerProgress": {"-n", "-g", "-t", "-s", "-c"},
    "consumerConnection": {"-n", "-g", "-b"},
    "consumerStatus": {"-n", "-g", "-i", "-s", "-b"},
    "updateSubGroup": {"-n", "-g", "-b", "-c", "-s", "-m", "-d", "-o", "-q", "-r", "-i", "-w", "-a"},
    "deleteSubGroup": {"-n", "-g", "-b", "-c"},
    "getBrokerConfig": {"-n", "-b", "-c"},
    "updateBrokerConfig": {"-n", "-b", "-c", "-k", "-v"},
    "deleteExpiredCommitLog": {"-n", "-b", "-c"},
    "statsAll": {"-n", "-t", "-a"},
    "haStatus": {"-n", "-b", "-c", "-i"},
}


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser, help of the subcommand) for the root and every subcommand under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"cluster {' '.join(path + (name,))} has no help text"
                yield from _subcommands(sub, path + (name,))


def _verb(name: str) -> argparse.ArgumentParser:
    return dict((path, parser) for path, parser in _subcommands(build_parser()))[(name,)]


def test_every_option_of_every_subcommand_has_help_text():
    missing = [f"cluster {' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
               for path, parser in _subcommands(build_parser()) for action in parser._actions
               if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
               and (not action.help or action.help == argparse.SUPPRESS)]
    assert not missing, "options without help text:\n" + "\n".join(missing)


@pytest.mark.parametrize("verb", sorted(MQADMIN_SHORT_FLAGS))
def test_mqadmin_verbs_take_mqadmin_short_flags(verb):
    flags = {flag for action in _verb(verb)._actions for flag in action.option_strings}
    assert MQADMIN_SHORT_FLAGS[verb] <= flags, f"{verb} lacks {sorted(MQADMIN_SHORT_FLAGS[verb] - flags)}"


@pytest.mark.parametrize("argv, expected", [
    (["statsAll", "-n", "h:1", "-t", "T", "-a"], {"namesrv": "h:1", "topic": "T", "active": True}),
    (["haStatus", "-c", "C", "-i", "2"], {"cluster": "C", "interval": 2.0}),
    (["consumerStatus", "-g", "G", "-i", "cid", "-s", "-b", "h:2"],
     {"group": "G", "client_id": "cid", "jstack": True, "broker_addr": "h:2"}),
    (["consumerProgress", "-g", "G", "-t", "T", "-s", "-c", "C"],
     {"group": "G", "topic": "T", "show_client_ip": True, "cluster": "C"}),
    (["updateBrokerConfig", "-b", "h:3", "-k", "deleteWhen", "-v", "05"],
     {"broker_addr": "h:3", "key": "deleteWhen", "value": "05"}),
    (["updateSubGroup", "-g", "G", "-c", "C", "-o", "true", "-i", "1"],
     {"group": "G", "cluster": "C", "consumeMessageOrderly": True, "brokerId": 1}),
])
def test_short_flags_set_what_their_long_names_set(argv, expected):
    args = vars(build_parser().parse_args(argv))
    assert {key: args[key] for key in expected} == expected


def test_ha_status_needs_a_broker_or_a_cluster(capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["haStatus"])
    assert exited.value.code == 2 and "-b/--broker-addr -c/--cluster" in capsys.readouterr().err


def test_global_options_work_before_and_after_every_subcommand():
    import argparse

    from rocketbox.cluster.cli import build_parser
    parser = build_parser()

    def verbs(p, prefix=()):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield prefix + (name,), sub
                    yield from verbs(sub, prefix + (name,))
    checked = 0
    for path, sub in verbs(parser):
        assert "--data-dir" in sub._option_string_actions and "--namesrv" in sub._option_string_actions, path
        checked += 1
    assert checked > 25
    assert parser.parse_args(["up", "--data-dir", "/d", "--namesrv", "h:1"]).data_dir == "/d"
    assert parser.parse_args(["--data-dir", "/d", "status"]).data_dir == "/d"
    assert parser.parse_args(["topic", "list", "--namesrv", "h:2"]).namesrv == "h:2"


# The arguments that name a topic or a group (cloneGroupOffset's -s/-d are groups).
NAME_DESTS = {"topic", "group", "source", "target"}


def test_every_topic_and_group_argument_refuses_a_name_the_cluster_cannot_take(capsys):
    unchecked = [f"cluster {' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
                 for path, parser in _subcommands(build_parser()) for action in parser._actions
                 if action.dest in NAME_DESTS and action.type is None]
    assert not unchecked, "names taken unchecked (a bad one would reach the cluster: exit 1, not 2):\n" + \
        "\n".join(unchecked)
    for argv in (["send", "a/b", "x"], ["topic", "create", "bad topic"], ["dlq", "list", "a b"],
                 ["consumerProgress", "-g", "x" * 128], ["cloneGroupOffset", "-s", "ok", "-d", "no/pe"]):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(argv)
        assert exited.value.code == 2, argv
        assert "name" in capsys.readouterr().err.splitlines()[-1], argv


@pytest.mark.parametrize("argv, usage, hint", [
    (["up", "--detatch"], "usage: cluster up ", "unrecognized arguments: --detatch (did you mean --detach?)"),
    (["dlq", "list", "G", "--jsn"], "usage: cluster dlq list ", "unrecognized arguments: --jsn (did you mean --json?)"),
    (["topic", "create", "T", "--qeues=2"], "usage: cluster topic ",
     "unrecognized arguments: --qeues=2 (did you mean --queues?)"),
    (["status", "extra"], "usage: cluster status ", "unrecognized arguments: extra"),
])
def test_a_mistyped_flag_gets_the_subcommands_usage_and_the_closest_flag(capsys, argv, usage, hint):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(usage), err
    assert err.splitlines()[-1].endswith(hint), err
    assert "clusterList" not in err   # not the top-level list of every verb


def test_the_verb_table_names_what_each_commands_module_adds():
    """``cluster VERB`` builds only VERB's module's parsers (COMMAND_VERBS): a verb missing from the
    table, or listed under the wrong module, would be refused or parsed by another module's flags."""
    import importlib
    from rocketbox.cluster.cli import COMMAND_VERBS
    for module, verbs in COMMAND_VERBS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"rocketbox.cluster.cli.{module}").add_parsers(sub)
        assert tuple(sub.choices) == verbs, module
    choices = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)][0].choices
    assert list(choices) == [verb for verbs in COMMAND_VERBS.values() for verb in verbs]


@pytest.mark.parametrize("argv, verb", [
    (["up", "--detach"], "up"),
    (["--data-dir", "/d", "--namesrv=a:1", "topic", "create", "T"], "topic"),
    (["--account", "up", "status"], "status"),   # a global option's value is no verb
    (["--help"], None), (["--data", "/d", "up"], None),   # argparse's abbreviation: the full parser
    (["upp"], None), ([], None),
])
def test_a_command_line_builds_only_its_verbs_parser(argv, verb):
    from rocketbox.cluster.cli import given_verb
    assert given_verb(argv) == verb
    if verb is not None:   # the one-verb parser reads the line as the full one does
        assert vars(build_parser(verb).parse_args(argv)).keys() - {"func"} == \
            vars(build_parser().parse_args(argv)).keys() - {"func"}
