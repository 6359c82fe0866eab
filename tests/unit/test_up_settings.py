"""What a data dir remembers of ``cluster up`` and what a later ``up`` there may change
(``cli/up_settings.py``), through the command's own parser, without starting anything."""

from __future__ import annotations

import pytest

from rocketbox.cluster.cli import build_parser, up_config, up_settings


def _resolved(data_dir: str, *flags: str):
    """``cluster up FLAGS`` in ``data_dir`` as far as main() takes it before starting: (args, problem)."""
    args = build_parser().parse_args(["--data-dir", data_dir, "up", *flags])
    problem = up_config.load(args) or up_settings.resolve(args)
    return args, problem


def _made(data_dir: str, *flags: str) -> None:
    args, problem = _resolved(data_dir, *flags)
    assert problem is None, problem
    up_settings.save(args)


def test_access_control_slaves_and_modes_change_and_are_remembered(tmp_path):
    data_dir = str(tmp_path / "d")
    acl_file = str(tmp_path / "plain_acl.yml")
    _made(data_dir)
    args, problem = _resolved(data_dir, "--acl-file", acl_file, "--slaves", "1", "--broker-role", "sync",
                              "--failover")
    assert problem is None
    assert args.changed_settings == [
        f"{data_dir} was made --slaves 0; now --slaves 1 (remembered for the next up)",
        f"{data_dir} was made without --failover; now --failover (remembered for the next up)",
        f"{data_dir} was made --broker-role async; now --broker-role sync (remembered for the next up)",
        f"{data_dir} was made without --acl-file; now --acl-file {acl_file} (remembered for the next up)"]
    up_settings.save(args)
    again, problem = _resolved(data_dir)
    assert problem is None and again.changed_settings == []
    assert (again.acl_file, again.slaves, again.failover, again.broker_role) == (acl_file, 1, True, "sync")
    off, problem = _resolved(data_dir, "--no-acl")
    assert problem is None and off.acl_file is None
    assert off.changed_settings == [f"{data_dir} was made --acl-file {acl_file}; now without --acl-file "
                                    f"(remembered for the next up)"]


@pytest.mark.parametrize("flags, why", [
    (("--store-sizes", "rocketmq"), "its CommitLog segments on disk have that profile's size"),
    (("--commitlog-file-size-bytes", "1048576"), "its CommitLog segments on disk have that size"),
    (("--no-failover",), "its controller may have made a slave the master"),
    (("--slaves", "0"), "the controller counts the replicas left out"),
    (("--brokers", "1"), "the broker groups left out hold messages"),
])
def test_what_the_disk_ties_down_is_refused_with_why_and_the_way_out(tmp_path, flags, why):
    data_dir = str(tmp_path / "d")
    _made(data_dir, "--brokers", "2", "--slaves", "1", "--failover")
    _, problem = _resolved(data_dir, *flags)
    assert problem is not None and why in problem, problem
    assert f"Leave {flags[0]} out to keep" in problem and "give another --data-dir" in problem
    assert "None" not in problem


def test_a_remembered_switch_turns_off_again(tmp_path):
    data_dir = str(tmp_path / "d")
    _made(data_dir, "--no-proxy", "--console-trust-loopback")
    args, problem = _resolved(data_dir, "--proxy", "--no-console-trust-loopback")
    assert problem is None and args.no_proxy is False and args.console_trust_loopback is False
    assert f"{data_dir} was made --no-proxy; now --proxy (remembered for the next up)" in args.changed_settings


def test_no_acl_and_an_acl_file_contradict(tmp_path):
    _, problem = _resolved(str(tmp_path / "d"), "--no-acl", "--acl-file", str(tmp_path / "a.yml"))
    assert problem == "--no-acl and --acl-file contradict each other: give one"
