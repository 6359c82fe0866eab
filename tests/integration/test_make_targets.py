"""The Makefile's promises to a reader (README's first lines): make test can be narrowed, and make
browser never stops at a password prompt. Dry runs and stubbed commands: nothing is installed."""

from __future__ import annotations

import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_make_test_runs_what_tests_and_pytest_args_name():
    dry = subprocess.run(["make", "-n", "test", "TESTS=tests/unit/test_acl.py", "PYTEST_ARGS=-k signature"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    pytest_line = next(line for line in dry.stdout.splitlines() if "-m pytest" in line)
    assert pytest_line.split("-m pytest", 1)[1].split(";")[0].split()[-3:] == ["-k", "signature",
                                                                               "tests/unit/test_acl.py"]


def test_make_browser_does_not_ask_for_a_password(tmp_path):
    """Not root, chromium missing, sudo wanting a password: a reason on stderr, exit 0, no prompt."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, script in {"id": 'echo 1000', "sudo": 'echo "sudo: a password is required" >&2; exit 1',
                         "apt-get": 'echo "apt-get ran" >&2; exit 1'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{script}\n")
        (stubs / name).chmod(0o755)
    # A PATH without chromium: the stubs and the tools make's recipe needs, linked one by one.
    for tool in ("sh", "env", "make"):
        os.symlink(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip(),
                   stubs / tool)
    done = subprocess.run(["make", "browser"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, PATH=str(stubs)))
    assert done.returncode == 0, done.stderr
    assert "needs root" in done.stderr and "the browser tests will skip" in done.stderr
    assert "apt-get ran" not in done.stderr
