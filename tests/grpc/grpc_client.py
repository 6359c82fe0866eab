"""RocketMQ 5's Python client (PyPI ``rocketmq-python-client`` 5.1.2, in ``.venv-rocketmq5``) as a
child process (``grpc_driver.py``).

``make real-clients`` (part of ``make test``) builds that venv; where it could not (no PyPI), the
tests that need the client skip and say so. Each run gets a HOME of its own: the client writes its
log to ``$HOME/logs/rocketmq_python/``.
"""

from __future__ import annotations

import os
import pathlib


from tests.child_driver import DriverProcess, require_client

REPO = pathlib.Path(__file__).resolve().parents[2]
GRPC_PYTHON = REPO / ".venv-rocketmq5" / "bin" / "python"
DRIVER = pathlib.Path(__file__).with_name("grpc_driver.py")


def require_grpc_client() -> None:
    require_client(GRPC_PYTHON, "import rocketmq; rocketmq.Producer", "RocketMQ 5's Python client",
                   "rocketmq-python-client==5.1.2", env={**os.environ, "HOME": "/tmp"})


class GrpcClient(DriverProcess):
    label = "gRPC client"

    def __init__(self, command: str, spec: dict, home: pathlib.Path, env: dict[str, str] | None = None):
        env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}, **(env or {})}
        super().__init__(GRPC_PYTHON, DRIVER, command, spec, home, env)

    def client_log(self) -> str:
        path = self.home / "logs" / "rocketmq_python" / "rocketmq_client.log"
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def diagnostics(self) -> str:
        return f"; client log {self.client_log()[-2000:]}"


def run_grpc(command: str, spec: dict, home: pathlib.Path, timeout_s: float = 120,
             env: dict[str, str] | None = None) -> list[dict]:
    """``env``: more of the client's environment (TZ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, ...)."""
    client = GrpcClient(command, spec, home, env)
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
