"""Access control through the ``cluster`` command, as the README's walk does it: a data dir made
without access control takes ``--acl-file`` at a later ``up`` (and ``--no-acl`` after), remembered;
what cannot change is refused with why and the way out; ``cluster --account NAME`` acts as that
account; a command without keys is told at once that access control refused it."""

from __future__ import annotations

import os

import pytest

from rocketbox.cluster.supervision.role_fork import FORK_ROLES_ENV
from tests.cli_helpers import PORT_FLAGS_COUNT, port_flags, run_cli, up_on_free_ports

pytestmark = pytest.mark.timeout(300)

ACL = """accounts:
  - accessKey: orders-app
    secretKey: change-me-please
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["Orders=PUB|SUB"]
"""


def test_access_control_is_turned_on_and_off_later_and_an_account_acts_as_itself(tmp_path):
    data_dir = str(tmp_path / "walk")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    acl_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKETBOX_NAMESRV", "ROCKETBOX_ACCOUNT")}

    def cli(*args, **kw):
        return run_cli(*args, data_dir=data_dir, check=False, env=kw.pop("env", env), **kw)

    ports, _ = up_on_free_ports(PORT_FLAGS_COUNT, lambda p: ("up", "--detach", *port_flags(p)), data_dir=data_dir,
                                env=env)
    try:
        assert cli("send", "Orders", "before").returncode == 0
        assert cli("down").returncode == 0
        # Before: "was made with --acl-file None, not ...", exit 2.
        on = cli("up", "--detach", "--acl-file", str(acl_file))
        assert on.returncode == 0, on.stderr
        assert f"note: {data_dir} was made without --acl-file; now --acl-file {acl_file} (remembered for the next up)" in on.stderr
        keygen = cli("acl", "keygen", "orders-app")
        assert keygen.returncode == 0, keygen.stderr
        sent = cli("--account", "orders-app", "send", "Orders", "as orders-app")
        assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stderr
        refused = cli("--account", "orders-app", "send", "Payments", "not allowed")
        assert refused.returncode == 1
        assert "accessKey=orders-app needs PUB, has DENY" in refused.stderr
        assert "access control refused it" in refused.stderr and "cluster --account NAME" in refused.stderr
        as_env = cli("send", "Orders", "by the variable", env={**env, "ROCKETBOX_ACCOUNT": "orders-app",
                                                                 "ROCKETBOX_NAMESRV": f"127.0.0.1:{ports[0]}"})
        assert as_env.returncode == 0, as_env.stderr
        # Without keys (the cluster's address, another data dir): told at once, not "not reachable".
        keyless = run_cli("send", "Orders", "no keys", data_dir=str(tmp_path / "elsewhere"),
                          namesrv=f"127.0.0.1:{ports[0]}", check=False, env=env)
        assert keyless.returncode == 1
        assert "access control refused this client" in keyless.stderr, keyless.stderr
        assert "cluster --account NAME" in keyless.stderr and "not reachable" not in keyless.stderr
        # On the remoting door (mqadmin's -n habit) --account signs with the account's secretKey.
        remoting = f"127.0.0.1:{ports[2]}"
        signed = run_cli("--account", "orders-app", "send", "Orders", "signed", data_dir=str(tmp_path / "elsewhere"),
                         namesrv=remoting, check=False, env={**env, "ROCKETBOX_ACL_FILE": str(acl_file)})
        assert signed.returncode == 0 and "SEND_OK" in signed.stdout, signed.stderr
        unsigned = run_cli("send", "Orders", "unsigned", data_dir=str(tmp_path / "elsewhere"), namesrv=remoting,
                           check=False, env=env)
        assert unsigned.returncode == 1 and "No accessKey is configured" in unsigned.stderr, unsigned.stderr
        assert "access control refused it" in unsigned.stderr
        no_keys = cli("--account", "nobody", "send", "Orders", "x")
        assert no_keys.returncode == 2 and "`cluster acl keygen nobody` makes them" in no_keys.stderr
        # What the disk ties down is refused, saying why and what to do, never a Python None.
        sizes = cli("up", "--detach", "--store-sizes", "rocketmq")
        assert sizes.returncode == 2
        assert sizes.stderr.strip().splitlines() == [
            f"error: {data_dir}: --store-sizes rocketmq cannot replace what it was made with: the data dir was made "
            f"--store-sizes dev, and its CommitLog segments on disk have that profile's size. Leave --store-sizes out "
            f"to keep --store-sizes dev, or give another --data-dir for a new cluster"]
        assert cli("down").returncode == 0
        off = cli("up", "--detach", "--no-acl")
        assert off.returncode == 0, off.stderr
        assert f"note: {data_dir} was made --acl-file {acl_file}; now without --acl-file" in off.stderr
        plain = run_cli("send", "Orders", "open again", data_dir=str(tmp_path / "elsewhere"),
                        namesrv=f"127.0.0.1:{ports[0]}", check=False, env=env)
        assert plain.returncode == 0, plain.stderr
    finally:
        cli("down")


@pytest.mark.parametrize("fork_roles", ["1", "0"], ids=["forked", "executed"])
def test_up_without_access_control_after_it_gives_the_cluster_no_keys_of_the_command(tmp_path, fork_roles):
    """``up --no-acl`` on a data dir last started with an ACL file: the command reads that file's keys for
    the verbs that connect, and ``up`` connects nowhere, so it takes none. ``up --detach`` forks the
    supervisor from the command (``ROCKETBOX_FORK_ROLES=0``: executes it), and the supervisor forks the
    roles: keys the command held would be theirs, and a broker with CURVE keys fails its registration at
    the plain NameServer, so a send reads "No route info of this topic"."""
    data_dir = str(tmp_path / "walk")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    acl_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKETBOX_NAMESRV", "ROCKETBOX_ACCOUNT")}
    env[FORK_ROLES_ENV] = fork_roles

    def cli(*args):
        return run_cli(*args, data_dir=data_dir, check=False, env=env)

    ports, _ = up_on_free_ports(PORT_FLAGS_COUNT, lambda p: ("up", "--detach", "--acl-file", str(acl_file),
                                                             *port_flags(p)), data_dir=data_dir, env=env)
    try:
        assert cli("down").returncode == 0
        off = cli("up", "--detach", "--no-acl")
        assert off.returncode == 0, off.stderr
        plain = run_cli("send", "Orders", "plain", data_dir=str(tmp_path / "elsewhere"),
                        namesrv=f"127.0.0.1:{ports[0]}", check=False, env=env)
        assert plain.returncode == 0 and "SEND_OK" in plain.stdout, plain.stderr
        broker_log = (tmp_path / "walk" / "logs" / "broker-a.log").read_text()
        assert "registration with NameServer" not in broker_log, broker_log
    finally:
        cli("down")
