"""The web console of a cluster with access control asks for an admin's credentials on loopback too
(as rocketmq-dashboard has a login): no credentials or a wrong secret 401, an
account that is not admin 403, an admin the pages with the cluster's data (the console asks the
brokers with the cluster's own CURVE key); credentials do not make a rebound Host or a cross-site
form pass. ``console_trust_loopback`` serves loopback without credentials (and still checks the Host)."""

from __future__ import annotations

import base64

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.topology import build_topology
from tests.console.browser import BrowserUnavailable, open_browser
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
    with LocalCluster(str(tmp_path_factory.mktemp("console-acl")), console=True, acl_file=str(acl_file)) as started:
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


def test_credentials_do_not_pass_a_rebound_host_or_a_cross_site_form(cluster):
    url, admin = cluster.console_url, _basic("operator1", "operator1-secret")
    port = url.rstrip("/").rsplit(":", 1)[1]
    for host in ("127.0.0.1.evil.example", f"127.evil:{port}", f"localhost.evil:{port}", "console.example:8082"):
        assert fetch(url, "/cluster", headers={**admin, "Host": host}).status == 403, host
        posted = fetch(url, "/topics", form={"topic": "ConsoleAclRebound", "queues": "1"},
                       headers={**admin, "Host": host, "Origin": f"http://{host}"})
        assert posted.status == 403, (host, posted.status)
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert fetch(url, "/cluster", headers={**admin, "Host": host}).status == 200, host
    forged = fetch(url, "/topics", form={"topic": "ConsoleAclForged", "queues": "1"},
                   headers={**admin, "Origin": "http://evil.example"})
    assert forged.status == 403 and "cross-site" in forged.text
    with Admin(config=cluster.client_config()) as client:
        assert not {"ConsoleAclRebound", "ConsoleAclForged"} & set(client.topic_list())


def _browse(credentials: dict | None, work):
    try:
        with open_browser(http_credentials=credentials) as context:
            return work(context.new_page())
    except BrowserUnavailable as exc:
        print(f"browser test skipped: {exc}")
        pytest.skip(str(exc))


def test_a_browser_logs_in_with_an_admin_account_and_its_forms_pass(cluster):
    """Chromium as a user drives it: refused without credentials; with an admin's (the Basic login
    a user fills in), the pages load and a topic created with the form (its Origin and Sec-Fetch-Site
    are the browser's own) exists."""
    url = cluster.console_url

    def refused(page) -> str:
        try:   # headless, a login it cannot answer ends the navigation
            return str(page.goto(url + "topics").status)
        except Exception as exc:
            return str(exc).splitlines()[0]
    assert _browse(None, refused) in ("401", "Page.goto: net::ERR_INVALID_AUTH_CREDENTIALS at " + url + "topics")

    def create_topic(page):
        page.goto(url + "topics")
        page.fill("#topic-form input[name=topic]", "ConsoleAclBrowserTopic")
        page.fill("#topic-form input[name=queues]", "2")
        page.click("#topic-form button")
        page.wait_for_selector('#topics tr[data-topic="ConsoleAclBrowserTopic"]')
        return page.locator(".notice").inner_text()
    assert "ConsoleAclBrowserTopic saved" in _browse({"username": "operator1", "password": "operator1-secret"},
                                                     create_topic)
    with Admin(config=cluster.client_config()) as client:
        assert "ConsoleAclBrowserTopic" in client.topic_list()


def test_a_console_on_loopback_is_trusted_only_when_told(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    asks = build_topology(str(tmp_path / "d"), console_port=8082, acl_file=str(acl_file))
    assert asks.console.require_credentials and asks.console.acl_file == str(acl_file)
    trusting = build_topology(str(tmp_path / "d"), console_port=8082, acl_file=str(acl_file),
                              console_trust_loopback=True)
    assert not trusting.console.require_credentials
    beyond = build_topology(str(tmp_path / "d"), console_port=8082, console_host="10.77.0.1", acl_file=str(acl_file))
    assert beyond.console.require_credentials
    with pytest.raises(ValueError, match="only when it listens there"):
        build_topology(str(tmp_path / "d"), console_port=8082, console_host="10.77.0.1", acl_file=str(acl_file),
                       console_trust_loopback=True)
    with pytest.raises(ValueError, match="without an ACL file"):
        build_topology(str(tmp_path / "d"), console_port=8082, console_trust_loopback=True)
    with pytest.raises(ValueError, match="without access control"):
        build_topology(str(tmp_path / "d"), console_port=8082, console_host="10.77.0.1")
