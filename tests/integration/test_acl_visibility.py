"""What an operator sees of access control's refusals: the NameServer's counted in
``rocketbox_acl_refusals_total`` beside the brokers' (``node_type`` tells them apart), scraped over
HTTP after a real client was refused at the NameServer; and a flood of refusals logged as a burst
plus the count held back, said even when the cluster stops within the flood's window."""

from __future__ import annotations

import os
import re
import urllib.request

import pytest
import zmq
from prometheus_client.parser import text_string_to_metric_families

from rocketbox.cluster.acl.curve import CLIENTS_DIR, curve_dir, make_key_pair
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.client.admin_requests import put_kv_config
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.testing import LocalCluster

pytestmark = pytest.mark.timeout(180)

ACL = """
accounts:
  - accessKey: reader01
    secretKey: reader01-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
FLOOD = 120
REFUSAL = "namesrv: refused request code"


def _acl_file(directory) -> str:
    path = directory / "plain_acl.yml"
    path.write_text(ACL)
    os.chmod(path, 0o600)
    make_key_pair(os.path.join(curve_dir(str(path)), CLIENTS_DIR), "reader01")
    return str(path)


def _stranger(cluster):
    """A client whose CURVE key is no account's: every NameServer request refused (authentication)."""
    public, secret = zmq.curve_keypair()
    return Admin(config=cluster.client_config(curve_public_key=public.decode(), curve_secret_key=secret.decode()))


def _refused(call) -> None:
    with pytest.raises(BrokerError) as refused:
        call()
    assert refused.value.code == ResponseCode.NO_PERMISSION, refused.value


def _acl_refusals(url: str) -> dict[tuple, float]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {(s.labels["node_type"], s.labels["node_id"], s.labels["door"], s.labels["kind"]): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "rocketbox_acl_refusals_total"}


def test_the_namesrv_refusals_are_scraped_beside_the_brokers(tmp_path):
    with LocalCluster(str(tmp_path / "cluster"), acl_file=_acl_file(tmp_path)) as cluster:
        reader = Admin(config=cluster.client_config("reader01"))
        stranger = _stranger(cluster)
        try:
            _refused(lambda: put_kv_config(reader, "ORDER_TOPIC_CONFIG", "T", "broker-a:4"))   # admin only
            for _ in range(2):
                _refused(stranger.topic_list)
        finally:
            reader.shutdown()
            stranger.shutdown()
        refusals = _acl_refusals(cluster.metrics_url)
        assert refusals.get(("namesrv", "namesrv-0", "native", "authorization")) == 1, refusals
        assert refusals.get(("namesrv", "namesrv-0", "native", "authentication")) == 2, refusals
        assert not any(node_type == "broker" for node_type, *_ in refusals), refusals   # none refused there


def _lines_said(log_text: str) -> int:
    """How many refusals the log accounts for: a line written is one, a held-back count says how
    many more (a report "N more like this held back ..., the last: ..." is N, the example among them)."""
    said = 0
    for line in log_text.splitlines():
        if REFUSAL not in line:
            continue
        report = re.search(r": (\d+) more like this held back in the last", line)
        suffix = re.search(r"\((\d+) more like this held back in the last [\d.]+ s\)$", line)
        said += int(report.group(1)) if report else 1 + (int(suffix.group(1)) if suffix else 0)
    return said


def test_a_flood_of_refusals_is_logged_with_the_count_held_back_even_when_the_cluster_stops(tmp_path):
    with LocalCluster(str(tmp_path / "cluster"), acl_file=_acl_file(tmp_path), metrics=False) as cluster:
        log_path = os.path.join(cluster.data_dir, "logs", "namesrv-0.log")
        stranger = _stranger(cluster)
        try:
            for _ in range(FLOOD):
                _refused(stranger.topic_list)
        finally:
            stranger.shutdown()
    # Stopped within the flood's 10 s window: the NameServer said its count on the way out.
    with open(log_path, encoding="utf-8") as f:
        text = f.read()
    assert "more like this held back" in text, text[-3000:]
    assert _lines_said(text) == FLOOD, text[-3000:]
