"""What a newcomer meets first on the command line: lookups by the id `send` printed,
a sender that reports line by line, exit codes a script can trust, output fit for pipes."""

from __future__ import annotations

import os
import select
import signal
import subprocess

from rocketbox.cluster import Admin
from rocketbox.cluster.config import SYNC_MASTER
from tests.cli_helpers import CLI, free_port, free_port_block, free_remoting_ports, json_lines, run_cli, up_on_free_ports
from tests.conftest import client_config


def _cli(cluster, *args, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(*args, data_dir=cluster.data_dir, namesrv=cluster.namesrv, stdin=stdin, timeout_s=timeout,
                   check=False)


def test_query_by_the_offset_id_send_printed_with_and_without_topic(start_cluster):
    cluster = start_cluster()
    assert _cli(cluster, "topic", "create", "Orders", "--queues", "2").returncode == 0
    sent = json_lines(_cli(cluster, "send", "Orders", "hello", "--keys", "order-1", "--json"))[0]
    for extra in ((), ("--topic", "Orders")):
        found = json_lines(_cli(cluster, "query", "--id", sent["offsetMsgId"], *extra, "--json"))
        assert [m["body"] for m in found] == ["hello"], extra
    # --id also takes the UNIQ_KEY (mqadmin's queryMsgById falls back the same way): in --topic, or
    # without it in every topic (its first bytes parse as a broker's address that is not there).
    for extra in ((), ("--topic", "Orders")):
        by_uniq = json_lines(_cli(cluster, "query", "--id", sent["msgId"], *extra, "--json"))
        assert [m["offsetMsgId"] for m in by_uniq] == [sent["offsetMsgId"]], extra
    # An offset id of another topic is not this topic's message.
    assert _cli(cluster, "topic", "create", "Other", "--queues", "1").returncode == 0
    wrong_topic = _cli(cluster, "query", "--id", sent["offsetMsgId"], "--topic", "Other")
    assert wrong_topic.returncode == 1 and "no message found" in wrong_topic.stderr


def test_send_reports_each_stdin_line_as_it_goes_and_names_the_failed_one(start_cluster):
    cluster = start_cluster()
    _cli(cluster, "topic", "create", "Lines", "--queues", "1")
    done = _cli(cluster, "send", "Lines", stdin="a\nb\n\nc\n")
    assert done.returncode == 1, done
    assert [line.split()[:3] for line in done.stdout.splitlines()] == [
        ["line", "1:", "SEND_OK"], ["line", "2:", "SEND_OK"], ["line", "4:", "SEND_OK"]]
    assert "error: line 3: the message body is empty" in done.stderr
    consumed = json_lines(_cli(cluster, "consume", "Lines", "--json", "--wait-s", "5", "--max", "3"))
    assert [m["body"] for m in consumed] == ["a", "b", "c"]

    # The first answer is out while stdin is still open: a line-per-message sender streams.
    proc = subprocess.Popen([*CLI, "--namesrv", cluster.namesrv, "send", "Lines"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("first\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no result printed for the first line while stdin stayed open"
        assert proc.stdout.readline().startswith("line 1: SEND_OK")
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        proc.wait()


def test_send_exits_non_zero_when_the_answer_is_not_send_ok(start_cluster):
    # A sync master without a slave answers SLAVE_NOT_AVAILABLE: stored, but not as promised.
    cluster = start_cluster(broker_overrides={"broker_role": SYNC_MASTER})
    _cli(cluster, "topic", "create", "Sync", "--queues", "1")
    proc = _cli(cluster, "send", "Sync", "unreplicated")
    assert proc.returncode == 1, proc
    assert proc.stdout == "" and proc.stderr.startswith("SLAVE_NOT_AVAILABLE ")


def test_output_survives_pipes_and_is_not_cut_to_80_columns(start_cluster):
    cluster = start_cluster()
    _cli(cluster, "topic", "create", "Piped", "--queues", "4")
    _cli(cluster, "send", "Piped", "x", "--count", "50")
    for command in (["consume", "Piped"], ["consume", "Piped", "--json"], ["topic", "route", "Piped"]):
        shell = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "pipe", *CLI, "--namesrv",
                                cluster.namesrv, *command], capture_output=True, text=True, timeout=120)
        assert "Traceback" not in shell.stderr and "BrokenPipe" not in shell.stderr, shell.stderr
        assert shell.returncode in (0, 141), shell   # 141: ended by the closed pipe, as `yes | head` is
        assert shell.stdout.strip()
    route = _cli(cluster, "topic", "route", "Piped")
    broker_address = cluster.topology.brokers[0].address
    assert broker_address in route.stdout, route.stdout   # whole, not cut with an ellipsis
    plain = _cli(cluster, "consume", "Piped", "--max", "1").stdout
    assert "tags=" not in plain and "keys=" not in plain   # no tags=None keys= for a message without them


def test_usage_errors_are_usage_errors(start_cluster):
    cluster = start_cluster()
    zero = _cli(cluster, "topic", "create", "Bad", "--queues", "0")
    assert zero.returncode == 2 and "--queues: 0 is outside 1..1024" in zero.stderr
    nameless = _cli(cluster, "topic", "create", "")
    assert nameless.returncode == 2 and nameless.stderr.splitlines()[-1].endswith("topic name is empty")
    missing = _cli(cluster, "topic", "create")
    assert missing.returncode == 2 and missing.stderr.strip() == "error: a topic name is needed"
    with Admin(config=client_config(cluster)) as admin:
        assert "Bad" not in admin.topic_list()


def test_exit_codes_follow_the_readme_rule_with_the_reason_on_stderr(start_cluster):
    # README: 0 done, 1 refused or found nothing (the reason on stderr), 2 a usage error.
    cluster = start_cluster()
    for argv in (("dlq", "list", "NoSuchGroup"), ("consumerProgress", "-g", "NoSuchGroup"),
                 ("dlq", "resend", "NoSuchGroup", "--all")):
        unknown = _cli(cluster, *argv)
        assert unknown.returncode == 1 and unknown.stdout == "", (argv, unknown)
        assert unknown.stderr.startswith("error: consumer group NoSuchGroup is not known to any broker master"), argv
    # A group the cluster knows: an empty dead-letter list is an answer; no progress on a topic is not.
    assert _cli(cluster, "send", "Known", "x").returncode == 0
    assert _cli(cluster, "consume", "Known", "--group", "Reader", "--from-committed", "--commit").returncode == 0
    empty = _cli(cluster, "dlq", "list", "Reader")
    assert (empty.returncode, empty.stdout, empty.stderr.strip()) == (0, "", "no dead letters for group Reader")
    elsewhere = _cli(cluster, "consumerProgress", "-g", "Reader", "-t", "NoSuchTopic")
    assert elsewhere.returncode == 1 and elsewhere.stdout == "", elsewhere
    assert elsewhere.stderr.startswith("error: group Reader has no consume progress on topic NoSuchTopic"), elsewhere.stderr
    assert _cli(cluster, "consumerProgress", "-g", "Reader").returncode == 0
    gone = _cli(cluster, "topic", "delete", "NoSuchTopic")
    assert gone.returncode == 1 and gone.stdout == "", gone
    assert gone.stderr.strip() == ("error: topic NoSuchTopic does not exist (no NameServer route, no broker has it): "
                                   "nothing deleted")
    # A name the cluster could never take is a usage error, said before anything is sent.
    for bad in ("bad topic", "a/b"):
        for argv in (("topic", "create", bad), ("send", bad, "x"), ("topicStatus", "-t", bad),
                     ("consume", "Known", "--group", bad)):
            proc = _cli(cluster, *argv)
            assert proc.returncode == 2, (argv, proc)
            assert proc.stderr.splitlines()[-1].endswith(f"name {bad!r} has characters outside [%|a-zA-Z0-9_-]"), \
                (argv, proc.stderr)


def test_reserved_names_unknown_groups_and_auto_create_are_said(start_cluster):
    cluster = start_cluster()
    template = _cli(cluster, "topic", "create", "TBW102")
    assert template.returncode == 1 and "conflict with system topic" in template.stderr
    dlq = _cli(cluster, "topic", "create", "%DLQ%foo")
    assert dlq.returncode == 2 and "--group-topic" in dlq.stderr
    assert _cli(cluster, "topic", "create", "%DLQ%foo", "--group-topic").returncode == 0
    # A send to a missing topic creates it (RocketMQ's default), and the CLI says so.
    created = _cli(cluster, "send", "BornOnSend", "x")
    assert created.returncode == 0 and "note: topic BornOnSend did not exist" in created.stderr
    assert "note:" not in _cli(cluster, "send", "BornOnSend", "y").stderr
    # A group that never consumed the topic is not silently created or read from 0.
    unknown = _cli(cluster, "group", "reset-offset", "NoSuchGroup", "BornOnSend", "--to-time", "0")
    assert unknown.returncode == 1 and "nothing reset" in unknown.stderr
    with Admin(config=client_config(cluster)) as admin:
        assert "NoSuchGroup" not in admin.groups_of("BornOnSend")
    fresh = _cli(cluster, "consume", "BornOnSend", "--group", "NoSuchGroup", "--from-committed", "--max", "5")
    assert fresh.returncode == 0 and "group NoSuchGroup has no committed offsets on BornOnSend" in fresh.stderr


def test_auto_create_can_be_turned_off(start_cluster):
    cluster = start_cluster(broker_overrides={"auto_create_topic_enabled": False})
    refused = _cli(cluster, "send", "Missing", "x")
    assert refused.returncode == 1 and "Missing" in refused.stderr, refused
    help_text = subprocess.run([*CLI, "up", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--no-auto-create-topic" in help_text


def test_ctrl_c_of_a_foreground_cluster_says_it_stopped(tmp_path):
    namesrv_port, broker_port = free_port(), free_port_block([0, 1])
    proc = subprocess.Popen([*CLI, "--data-dir", str(tmp_path / "fg"), "up", "--no-live", "--namesrv-port",
                             str(namesrv_port), "--broker-port", str(broker_port), *free_remoting_ports(),
                             "--commitlog-file-size-bytes", str(16 * 1024 * 1024), "--no-metrics", "--no-proxy",
                             "--no-console"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for _ in range(200):   # the banner ends with the export line
            line = proc.stdout.readline()
            assert line, "cluster up ended before it was ready:\n" + "".join(lines)
            lines.append(line)
            if line.startswith("export ROCKETBOX_NAMESRV="):
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, rest
    assert rest.rstrip().splitlines()[-1] == "cluster stopped", rest


def _disk_bytes(root) -> int:
    """Bytes the files under ``root`` occupy on disk (allocated blocks, as du counts)."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def test_a_data_dir_remembers_how_it_was_made_and_the_dev_footprint_is_small(tmp_path):
    data_dir = str(tmp_path / "remembered")
    namesrv_port, broker_port, metrics_port = free_port(), free_port_block([0, 1]), free_port()

    def cli(*args):
        return run_cli(*args, data_dir=data_dir, timeout_s=180, check=False)

    try:
        first = cli("up", "--detach", "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
                    *free_remoting_ports(), "--metrics-port", str(metrics_port), "--no-proxy", "--no-console")
        assert first.returncode == 0, first
        # The default (dev) store: 64 MiB segments, not RocketMQ's 1 GiB (2.4 GB idle before).
        footprint = _disk_bytes(data_dir)
        assert footprint < 400 * 1024 * 1024, footprint
        assert cli("down").returncode == 0
        # Again with no flags: the same ports and sizes, not a boot error.
        again = cli("up", "--detach")
        assert again.returncode == 0, again
        assert f"127.0.0.1:{namesrv_port}" in again.stdout
        # A segment size the disk holds cannot change; a mode can (it is remembered then).
        conflict = cli("up", "--detach", "--commitlog-file-size-bytes", str(16 * 1024 * 1024))
        assert conflict.returncode == 2
        assert "its CommitLog segments on disk have that size" in conflict.stderr, conflict.stderr
        assert cli("down").returncode == 0
        changed = cli("up", "--detach", "--flush-mode", "sync")
        assert changed.returncode == 0, changed
        assert f"note: {data_dir} was made --flush-mode async; now --flush-mode sync (remembered" in changed.stderr
    finally:
        cli("down")


def test_up_and_status_say_where_the_data_is_and_the_users_home_stays_clean(tmp_path):
    # The rocketmq 5 client package opens its log in ~/logs/rocketmq_python/ when imported; the proxy
    # loads only its generated protocol modules (proxy/protos.py), and runs with the data dir as HOME.
    home = tmp_path / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}, "HOME": str(home)}
    data_dir = str(tmp_path / "where")
    _, up = up_on_free_ports(3, lambda p: (
        "up", "--detach", "--namesrv-port", str(p[0]), "--broker-port", str(p[1]), *free_remoting_ports(),
        "--proxy-port", str(p[2]), "--no-metrics", "--no-console",
        "--commitlog-file-size-bytes", str(16 * 1024 * 1024)), data_dir=data_dir, env=env)
    try:
        said = f"data dir: {data_dir} (logs: {data_dir}/logs, cluster logs NAME)"
        assert said in up.stdout.splitlines(), up.stdout
        status = run_cli("status", data_dir=data_dir, env=env)
        assert said in status.stdout.splitlines(), status.stdout
        assert "proxy" in status.stdout
        assert not os.path.exists(os.path.join(data_dir, "logs", "rocketmq_python"))   # the client never loaded
        assert sorted(p.name for p in home.rglob("*")) == []
    finally:
        run_cli("down", data_dir=data_dir, env=env, check=False)
