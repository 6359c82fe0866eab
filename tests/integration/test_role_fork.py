"""The supervisor forks Python roles from itself (``supervision/role_fork.py``) instead of executing a
fresh interpreter: what the child finds must be what an exec gave it. Both ways run the same role
(``tests/forked_role.py``) through a real supervisor process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
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
