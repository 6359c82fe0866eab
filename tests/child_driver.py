"""A client driver run as a child process of its own venv (RocketMQ's C++ client, RocketMQ 5's Python
client): it prints one JSON object per line (``{"started": true}``, events, ``{"done": ...}`` last),
and the test reads them as they come."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import threading
import time

import pytest


def require_client(python: pathlib.Path, probe_code: str, name: str, package: str,
                   env: dict[str, str] | None = None) -> None:
    """Skip, saying why, unless ``python`` exists and imports the client (``probe_code``)."""
    if not python.exists():
        pytest.skip(f"{name} is not installed ({python} missing: `make real-clients` installs PyPI {package})")
    probe = subprocess.run([str(python), "-c", probe_code], capture_output=True, text=True, timeout=60, env=env)
    if probe.returncode != 0:
        pytest.skip(f"{name} does not load: {probe.stderr.strip()[-300:]}")


class DriverProcess:
    """One driver process; its JSON lines collected as they come. ``label`` names it in failures."""

    label = "client"

    def __init__(self, python: pathlib.Path, driver: pathlib.Path, command: str, spec: dict, home: pathlib.Path,
                 env: dict[str, str] | None = None):
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.lines: list[dict] = []
        self._lock = threading.Lock()
        env = dict(os.environ if env is None else env)
        self.process = subprocess.Popen([str(python), str(driver), command, json.dumps(spec)],
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

    def diagnostics(self) -> str:
        """More to say when it fails (a client's own log)."""
        return ""

    def wait_for(self, predicate, timeout_s: float, what: str) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            lines = self.snapshot()
            if predicate(lines):
                return lines
            if self.process.poll() is not None and not self._reader.is_alive():
                # Its last lines may have been read after the snapshot above: judge them too.
                lines = self.snapshot()
                if predicate(lines):
                    return lines
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"{self.label}: no {what} within {timeout_s} s; lines {self.snapshot()[-5:]}; "
                             f"stderr {self.process.stderr.read()[-2000:] if self.process.stderr else ''}"
                             f"{self.diagnostics()}")

    def finish(self, timeout_s: float) -> list[dict]:
        """Every event line, once the driver said it is done (and succeeded)."""
        lines = self.wait_for(lambda ls: any("done" in line for line in ls), timeout_s, "end")
        done = next(line for line in lines if "done" in line)
        assert done["done"], f"{self.label} failed: {done}{self.diagnostics()}"
        self.process.wait(30)
        return [line for line in lines if "done" not in line and "started" not in line]

    def say(self, line: str) -> None:
        """One line to the driver's stdin (a gate step's go)."""
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close_stdin(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
