"""Apache RocketMQ 4.9.8 as a peer: its NameServer and one broker, measured through the remoting door
by the same RocketMQ C++ client as RocketBox's remoting row (perf/door_rows.py), so the two rows are
the same client and the same measures.

Apache RocketMQ is in no package registry here: a developer builds it from its published source
(tests/java/apache.py says how it is used by the Java-client tests). Where it is, in order:

1. ``$ROCKETBOX_APACHE_ROCKETMQ``, a directory holding ``server.classpath`` (one line: the jars of
   the NameServer and the broker, ``:``-separated);
2. ``../apache`` beside this checkout.

Nothing of it is copied into the repository: at run time the peer writes its own namesrv.conf,
broker.conf and logback files into its temporary directory (ASYNC_MASTER, ASYNC_FLUSH, small
heaps, 128 MB CommitLog files, a store under that directory) and starts both JVMs in process
groups of their own on free 127.0.0.1 ports; it kills the groups when done. Apache 4.9.8's netty
servers have no bind-address setting and listen on every interface; every client here connects
to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager

from rocketbox.cluster.topology import free_ports

APACHE_ENV = "ROCKETBOX_APACHE_ROCKETMQ"
REPO = pathlib.Path(__file__).resolve().parents[2]
READY_S_MAX = 60.0
STOP_S_MAX = 10.0
# Java 17 and RocketMQ 4.9.8's store: it reaches into sun.nio.ch.DirectBuffer and the JDK's buffer cleaner.
JDK17_OPENS = ("--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/java.nio=ALL-UNNAMED",
               "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
               "--add-opens", "java.base/java.lang=ALL-UNNAMED")
NAMESRV_HEAP = ("-Xms128m", "-Xmx256m", "-Xmn64m")
BROKER_HEAP = ("-Xms256m", "-Xmx512m", "-Xmn128m", "-XX:MaxDirectMemorySize=512m")
BOOT_SUCCESS = b"boot success"
LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level %logger{{32}} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/></root>
</configuration>
"""


def apache_home(env: dict | None = None, repo: pathlib.Path = REPO) -> pathlib.Path | None:
    """The first of ``$ROCKETBOX_APACHE_ROCKETMQ`` and ``<repo>/../apache`` holding ``server.classpath``."""
    env = os.environ if env is None else env
    for candidate in (env.get(APACHE_ENV), repo.parent / "apache"):
        if candidate and (pathlib.Path(candidate) / "server.classpath").is_file():
            return pathlib.Path(candidate)
    return None


def missing_reason(env: dict | None = None, repo: pathlib.Path = REPO, java: str | None = None) -> str | None:
    """Why Apache RocketMQ cannot be started here, or None."""
    java = java if java is not None else shutil.which("java")
    if not java:
        return "no java on PATH (Apache RocketMQ 4.9.8 needs Java 17)"
    if apache_home(env, repo) is None:
        return (f"Apache RocketMQ is not built here: set ${APACHE_ENV} to a directory with server.classpath, "
                f"or put it at {repo.parent / 'apache'} (perf/peers/apache_rocketmq.py)")
    return None


def namesrv_conf(port: int, home: str) -> str:
    return f"listenPort={port}\nkvConfigPath={home}/namesrv/kvConfig.json\nconfigStorePath={home}/namesrv.conf\n"


def broker_conf(port: int, ha_port: int, namesrv_port: int, home: str) -> str:
    """One ASYNC_MASTER broker with async flush; topics made on first send (as RocketBox's remoting door)."""
    store = f"{home}/store"
    return "\n".join([
        "brokerClusterName=DefaultCluster", "brokerName=broker-a", "brokerId=0",
        "brokerRole=ASYNC_MASTER", "flushDiskType=ASYNC_FLUSH",
        "brokerIP1=127.0.0.1", "brokerIP2=127.0.0.1", f"namesrvAddr=127.0.0.1:{namesrv_port}",
        f"listenPort={port}", f"haListenPort={ha_port}",
        "autoCreateTopicEnable=true", "autoCreateSubscriptionGroup=true",
        f"storePathRootDir={store}", f"storePathCommitLog={store}/commitlog",
        "mappedFileSizeCommitLog=134217728", "warmMapedFileEnable=false", "traceTopicEnable=false", "",
    ])


