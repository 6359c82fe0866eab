"""RocketMQ 5's Python client (PyPI ``rocketmq-python-client`` 5.1.2, in ``.venv-rocketmq5``) as a
child process (``grpc_driver.py``).

``make real-clients`` (part of ``make test``) builds that venv; where it could not (no PyPI), the
tests that need the client skip and say so. Each run gets a HOME of its own: the client writes its
log to ``$HOME/logs/rocketmq_python/``.
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
GRPC_PYTHON = REPO / ".venv-rocketmq5" / "bin" / "python"
DRIVER = pathlib.Path(__file__).with_name("grpc_driver.py")


def require_grpc_client() -> None:
    if not GRPC_PYTHON.exists():
        pytest.skip(f"RocketMQ 5's Python client is not installed ({GRPC_PYTHON} missing: `make real-clients` "
                    f"installs PyPI rocketmq-python-client==5.1.2)")
    probe = subprocess.run([str(GRPC_PYTHON), "-c", "import rocketmq; rocketmq.Producer"], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "HOME": "/tmp"})
    if probe.returncode != 0:
        pytest.skip(f"RocketMQ 5's Python client does not load: {probe.stderr.strip()[-300:]}")


class GrpcClient:
    """One driver process; its JSON lines collected as they come."""

    def __init__(self, command: str, spec: dict, home: pathlib.Path):
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.lines: list[dict] = []
        self._lock = threading.Lock()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.process = subprocess.Popen([str(GRPC_PYTHON), str(DRIVER), command, json.dumps(spec)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env={**env, "HOME": str(home)}, cwd=str(home))
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
        raise AssertionError(f"gRPC client: no {what} within {timeout_s} s; lines {self.snapshot()[-5:]}; "
                             f"stderr {self.process.stderr.read()[-2000:] if self.process.stderr else ''}; "
                             f"client log {self.client_log()[-2000:]}")

    def client_log(self) -> str:
        path = self.home / "logs" / "rocketmq_python" / "rocketmq_client.log"
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def finish(self, timeout_s: float) -> list[dict]:
        """Every event line, once the driver said it is done (and succeeded)."""
        lines = self.wait_for(lambda ls: any("done" in line for line in ls), timeout_s, "end")
        done = next(line for line in lines if "done" in line)
        assert done["done"], f"gRPC client failed: {done}; client log {self.client_log()[-2000:]}"
        self.process.wait(30)
        return [line for line in lines if "done" not in line and "started" not in line]

    def close_stdin(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def run_grpc(command: str, spec: dict, home: pathlib.Path, timeout_s: float = 120) -> list[dict]:
    client = GrpcClient(command, spec, home)
    client.close_stdin()
    return client.finish(timeout_s)


def received(lines: list[dict]) -> list[dict]:
    return [line["received"] for line in lines if "received" in line]


def sent(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line.get("sent")]


def statuses(lines: list[dict], step: str) -> list[dict]:
    """The statuses a raw step's responses carried (a stream answers several responses)."""
    for line in lines:
        if line.get("step") == step:
            if "grpc_error" in line:
                return [{"grpc_error": line["grpc_error"]}]
            return [r["status"] for r in line.get("responses", []) if "status" in r]
    raise AssertionError(f"no step {step} in {lines}")
