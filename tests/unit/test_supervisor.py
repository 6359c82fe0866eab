"""The supervisor against real processes (tests/procs_child.py as every child).

In-process tests drive the supervisor loop from the test itself (``run_until``),
so nothing sleeps a fixed time: each wait is a condition with a deadline. The
tests about a supervisor that is SIGTERMed or SIGKILLed run it as its own
process through ``spawn_detached``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from rocketbox.cluster.supervision import lifecycle
from rocketbox.cluster.supervision.arbiter import Supervisor
from rocketbox.cluster.supervision.child_table import ChildSpec, validate_table
from rocketbox.cluster.supervision.children import ChildState, describe_exit
from rocketbox.cluster.supervision.detach import spawn_detached
from rocketbox.cluster.supervision.errors import BootError, SupervisorError
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR, EXIT_OK
from rocketbox.cluster.supervision.run_state import STATE_FILE_NAME, read_state_file

REPO_DIR = Path(__file__).resolve().parents[2]
CHILD_PROGRAM = REPO_DIR / "tests" / "procs_child.py"
DEADLINE_S = 30.0   # a bound on a busy machine (a child's imports took 2 s in CI), never a goal


def child(name: str, events: Path, *extra: str, **fields) -> ChildSpec:
    argv = [sys.executable, str(CHILD_PROGRAM), "--name", name, "--events", str(events), *extra]
    return ChildSpec(name=name, argv=argv, **fields)


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def names_of(events: list[dict], event: str) -> list[str]:
    return [e["name"] for e in events if e["event"] == event]


def wait_for(condition, timeout_s: float = DEADLINE_S, interval_s: float = 0.02) -> bool:
    """For conditions outside any loop we drive (other processes' lives)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True


def process_gone(pid: int) -> bool:
    """Not running any more. A zombie counts as gone: it runs nothing and holds nothing."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def running(sup: Supervisor, name: str, other_than_pid: int | None = None) -> bool:
    stats = sup.statistics()[name]
    return stats.state == ChildState.RUNNING and stats.pid is not None and stats.pid != other_than_pid


@pytest.fixture
def events(tmp_path: Path) -> Path:
    return tmp_path / "events.jsonl"


@pytest.fixture
def supervisors():
    """Supervisors a test started; stopped even when the test fails."""
    started: list[Supervisor] = []
    yield started
    for sup in started:
        sup.stop()


def start(supervisors: list, specs: list[ChildSpec], data_dir: Path) -> Supervisor:
    sup = Supervisor(specs, str(data_dir))
    supervisors.append(sup)
    sup.start()
    return sup


# ------------------------------------------------------------------ pure parts


def test_table_validation_rejects_ambiguous_tables(events):
    a = child("a", events)
    with pytest.raises(ValueError, match="twice"):
        validate_table([a, a])
    with pytest.raises(ValueError, match="must start before"):
        validate_table([child("w", events, group="g", start_order=0),
                        child("l", events, group="g", leader=True, start_order=1)])
    with pytest.raises(ValueError, match="2 leaders"):
        validate_table([child("l1", events, group="g", leader=True),
                        child("l2", events, group="g", leader=True)])
    with pytest.raises(ValueError, match="exactly one of argv and module"):
        ChildSpec(name="x", argv=["true"], module="rocketbox.cluster.procs.broker").validate()
    with pytest.raises(ValueError, match="unknown ChildSpec fields"):
        ChildSpec.from_dict({"name": "x", "argv": ["true"], "retsart": "never"})
    spec = ChildSpec(name="b", module="rocketbox.cluster.procs.broker", args=["--config-json", "{}"],
                     group="broker-a", leader=True)
    assert spec.command() == [sys.executable, "-P", "-m", "rocketbox.cluster.procs.broker", "--config-json", "{}"]
    assert ChildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_exit_descriptions_carry_gunicorn_hints():
    assert describe_exit(1 << 8, kill_sent=False) == "exit code 1"
    assert describe_exit(EXIT_BOOT_ERROR << 8, kill_sent=False) == "exit code 3 (boot error)"
    assert describe_exit(signal.SIGKILL, kill_sent=False) == "killed by SIGKILL (perhaps out of memory?)"
    assert describe_exit(signal.SIGKILL, kill_sent=True) == "killed by SIGKILL"
    assert describe_exit(signal.SIGSEGV, kill_sent=False) == "killed by SIGSEGV"


def test_ready_line_round_trip_and_no_supervisor_means_no_op(monkeypatch):
    assert lifecycle.decode_ready_line(lifecycle.encode_ready_line()) is None
    info = {"endpoint": "tcp://127.0.0.1:10811"}
    assert lifecycle.decode_ready_line(lifecycle.encode_ready_line(info)) == info
    with pytest.raises(ValueError):
        lifecycle.decode_ready_line(b"readyish\n")
    with pytest.raises(ValueError):
        lifecycle.encode_ready_line({"blob": "x" * lifecycle.READY_LINE_BYTES_MAX})
    monkeypatch.delenv(lifecycle.READY_FD_ENV, raising=False)
    assert lifecycle.notify_ready(info) is False


def test_child_exits_when_its_expected_parent_is_not_its_parent(tmp_path):
    import subprocess
    code = "from rocketbox.cluster.supervision import lifecycle; lifecycle.install_parent_death_signal(1); print('survived')"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_DIR, capture_output=True,
                            text=True, timeout=DEADLINE_S)
    assert result.returncode == lifecycle.EXIT_PARENT_GONE
    assert "survived" not in result.stdout


# ------------------------------------------------------------------ in-process supervisor


def test_children_start_in_order_each_after_the_previous_is_ready(tmp_path, events, supervisors):
    specs = [
        child("c", events, "--endpoint", "tcp://127.0.0.1:10811", start_order=2, role="broker"),
        child("a", events, "--ready-delay-s", "0.3", start_order=0, role="namesrv"),
        child("b", events, start_order=1),
    ]
    sup = start(supervisors, specs, tmp_path)

    started = read_events(events)
    assert [(e["event"], e["name"]) for e in started] == [
        ("start", "a"), ("ready", "a"), ("start", "b"), ("ready", "b"), ("start", "c"), ("ready", "c"),
    ]
    assert all(e["ppid"] == os.getpid() for e in started)

    state = read_state_file(str(tmp_path))
    assert state["state"] == "ready" and state["supervisor_pid"] == os.getpid()
    assert state["heartbeat"] >= state["last_change"] >= state["started_at"]
    by_name = {c["name"]: c for c in state["children"]}
    assert [c["name"] for c in state["children"]] == ["a", "b", "c"]
    assert {name: c["pid"] for name, c in by_name.items()} == {
        e["name"]: e["pid"] for e in started if e["event"] == "start"}
    assert by_name["c"]["endpoint"] == "tcp://127.0.0.1:10811"
    assert by_name["c"]["role"] == "broker" and by_name["c"]["group"] == "c"
    assert all(c["state"] == "running" and c["restarts"] == 0 for c in state["children"])
    assert by_name["a"]["log_path"] == str(tmp_path / "logs" / "a.log")

    pids = [c["pid"] for c in state["children"]]
    sup.stop()
    assert names_of(read_events(events), "stop") == ["c", "b", "a"]
    assert all(process_gone(pid) for pid in pids)
    final = read_state_file(str(tmp_path))
    assert final["state"] == "stopped"
    assert all(c["pid"] is None and c["state"] == "stopped" for c in final["children"])


def test_killed_child_restarts_with_doubling_backoff(tmp_path, events, supervisors):
    sup = start(supervisors, [child("a", events, backoff_initial_s=0.2)], tmp_path)

    for expected_delay_s, restarts in ((0.2, 1), (0.4, 2)):
        old_pid = sup.child_pid("a")
        killed_at = time.time()
        os.kill(old_pid, signal.SIGKILL)
        assert sup.run_until(lambda: running(sup, "a", other_than_pid=old_pid), DEADLINE_S)
        stats = sup.statistics()["a"]
        assert stats.restarts == restarts
        assert stats.started_at - killed_at >= expected_delay_s - 0.01
        assert stats.last_exit == "killed by SIGKILL (perhaps out of memory?)"
    assert read_state_file(str(tmp_path))["children"][0]["restarts"] == 2


def test_ready_notice_to_a_waiter_that_left_is_not_an_error(monkeypatch):
    """spawn_detached returns as soon as cluster.json says ready and closes its end of the pipe;
    the supervisor's own notice after that must not raise (it killed the cluster: test_cli flake)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    monkeypatch.setenv(lifecycle.READY_FD_ENV, str(write_end))
    assert lifecycle.notify_ready({"pid": 1}) is True


def test_a_role_change_exit_restarts_at_once_without_backoff(tmp_path, events, supervisors):
    sup = start(supervisors, [child("a", events, "--exit-on-usr1", str(lifecycle.EXIT_ROLE_CHANGED),
                                    backoff_initial_s=60.0, backoff_max_s=60.0)], tmp_path)
    for restarts in (1, 2):
        old_pid = sup.child_pid("a")
        os.kill(old_pid, signal.SIGUSR1)
        # Back within the deadline, far below the 60 s back-off a crash would wait.
        assert sup.run_until(lambda: running(sup, "a", other_than_pid=old_pid), 30.0)
        stats = sup.statistics()["a"]
        assert stats.restarts == restarts and stats.last_exit_code == lifecycle.EXIT_ROLE_CHANGED


def test_leader_death_restarts_its_group_in_order_and_worker_death_only_itself(
        tmp_path, events, supervisors):
    specs = [
        child("namesrv", events),
        child("broker", events, group="broker-a", leader=True, start_order=1),
        child("flush", events, group="broker-a", start_order=2),
        child("reput", events, group="broker-a", start_order=3),
    ]
    sup = start(supervisors, specs, tmp_path)
    pids = {name: sup.child_pid(name) for name in ("namesrv", "broker", "flush", "reput")}

    # A worker dies: only it comes back.
    os.kill(pids["reput"], signal.SIGKILL)
    assert sup.run_until(lambda: running(sup, "reput", other_than_pid=pids["reput"]), DEADLINE_S)
    for name in ("namesrv", "broker", "flush"):
        assert sup.child_pid(name) == pids[name]
    pids["reput"] = sup.child_pid("reput")

    # The leader dies: the group goes down and comes back in start order.
    mark = len(read_events(events))
    os.kill(pids["broker"], signal.SIGKILL)
    group = ("broker", "flush", "reput")
    assert sup.run_until(
        lambda: all(running(sup, name, other_than_pid=pids[name]) for name in group), DEADLINE_S)
    assert sup.child_pid("namesrv") == pids["namesrv"]
    after = [(e["event"], e["name"]) for e in read_events(events)[mark:]]
    assert sorted(after[:2]) == [("stop", "flush"), ("stop", "reput")]  # no worker outlives the leader
    assert after[2:] == [("start", "broker"), ("ready", "broker"), ("start", "flush"),
                         ("ready", "flush"), ("start", "reput"), ("ready", "reput")]
    stats = sup.statistics()
    assert (stats["broker"].restarts, stats["flush"].restarts, stats["reput"].restarts) == (1, 1, 2)
    assert stats["namesrv"].restarts == 0
    assert "broker died" in stats["flush"].last_exit


def test_boot_error_during_start_stops_everything_with_the_reason(tmp_path, events, supervisors):
    # b after a is ready (a later start order): a's start is on record before b fails.
    specs = [child("a", events),
             child("b", events, "--exit-code", str(EXIT_BOOT_ERROR), role="broker", start_order=1)]
    sup = Supervisor(specs, str(tmp_path))
    supervisors.append(sup)
    with pytest.raises(BootError) as caught:
        sup.start()
    error = caught.value
    assert error.child_name == "b" and error.exit_code == EXIT_BOOT_ERROR
    assert "b (broker) failed to start: exit code 3 (boot error)" in str(error)
    assert "b: exiting with 3 as asked" in error.log_tail
    a_pid = next(e["pid"] for e in read_events(events) if e["name"] == "a")
    assert process_gone(a_pid)
    assert names_of(read_events(events), "stop") == ["a"]
    state = read_state_file(str(tmp_path))
    assert state["state"] == "failed" and "b (broker) failed to start" in state["reason"]


def test_child_not_ready_in_time_fails_start(tmp_path, events, supervisors):
    # Closing the pipe without a line is not readiness either; the deadline still holds.
    sup = Supervisor([child("mute", events, "--no-ready", "--close-ready-fd", ready_timeout_s=0.3)],
                     str(tmp_path))
    supervisors.append(sup)
    with pytest.raises(BootError) as caught:
        sup.start()
    # We sent that SIGKILL ourselves: no out-of-memory hint.
    assert caught.value.reason == "not ready within 0.3 s, then killed by SIGKILL"


def test_boot_error_on_restart_halts_instead_of_looping(tmp_path, events, supervisors):
    bad_config = tmp_path / "bad-config"
    specs = [child("namesrv", events), child("a", events, "--boot-error-if-exists", str(bad_config))]
    sup = start(supervisors, specs, tmp_path)
    pids = [sup.child_pid("namesrv"), sup.child_pid("a")]
    bad_config.touch()
    os.kill(pids[1], signal.SIGKILL)
    assert sup.run_until(lambda: sup.halt_reason is not None, DEADLINE_S)
    assert sup.run_forever() == EXIT_BOOT_ERROR
    assert "a failed to boot (exit code 3 (boot error))" in sup.halt_reason
    assert "bad config" in sup.halt_reason
    assert sup.statistics()["a"].restarts == 1  # one attempt, no loop
    assert all(process_gone(pid) for pid in pids)
    state = read_state_file(str(tmp_path))
    assert state["state"] == "failed" and state["reason"] == sup.halt_reason


def test_sigterm_stops_children_in_reverse_order_and_kills_stragglers(tmp_path, events, supervisors):
    specs = [
        child("a", events),
        child("hung", events, "--ignore-sigterm", stop_timeout_s=0.3),
        child("c", events),
    ]
    handler_before = signal.getsignal(signal.SIGTERM)
    sup = start(supervisors, specs, tmp_path)
    pids = [sup.child_pid(name) for name in ("a", "hung", "c")]
    os.kill(os.getpid(), signal.SIGTERM)  # our handler only enqueues it
    assert sup.run_forever() == EXIT_OK
    assert names_of(read_events(events), "stop") == ["c", "a"]
    assert sup.statistics()["hung"].last_exit == "killed by SIGKILL"  # we sent it: no OOM hint
    assert all(process_gone(pid) for pid in pids)
    assert read_state_file(str(tmp_path))["state"] == "stopped"
    assert signal.getsignal(signal.SIGTERM) is handler_before  # handlers restored


def test_a_callers_own_step_loop_ends_once_stop_is_requested(tmp_path, events, supervisors):
    sup = start(supervisors, [child("a", events), child("b", events)], tmp_path)
    sup.request_stop()
    turns = 0
    while sup.state not in ("stopped", "failed"):  # how `cluster up`'s live view drives it
        sup.step(0.5)
        turns += 1
    assert turns == 1
    assert names_of(read_events(events), "stop") == ["b", "a"]


def test_second_supervisor_on_the_same_data_dir_is_refused(tmp_path, events, supervisors):
    start(supervisors, [child("a", events)], tmp_path)
    with pytest.raises(SupervisorError, match="another supervisor"):
        Supervisor([child("b", events)], str(tmp_path)).start()


def test_supervisor_driven_from_another_thread_polls_instead_of_signals(tmp_path, events):
    outcome: dict = {}

    def drive() -> None:
        # The thread must outlive the children: their death signal follows it.
        sup = Supervisor([child("a", events)], str(tmp_path))
        sup.start()
        try:
            old_pid = sup.child_pid("a")
            os.kill(old_pid, signal.SIGKILL)
            outcome["restarted"] = sup.run_until(lambda: running(sup, "a", other_than_pid=old_pid),
                                                 DEADLINE_S)
            outcome["pid"] = sup.child_pid("a")
        finally:
            sup.stop()

    thread = threading.Thread(target=drive)
    thread.start()
    thread.join(DEADLINE_S * 2)
    assert not thread.is_alive()
    assert outcome["restarted"] and process_gone(outcome["pid"])


# ------------------------------------------------------------------ supervisor as its own process


def supervisor_argv(tmp_path: Path, specs: list[ChildSpec]) -> list[str]:
    specs_path = tmp_path / "children.json"
    specs_path.write_text(json.dumps([s.to_dict() for s in specs]))
    return [sys.executable, "-m", "rocketbox.cluster.procs.supervisor", "--data-dir", str(tmp_path),
            "--specs", str(specs_path)]


def detached_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_DIR)}


