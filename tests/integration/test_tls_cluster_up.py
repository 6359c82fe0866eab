"""``cluster tls`` and ``cluster up`` with TLS: the pair made in ``<data dir>/tls/`` serves every
remoting door when broker.conf says ``tls.server.mode=enforcing`` (our client trusting that
certificate sends and pulls; a plain one is turned away); the flags set every process's keys; and a
``--host`` other hosts reach, with access control but no TLS, is warned about once."""

from __future__ import annotations

import json
import os
import stat

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.testing import pull_until
from tests.cli_helpers import run_cli, up_on_free_ports
from tests.integration.test_acl_cluster_up import ACL

pytestmark = pytest.mark.timeout(240)


def _up_args(ports, *extra) -> tuple:
    namesrv, broker, metrics, namesrv_remoting, broker_remoting = ports
    return ("up", "--detach", "--namesrv-port", str(namesrv), "--broker-port", str(broker), "--metrics-port",
            str(metrics), "--namesrv-remoting-port", str(namesrv_remoting), "--broker-remoting-port",
            str(broker_remoting), "--no-proxy", "--no-console", "--commitlog-file-size-bytes", str(16 * 1024 * 1024),
            *extra)


def test_cluster_tls_then_broker_conf_enforcing_serves_tls_clients_only(tmp_path):
    data_dir = str(tmp_path / "up")
    made = run_cli("tls", "--host", "rocketbox.test", data_dir=data_dir).stdout
    cert, key = os.path.join(data_dir, "tls", "server.crt"), os.path.join(data_dir, "tls", "server.key")
    assert cert in made and stat.S_IMODE(os.stat(key).st_mode) == 0o600
    conf = tmp_path / "broker.conf"
    conf.write_text(f"tls.server.mode=enforcing\ntls.server.certPath={cert}\ntls.server.keyPath={key}\n")
    ports, _ = up_on_free_ports(5, lambda p: _up_args(p, "-c", str(conf)), data_dir=data_dir)
    try:
        endpoint = (f"tcp://127.0.0.1:{ports[3]}",)
        cfg = ClientConfig(namesrv_endpoints=endpoint, transport="remoting", tls_enable=True,
                           tls_trust_cert_path=cert, request_timeout_ms=5000)
        with Admin(config=cfg) as admin:
            admin.create_topic("UpTls", 2)
        with Producer("UpTlsPG", config=cfg) as producer:
            producer.send(Message("UpTls", b"over TLS"))
        with PullConsumer("UpTlsCG", config=cfg) as consumer:
            assert [m.body for m in pull_until(consumer, "UpTls", 1)] == [b"over TLS"]
        plain = ClientConfig(namesrv_endpoints=endpoint, transport="remoting", request_timeout_ms=2000)
        with pytest.raises(ClientError), Admin(config=plain) as admin:
            admin.create_topic("NeverMade", 1)
    finally:
        run_cli("down", data_dir=data_dir, check=False)


def test_the_flags_set_every_doors_tls_keys(tmp_path):
    shown = json.loads(run_cli("config", "show", "--tls-mode", "permissive", "--tls-cert", "/etc/rb/c.pem",
                               "--tls-key", "/etc/rb/k.pem", "--json", data_dir=str(tmp_path / "show")).stdout)
    for process, settings in shown.items():
        assert settings["tls.server.mode"] == "permissive", process
        assert settings["tls.server.certPath"] == "/etc/rb/c.pem", process


def test_a_reachable_host_with_access_control_and_no_tls_is_warned_about_once(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    # 10.77.0.1 is no address of this machine: up stops at its port check, after the warning.
    proc = run_cli(*_up_args((19871, 19811, 19870, 19876, 19911), "--host", "10.77.0.1", "--acl-file",
                             str(acl_file)), data_dir=str(tmp_path / "plain"), check=False)
    assert proc.stderr.count("signatures authenticate requests but do not encrypt them") == 1, proc.stderr
    assert "replayed as another request code" in proc.stderr
    run_cli("tls", data_dir=str(tmp_path / "tls"))
    proc = run_cli(*_up_args((19871, 19811, 19870, 19876, 19911), "--host", "10.77.0.1", "--acl-file",
                             str(acl_file), "--tls-mode", "enforcing"), data_dir=str(tmp_path / "tls"), check=False)
    assert "do not encrypt" not in proc.stderr and proc.returncode == 1, proc.stderr
