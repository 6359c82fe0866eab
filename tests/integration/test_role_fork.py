"""The supervisor forks Python roles from itself (``supervision/role_fork.py``) instead of executing a
fresh interpreter: what the child finds must be what an exec gave it. Both ways run the same role
(``tests/forked_role.py``) through a real supervisor process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rocketbox.cluster.supervision import lifecycle
from rocketbox.cluster.supervision.role_fork import FORK_ROLES_ENV
from rocketbox.cluster.supervision.run_state import LOCK_FILE_NAME, read_state_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE_S = 30.0

pytestmark = pytest.mark.timeout(120)


def wait_until(condition, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "executed"])
def test_a_role_finds_what_an_exec_gave_it(tmp_path, forked):
    data_dir, report = tmp_path / "data", tmp_path / "report.json"
    workdir = tmp_path / "work"
    workdir.mkdir()
    specs = tmp_path / "children.json"
    specs.write_text(json.dumps([{"name": "role", "module": "tests.forked_role", "args": [str(report)],
                                  "env": {"FORKED_ROLE_SETTING": "from the spec"}, "cwd": str(workdir)}]))
    env = dict(os.environ, PYTHONPATH=REPO, **{FORK_ROLES_ENV: "1" if forked else "0"})
    env.pop("FORKED_ROLE_SETTING", None)
    with open(tmp_path / "supervisor.out", "wb") as out:
        supervisor = subprocess.Popen(
            lifecycle.python_module_command("rocketbox.cluster.procs.supervisor", "--data-dir", str(data_dir),
                                            "--specs", str(specs)),
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_until(lambda: (read_state_file(str(data_dir)) or {}).get("state") == "ready", "the supervisor")
        found = json.loads(report.read_text())
        assert found["main"] == "__main__" and found["argv"] == [str(report)]
        assert found["ppid"] == supervisor.pid
        assert found["pgid"] == found["pid"], "its own process group: Ctrl-C reaches the supervisor only"
        assert found["umask"] == 0o077
        assert found["cwd"] == str(workdir)
        assert found["env"]["FORKED_ROLE_SETTING"] == "from the spec"
        assert found["env"][lifecycle.CHILD_NAME_ENV] == "role"
        assert found["env"][lifecycle.PARENT_PID_ENV] == str(supervisor.pid)
        held = {fd: target for fd, target in found["fds"].items() if int(fd) > 2}
        assert not any(target.endswith(LOCK_FILE_NAME) for target in held.values()), held
        # Beyond stdio: its readiness pipe, and what the interpreter opened itself (no socket,
        # no log file, no pipe of the supervisor's).
        assert {fd for fd, target in held.items() if target.startswith("pipe:")} == \
            {found["env"][lifecycle.READY_FD_ENV]}, held
        assert not any(target.startswith("socket:") for target in held.values()), held
        log = (data_dir / "logs" / "role.log").read_text()
        assert "forked role says hello" in log and "supervisor[" not in log
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=DEADLINE_S)
    assert supervisor.returncode == 0
    wait_until(lambda: (tmp_path / "report.json.exit").exists(), "the role's atexit")
    assert (tmp_path / "report.json.exit").read_text() == "atexit ran\n"
    said = (tmp_path / "supervisor.out").read_text()
    assert ("started role (pid %d, forked)" % found["pid"] in said) == forked, said


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "executed"])
def test_cluster_up_detach_forks_its_supervisor_into_a_session_of_its_own(tmp_path, forked):
    """``cluster up --detach`` forks the supervisor from the command (no fresh interpreter: perf/RESULTS.md
    "The cluster command's critical path"); ``ROCKETBOX_FORK_ROLES=0`` executes it. Either way it leads
    a session of its own, outlives the command, holds none of its descriptors but its log, and it and
    its roles carry their titles."""
    from rocketbox.cluster.topology import free_ports
    from rocketbox.perf.start_roles import PORT_FLAGS
    data_dir = tmp_path / "data"
    env = dict(os.environ, **{FORK_ROLES_ENV: "1" if forked else "0"})
    base = lifecycle.python_module_command("rocketbox.cluster.cli", "--data-dir", str(data_dir))
    # Every port free: RocketMQ's default remoting ports may be another cluster's on this machine.
    ports = [arg for flag, port in zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))) for arg in (flag, str(port))]
    up = subprocess.run(base + ["up", "--detach", "--no-proxy", "--no-console", "--no-metrics", *ports],
                        capture_output=True, text=True, env=env, timeout=DEADLINE_S * 2, stdin=subprocess.DEVNULL)
    assert up.returncode == 0, up.stderr
    pid = read_state_file(str(data_dir))["supervisor_pid"]
    try:
        assert os.getsid(pid) == pid
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert f.read().rstrip(b"\0") == f"rocketbox: supervisor {data_dir}".encode()
        children = subprocess.run(["ps", "--ppid", str(pid), "-o", "args="], capture_output=True, text=True,
                                  timeout=DEADLINE_S).stdout.split("\n")
        assert {"rocketbox: namesrv-0", "rocketbox: broker-a", "rocketbox: broker-a flush"} <= set(children)
        held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert str(data_dir / "logs" / "supervisor.log") in held
        assert not any(target.startswith("socket:") for target in held), held
        said = (data_dir / "logs" / "supervisor.log").read_text()
        assert f"starting the supervisor ({'forked from' if forked else 'executed by'} pid" in said, said
    finally:
        down = subprocess.run(base + ["down"], capture_output=True, text=True, timeout=DEADLINE_S * 2,
                              stdin=subprocess.DEVNULL)
    assert down.returncode == 0, down.stderr
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), "the supervisor's exit")


def test_cluster_up_detach_leaves_without_tearing_its_interpreter_down(tmp_path):
    """The ``cluster`` program (``cli.run``) ends ``up --detach`` with ``os._exit`` once its banner is
    flushed: freeing the command's objects one by one (70-130 ms) was on its critical path, and the
    cluster runs on in its own session. A verb that may leave something to tidy (``down``) exits as
    an interpreter does, its exit handlers run."""
    from rocketbox.cluster.topology import free_ports
    program = ("import atexit, sys\n"
               "atexit.register(lambda: print('torn down', file=sys.stderr, flush=True))\n"
               "from rocketbox.cluster.cli import run\n"
               "run()\n")
    data_dir = tmp_path / "data"
    base = [sys.executable, "-c", program, "--data-dir", str(data_dir)]
    namesrv_port, broker_port = free_ports(2)
    up = subprocess.run(base + ["up", "--detach", "--no-proxy", "--no-console", "--no-metrics", "--no-remoting",
                                "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port)],
                        capture_output=True, text=True, timeout=DEADLINE_S * 2, stdin=subprocess.DEVNULL)
    pid = (read_state_file(str(data_dir)) or {}).get("supervisor_pid")
    down = subprocess.run(base + ["down"], capture_output=True, text=True, timeout=DEADLINE_S * 2,
                          stdin=subprocess.DEVNULL)
    assert up.returncode == 0, up.stderr
    assert "RocketBox is up" in up.stdout and f"export ROCKETBOX_NAMESRV='127.0.0.1:{namesrv_port}'" in up.stdout
    assert "torn down" not in up.stderr, up.stderr
    assert down.returncode == 0 and "torn down" in down.stderr, down.stderr
    if pid:
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), "the supervisor's exit")