def reap(pid: int, timeout_s: float = DEADLINE_S) -> int | None:
    """Exit code of our exited child ``pid`` (None if something else reaped it first)."""
    result: list[int] = []

    def reaped() -> bool:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            result.append(None)
            return True
        if done:
            result.append(os.waitstatus_to_exitcode(status))
        return bool(done)

    assert wait_for(reaped, timeout_s), f"supervisor {pid} did not exit"
    return result[0]


def test_sigkilled_supervisor_leaves_no_orphans(tmp_path, events):
    specs = [child("a", events), child("b", events, group="g", leader=True), child("c", events, group="g")]
    supervisor_pid = spawn_detached(supervisor_argv(tmp_path, specs), str(tmp_path), DEADLINE_S,
                                    env=detached_env())
    state = read_state_file(str(tmp_path))
    assert state["supervisor_pid"] == supervisor_pid and state["state"] == "ready"
    child_pids = [c["pid"] for c in state["children"]]
    assert all(psutil.Process(pid).ppid() == supervisor_pid for pid in child_pids)
    assert os.getsid(supervisor_pid) == supervisor_pid  # detached: its own session

    os.kill(supervisor_pid, signal.SIGKILL)
    assert reap(supervisor_pid) in (-signal.SIGKILL, None)
    assert wait_for(lambda: all(process_gone(pid) for pid in child_pids))
    # The death signal (not the slower ppid poll) is what stopped them.
    assert sorted(names_of(read_events(events), "stop")) == ["a", "b", "c"]


