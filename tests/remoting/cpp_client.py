"""RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4, in ``.venv-rocketmq4``) as a child process.

``make real-clients`` (part of ``make test``) builds that venv; where it could not (no PyPI),
the tests that need the client skip and say so. Each run gets a HOME of its own: the client
always writes its logs to ``$HOME/logs/rocketmq-cpp/``.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import threading
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CPP_PYTHON = REPO / ".venv-rocketmq4" / "bin" / "python"
DRIVER = pathlib.Path(__file__).with_name("cpp_driver.py")


def require_cpp_client() -> None:
    if not CPP_PYTHON.exists():
        pytest.skip(f"RocketMQ's C++ client is not installed ({CPP_PYTHON} missing: `make real-clients` "
                    f"installs PyPI rocketmq==0.4.4)")
    probe = subprocess.run([str(CPP_PYTHON), "-c", "import rocketmq.client"], capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"RocketMQ's C++ client does not load: {probe.stderr.strip()[-300:]}")


class CppClient:
    """One driver process; its JSON lines collected as they come."""

    def __init__(self, command: str, spec: dict, home: pathlib.Path):
        home.mkdir(parents=True, exist_ok=True)
        self.lines: list[dict] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen([str(CPP_PYTHON), str(DRIVER), command, json.dumps(spec)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "HOME": str(home)}, cwd=str(home))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.strip()
            if line.startswith("{"):
                with self._lock:
                    self.lines.append(json.loads(line))

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.lines)

    def wait_for(self, predicate, timeout_s: float, what: str) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            lines = self.snapshot()
            if predicate(lines):
                return lines
            if self.process.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"C++ client: no {what} within {timeout_s} s; lines {self.snapshot()[-5:]}; "
                             f"stderr {self.process.stderr.read()[-2000:] if self.process.stderr else ''}")

    def finish(self, timeout_s: float) -> list[dict]:
        """Every line, once the driver said it is done."""
        lines = self.wait_for(lambda ls: any("done" in line for line in ls), timeout_s, "end")
        done = next(line for line in lines if "done" in line)
        assert done["done"], f"C++ client failed: {done}"
        self.process.wait(30)
        return [line for line in lines if "done" not in line and "started" not in line]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def run_cpp(command: str, spec: dict, home: pathlib.Path, timeout_s: float = 120) -> list[dict]:
    return CppClient(command, spec, home).finish(timeout_s)


def sent_ok(results: list[dict]) -> list[dict]:
    """The sends the broker acknowledged SEND_OK (status 0)."""
    return [r for r in results if r.get("status") == 0]
