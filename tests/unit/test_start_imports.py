"""What each process loads at start, checked in a fresh interpreter: the libraries a role or the
``cluster up`` command does not use unless configured for it stay unloaded (each costs start-up
CPU and resident memory in every process that loads it: perf/RESULTS.md "Start and footprint").
Deterministic: it reads ``sys.modules``, it times nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TIMEOUT_S = 60


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    program = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("role, never", [
    # The controller (Raft, Fernet), plain_acl.yml's YAML and TLS load only when configured.
    ("namesrv", {"pysyncobj", "cryptography", "yaml", "ssl"}),
    # OpenSSL (ssl, hashlib: ~4 MB resident) for TLS and the ACL guard only; the SQL92 parser with
    # the first SQL92 subscription.
    ("broker", {"yaml", "pysyncobj", "grpc", "google", "uvicorn", "starlette", "prometheus_client",
                "ssl", "hashlib", "hmac", "rocketbox.cluster.acl.guard", "rocketbox.cluster.filter.sql92_parser"}),
])
def test_a_role_loads_only_what_it_serves_with(role, never):
    modules = loaded_after(f"import rocketbox.cluster.procs.{role}\nimport rocketbox.cluster.{role}"
                           f"{'.service' if role == 'broker' else ''}")
    loaded = _roots(modules) | modules
    assert not never & loaded, f"{role} loads {sorted(never & loaded)}"


def test_what_the_supervisor_forks_every_server_role_and_worker_from_holds_no_openssl():
    """The supervisor's imports are in every child it forks (RSS counts each inherited page):
    OpenSSL's libcrypto, which hashlib loads, was ~4 MB of it and of each worker's."""
    loaded = _roots(loaded_after("from rocketbox.cluster.topology import SERVER_PRELOAD, BROKER_WORKER_ROLES\n"
                                 "import importlib\n"
                                 "for m in (*SERVER_PRELOAD, 'rocketbox.cluster.procs.supervisor',\n"
                                 "          *(f'rocketbox.cluster.procs.{r}' for r in BROKER_WORKER_ROLES)):\n"
                                 "    importlib.import_module(m)"))
    assert not {"ssl", "hashlib", "_hashlib", "hmac", "rich"} & loaded, sorted({"ssl", "hashlib", "hmac"} & loaded)


def test_the_proxy_loads_the_generated_protocol_without_the_rocketmq_client():
    """rocketmq-python-client's package __init__ loads its whole client (OpenTelemetry): three
    quarters of the proxy's imports. Deferred, it still runs when a test's code asks for the client."""
    loaded = loaded_after("import rocketbox.cluster.proxy.server")
    assert "rocketmq.grpc_protocol.service_pb2_grpc" in loaded
    assert not {"opentelemetry", "rocketmq.v5"} & (loaded | _roots(loaded))
    later = loaded_after("import sys\nimport rocketbox.cluster.proxy.protos\nimport rocketmq\n"
                         "from rocketmq import Producer\n"
                         "assert rocketmq.grpc_protocol is sys.modules['rocketmq.grpc_protocol']\n"
                         "assert rocketmq.TransactionResolution is not None")
    assert "rocketmq.v5.producer" in later


def test_the_cluster_command_starts_without_the_libraries_of_other_commands():
    """Even the full parser (``cluster --help``) loads no ZeroMQ, YAML, psutil or rich: they load only
    for the commands (and the moment: the banner once the supervisor is booting) that use them."""
    loaded = _roots(loaded_after("from rocketbox.cluster.cli import build_parser\nbuild_parser()"))
    assert not {"zmq", "yaml", "psutil", "rich", "cryptography"} & loaded


UP_UNTIL_SPAWN = """
from rocketbox.cluster.cli import build_parser, given_verb, up_config, up_settings
argv = ["--data-dir", "/nonexistent/rocketbox-test", "up", "--detach"]
args = build_parser(given_verb(argv)).parse_args(argv)
from rocketbox.cluster.cli.cluster_cmds import role_problem, topology_for_role
assert not (up_config.load(args) or up_settings.resolve(args) or role_problem(args))
from rocketbox.cluster.topology import child_specs, prepare_controller_secret
topology = topology_for_role(args)
prepare_controller_secret(topology)
child_specs(topology)
"""


def test_cluster_up_builds_only_its_own_parser_and_loads_no_tls_or_wire_protocol():
    """What ``cluster up`` runs before it spawns the supervisor (its critical path) loads no other
    verb's module, and neither TLS (ssl), the controller's secret (hmac) nor the wire protocol unless
    configured (perf/RESULTS.md "The cluster command's critical path")."""
    loaded = loaded_after(UP_UNTIL_SPAWN)
    other_verbs = {f"rocketbox.cluster.cli.{m}" for m in ("client_cmds", "admin_cmds", "mqadmin_cmds",
                                                             "mqadmin_more", "acl_cmds", "auth_cmds", "tls_cmds",
                                                             "config_cmds", "logs_cmds", "pause_cmds")}
    assert not other_verbs & loaded, sorted(other_verbs & loaded)
    assert not {"ssl", "hmac", "rocketbox.cluster.protocol", "rocketbox.cluster.cli.broker_roles"} & loaded


@pytest.mark.parametrize("modules", [
    ("rocketbox.cluster.proxy.server",),
    ("rocketbox.cluster.procs.web", "rocketbox.cluster.console.server", "rocketbox.cluster.metrics.exporter"),
])
def test_a_door_loads_the_acl_model_only_when_it_checks_accounts(modules):
    """The proxy's and the HTTP doors' account checks (the ACL file's model, its decisions: ~8-17 ms
    of each door's start) load with an ACL file or a door that asks for credentials, not before."""
    loaded = loaded_after("\n".join(f"import {m}" for m in modules))
    never = {"rocketbox.cluster.acl.model", "rocketbox.cluster.acl.decision", "rocketbox.cluster.acl.acl_file",
             "rocketbox.cluster.proxy.access"}
    assert not never & loaded, sorted(never & loaded)


def test_the_web_doors_load_prometheus_client_psutil_and_jinja2_at_their_first_request():
    """The web process is the last role ready in a ``cluster up``: prometheus-client (~50 ms, its
    exposition module's http.server, wsgiref, urllib) and psutil (~15 ms) load with the first scrape,
    Jinja2 (~25-35 ms) with the console's first page."""
    loaded = _roots(loaded_after("import rocketbox.cluster.procs.web, rocketbox.cluster.console.server\n"
                                 "import rocketbox.cluster.metrics.exporter"))
    assert not {"prometheus_client", "psutil", "wsgiref", "jinja2"} & loaded, \
        sorted({"prometheus_client", "psutil", "wsgiref", "jinja2"} & loaded)


def test_the_proxy_loads_its_native_grpc_front_only_when_configured():
    """``grpc_front = "native"`` is opt-in: its door and HTTP/2 helper load for it alone."""
    loaded = loaded_after("import rocketbox.cluster.procs.proxy, rocketbox.cluster.proxy.server")
    assert not {"rocketbox.cluster.proxy.native_door", "rocketbox.cluster._native.h2"} & loaded