def test_detached_supervisor_stops_cluster_on_sigterm(tmp_path, events):
    specs = [child("a", events), child("b", events)]
    supervisor_pid = spawn_detached(supervisor_argv(tmp_path, specs), str(tmp_path), DEADLINE_S,
                                    env=detached_env())
    child_pids = [c["pid"] for c in read_state_file(str(tmp_path))["children"]]
    os.kill(supervisor_pid, signal.SIGTERM)  # what `cluster down` does
    assert reap(supervisor_pid) in (EXIT_OK, None)
    assert names_of(read_events(events), "stop") == ["b", "a"]
    assert all(process_gone(pid) for pid in child_pids)
    final = read_state_file(str(tmp_path))
    assert final["state"] == "stopped" and final["supervisor_pid"] == supervisor_pid
    log_text = (tmp_path / "logs" / "supervisor.log").read_text()
    assert "SIGTERM received: stopping the cluster" in log_text


def test_spawn_detached_raises_with_the_log_tail_when_boot_fails(tmp_path, events):
    specs = [child("a", events), child("bad", events, "--exit-code", str(EXIT_BOOT_ERROR))]
    with pytest.raises(SupervisorError) as caught:
        spawn_detached(supervisor_argv(tmp_path, specs), str(tmp_path), DEADLINE_S, env=detached_env())
    message = str(caught.value)
    assert "exited before it was ready (exit code 3 (boot error))" in message
    assert "bad failed to start: exit code 3 (boot error)" in message
    assert read_state_file(str(tmp_path))["state"] == "failed"
    assert (tmp_path / STATE_FILE_NAME).exists()
