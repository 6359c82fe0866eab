"""The web console of a cluster with access control, asking for credentials (``require_credentials``:
the console listens on 127.0.0.1 only, so the switch stands in for an address other hosts reach,
where the topology turns it on by itself): no credentials or a wrong secret 401, an account that is
not admin 403, an admin the pages with the cluster's data (the console asks the brokers with the
cluster's own CURVE key); a rebound Host header passes with credentials, a cross-site form does not."""

from __future__ import annotations

import base64

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.topology import build_topology
from tests.console.pages import fetch

pytestmark = pytest.mark.timeout(240)

ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
  - accessKey: watcher1
    secretKey: watcher1-secret
    defaultTopicPerm: SUB
"""


def _basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    acl_file = tmp_path_factory.mktemp("console-acl-conf") / "plain_acl.yml"
    acl_file.write_text(ACL)
    with LocalCluster(str(tmp_path_factory.mktemp("console-acl")), console=True, acl_file=str(acl_file),
                      require_credentials=True) as started:
        admin = Admin(config=started.client_config())
        admin.create_topic("ConsoleAclTopic", 2)
        admin.shutdown()
        yield started


def test_pages_need_an_admin_account(cluster):
    url = cluster.console_url
    for headers, status in (({}, 401), (_basic("operator1", "wrong-secret"), 401), (_basic("stranger", "x" * 9), 401),
                            (_basic("watcher1", "watcher1-secret"), 403)):
        page = fetch(url, "/topics", headers=headers)
        assert page.status == status, (headers, page.status, page.text[:300])
        assert {k.lower(): v for k, v in page.headers.items()}["www-authenticate"].startswith("Basic")
    assert "Need admin permission" in fetch(url, "/topics", headers=_basic("watcher1", "watcher1-secret")).text
    page = fetch(url, "/topics", headers=_basic("operator1", "operator1-secret"))
    assert page.status == 200 and "ConsoleAclTopic" in page.text


def test_credentials_replace_the_host_check_but_not_the_cross_site_check(cluster):
    admin = _basic("operator1", "operator1-secret")
    rebound = fetch(cluster.console_url, "/cluster", headers={**admin, "Host": "console.example:8082"})
    assert rebound.status == 200, rebound.text[:300]
    forged = fetch(cluster.console_url, "/topics", form={"topic": "Forged", "queues": "1"},
                   headers={**admin, "Origin": "http://evil.example"})
    assert forged.status == 403 and "cross-site" in forged.text


def test_a_console_beyond_loopback_asks_for_credentials_by_itself(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    topology = build_topology(str(tmp_path / "d"), console_port=8082, console_host="10.77.0.1",
                              acl_file=str(acl_file))
    assert topology.console.require_credentials and topology.console.acl_file == str(acl_file)
    loopback = build_topology(str(tmp_path / "d"), console_port=8082, acl_file=str(acl_file))
    assert not loopback.console.require_credentials
    with pytest.raises(ValueError, match="without access control"):
        build_topology(str(tmp_path / "d"), console_port=8082, console_host="10.77.0.1")
