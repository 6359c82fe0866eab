"""RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4, in ``.venv-rocketmq4``) as a child process.

``make real-clients`` (part of ``make test``) builds that venv; where it could not (no PyPI),
the tests that need the client skip and say so. Each run gets a HOME of its own: the client
always writes its logs to ``$HOME/logs/rocketmq-cpp/``.
"""

from __future__ import annotations

import pathlib


from tests.child_driver import DriverProcess, require_client

REPO = pathlib.Path(__file__).resolve().parents[2]
CPP_PYTHON = REPO / ".venv-rocketmq4" / "bin" / "python"
DRIVER = pathlib.Path(__file__).with_name("cpp_driver.py")


def require_cpp_client() -> None:
    require_client(CPP_PYTHON, "import rocketmq.client", "RocketMQ's C++ client", "rocketmq==0.4.4")


class CppClient(DriverProcess):
    label = "C++ client"

    def __init__(self, command: str, spec: dict, home: pathlib.Path):
        super().__init__(CPP_PYTHON, DRIVER, command, spec, home)


def run_cpp(command: str, spec: dict, home: pathlib.Path, timeout_s: float = 120) -> list[dict]:
    return CppClient(command, spec, home).finish(timeout_s)


def sent_ok(results: list[dict]) -> list[dict]:
    """The sends the broker acknowledged SEND_OK (status 0)."""
    return [r for r in results if r.get("status") == 0]