def broker_ports(attempts: int = 50) -> tuple[int, int]:
    """(listen port, HA port), both free and listen port - 2 free too: the broker opens its "fast"
    (VIP) channel there."""
    for _ in range(attempts):
        port, ha_port = free_ports(2)
        if port - 2 >= 1024 and port - 2 != ha_port and _port_free(port - 2):
            return port, ha_port
    raise RuntimeError(f"no free broker port with port - 2 free in {attempts} tries")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _log_tail(path: str) -> str:
    with open(path, "rb") as f:
        return f.read()[-1500:].decode(errors="replace")


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process group (the JVM and anything it started), then SIGKILL after ``STOP_S_MAX``."""
    if process.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(STOP_S_MAX)
            return
        except subprocess.TimeoutExpired:
            continue


class ApacheRocketMQ:
    """The peer: ``missing()`` says why it cannot run; ``server(tmp)`` yields the NameServer's address."""

    name = "apache_rocketmq"
    label = "Apache RocketMQ"

    def missing(self) -> str | None:
        return missing_reason()

    def describe(self) -> str:
        home = apache_home()
        return (f"Apache RocketMQ from {home} (4.9.8 where built as tests/java/ expects), one ASYNC_MASTER broker, "
                f"async flush, heaps {' '.join(NAMESRV_HEAP)} / {' '.join(BROKER_HEAP)}")

    def _start(self, main_class: str, conf: str, heap: tuple, home: str, log_name: str) -> subprocess.Popen:
        classpath = (apache_home() / "server.classpath").read_text().strip()
        argv = [shutil.which("java"), "-server", *heap, *JDK17_OPENS, f"-Duser.home={home}",
                f"-Drocketmq.client.logRoot={home}/logs", "-Djava.net.preferIPv4Stack=true", "-XX:+UseG1GC",
                "-cp", f"{home}/conf:{classpath}", main_class, "-c", conf]
        env = {**os.environ, "ROCKETMQ_HOME": home}
        with open(os.path.join(home, log_name), "wb") as log:
            return subprocess.Popen(argv, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    @contextmanager
    def server(self, tmp: str):
        home = os.path.join(tmp, self.name)
        os.makedirs(os.path.join(home, "conf"), exist_ok=True)
        for role in ("namesrv", "broker", "tools"):
            pathlib.Path(home, "conf", f"logback_{role}.xml").write_text(LOGBACK.format(log=f"{home}/{role}.log"))
        namesrv_port = free_ports(1)[0]
        port, ha_port = broker_ports()
        pathlib.Path(home, "namesrv.conf").write_text(namesrv_conf(namesrv_port, home))
        pathlib.Path(home, "broker.conf").write_text(broker_conf(port, ha_port, namesrv_port, home))
        processes = []
        try:
            processes.append(self._start("org.apache.rocketmq.namesrv.NamesrvStartup", f"{home}/namesrv.conf",
                                         NAMESRV_HEAP, home, "namesrv.out"))
            self._wait(processes[0], f"{home}/namesrv.out", lambda: _accepts(namesrv_port))
            processes.append(self._start("org.apache.rocketmq.broker.BrokerStartup", f"{home}/broker.conf",
                                         BROKER_HEAP, home, "broker.out"))
            self._wait(processes[1], f"{home}/broker.out",
                       lambda: BOOT_SUCCESS in pathlib.Path(home, "broker.out").read_bytes())
            yield f"127.0.0.1:{namesrv_port}"
        finally:
            for process in reversed(processes):
                stop_group(process)

    @staticmethod
    def _wait(process: subprocess.Popen, log_path: str, ready) -> None:
        deadline = time.monotonic() + READY_S_MAX
        while not ready():
            if process.poll() is not None or time.monotonic() >= deadline:
                state = f"exited {process.returncode}" if process.poll() is not None else "not ready"
                raise RuntimeError(f"Apache RocketMQ {state} within {READY_S_MAX} s: {_log_tail(log_path)}")
            time.sleep(0.05)
