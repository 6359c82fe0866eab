"""Apache RocketMQ's own Java client and mqadmin, as the judges of compatibility.

They are in no package registry here: a developer builds Apache RocketMQ 4.9.8 from its published
source on their machine (javac and Debian's Java libraries) and points the tests at it. Nothing of
it is in this repository. The place, in order:

1. ``$ROCKETBOX_APACHE_ROCKETMQ``, a directory holding ``client.classpath`` (one line: the jars a
   Java client program needs, ``:``-separated) and ``bin/mqadmin`` (Apache's admin tool launcher);
2. ``../apache`` beside this checkout (``<checkout>/../apache``).

Where neither is there, or ``javac`` is missing, the tests that need them skip and print why. Our
own Java programs (``tests/java/programs/*.java``, the scenarios) are compiled against that
classpath once per test session into a temporary directory.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = pathlib.Path(__file__).with_name("programs")
APACHE_ENV = "ROCKETBOX_APACHE_ROCKETMQ"


def apache_home() -> pathlib.Path | None:
    for candidate in (os.environ.get(APACHE_ENV), REPO.parent / "apache"):
        if candidate and (pathlib.Path(candidate) / "client.classpath").is_file():
            return pathlib.Path(candidate)
    return None


def missing_reason() -> str | None:
    """Why the Java client cannot be used here, or None."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no javac/java on PATH (Java 17 is needed for Apache RocketMQ's Java client)"
    if apache_home() is None:
        return (f"Apache RocketMQ's Java client is not built here: set ${APACHE_ENV} to a directory with "
                f"client.classpath and bin/mqadmin, or put it at {REPO.parent / 'apache'} (tests/java/apache.py)")
    return None


def require_java_client() -> pathlib.Path:
    reason = missing_reason()
    if reason:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    return apache_home()


def client_classpath() -> str:
    return (apache_home() / "client.classpath").read_text().strip()


def compile_programs(out_dir: pathlib.Path) -> pathlib.Path:
    """javac every program in tests/java/programs into ``out_dir``; its class directory."""
    sources = sorted(str(p) for p in PROGRAMS.glob("*.java"))
    out_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", client_classpath(), "-d", str(out_dir),
                             *sources], capture_output=True, text=True, timeout=300)
    if result.returncode:
        raise RuntimeError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    return out_dir


def java_env(home: pathlib.Path) -> dict:
    """A JVM environment whose every ``~/...`` path (client logs, local offsets) is under ``home``."""
    env = dict(os.environ, HOME=str(home))
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env


def _run(command: list[str], home: pathlib.Path, timeout_s: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """The finished process; one past its time is killed and answered with returncode None and
    what it printed so far, so a test's message shows where it hung."""
    try:
        # In ``home``: mqadmin consumerStatus writes a file a consumer into its working directory.
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              env={**java_env(home), **(env or {})}, cwd=home)
    except subprocess.TimeoutExpired as exc:
        def text(data):
            return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
        return subprocess.CompletedProcess(command, None, text(exc.stdout),
                                           text(exc.stderr) + f"\n[killed after {timeout_s} s]")


def java_command(classes: pathlib.Path, main_class: str, *args: str, home: pathlib.Path,
                 jvm_options: tuple[str, ...] = ()) -> list[str]:
    """The command line of one of our Java programs, against Apache's client jars."""
    home.mkdir(parents=True, exist_ok=True)
    return ["java", "-Xms32m", "-Xmx256m", f"-Duser.home={home}", f"-Drocketmq.client.logRoot={home / 'logs'}",
            "-Djava.net.preferIPv4Stack=true", *jvm_options, "-cp", f"{classes}:{client_classpath()}", main_class, *args]


def run_java(classes: pathlib.Path, main_class: str, *args: str, home: pathlib.Path, timeout_s: float = 120,
             jvm_options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """One of our Java programs, against Apache's client jars; the finished process (stdout, stderr)."""
    return _run(java_command(classes, main_class, *args, home=home, jvm_options=jvm_options), home, timeout_s)


def run_mqadmin(*args: str, home: pathlib.Path, timeout_s: float = 120,
                jvm_options: str = "") -> subprocess.CompletedProcess:
    """Apache's mqadmin with ``args`` (``-n host:port`` among them: the remoting NameServer);
    ``jvm_options`` go to the launcher's ``JAVA_OPT_EXT`` (its extra JVM flags)."""
    home.mkdir(parents=True, exist_ok=True)
    return _run([str(apache_home() / "bin" / "mqadmin"), *args], home, timeout_s,
                {"JAVA_OPT_EXT": jvm_options} if jvm_options else None)
