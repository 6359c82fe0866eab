"""The pytest plugin, used as an application's test suite uses it: each case
writes a user's test files with pytest's own ``pytester`` and runs them in a pytest process of
their own, which finds the plugin through its ``pytest11`` entry point (no conftest defines its
fixtures). Whether a cluster is gone is checked inside that process, after its fixture's
teardown: once the inner pytest exits, PR_SET_PDEATHSIG would take its clusters down anyway."""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from rocketbox.cluster.pytest_plugin import options
from rocketbox.cluster.pytest_plugin.handle import ENDPOINTS

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(300)

CHECKOUT = Path(__file__).resolve().parents[2]
INNER_RUN_TIMEOUT_S = 240
# The user's side of every case: a notebook of facts (facts.jsonl beside it) the inner tests
# record about their clusters, and the checks they read back. It defines no rocketbox fixture.
LAB_CONFTEST = '''
import json
import os
import pathlib

import psutil
import pytest

FACTS = pathlib.Path(__file__).with_name("facts.jsonl")


def write_fact(**fact):
    with FACTS.open("a") as f:
        f.write(json.dumps(fact) + "\\n")


def read_facts():
    return [json.loads(line) for line in FACTS.read_text().splitlines()] if FACTS.exists() else []


def still_running(processes):
    """pids of the recorded (pid, start time) pairs that still run."""
    alive = []
    for pid, started in processes:
        try:
            if psutil.Process(pid).create_time() == started:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


class Lab:
    def __init__(self, test_name):
        self.test_name = test_name

    def record(self, cluster):
        processes = [[p.pid, p.create_time()] for p in cluster.processes()]
        write_fact(test=self.test_name, data_dir=cluster.data_dir, supervisor=cluster.process.pid,
                   processes=processes, endpoints=cluster.endpoints)

    facts = staticmethod(read_facts)
    still_running = staticmethod(still_running)


@pytest.fixture
def lab(request):
    return Lab(request.node.name)


def pytest_unconfigure(config):
    """After every fixture of the run, the session's included, was torn down."""
    facts = read_facts()
    if facts:
        write_fact(test="after the run", alive=still_running([p for f in facts for p in f["processes"]]),
                   data_dirs_left=sorted({f["data_dir"] for f in facts if os.path.exists(f["data_dir"])}))
'''


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--timeout=120", *args,
                                         timeout=INNER_RUN_TIMEOUT_S)


def read_facts(pytester: pytest.Pytester) -> dict[str, dict]:
    lines = (pytester.path / "facts.jsonl").read_text().splitlines()
    return {fact["test"]: fact for fact in map(json.loads, lines)}


def readme_section() -> str:
    text = (CHECKOUT / "README.md").read_text()
    return text.split("\n## Testing your application with pytest\n", 1)[1].split("\n## ", 1)[0]


def readme_example() -> str:
    """The python block of the README's pytest section: the user's test this suite runs first."""
    (block,) = re.findall(r"^```python\n(.*?)^```$", readme_section(), re.S | re.M)
    return block


def test_the_readme_names_every_option_and_endpoint():
    section = readme_section()
    unnamed = [name for name in (*options.DEFAULTS, *ENDPOINTS)
               if f"`{name}`" not in section and f"`.{name}`" not in section]
    assert unnamed == []


def test_the_plugin_is_the_rocketbox_pytest11_entry_point(pytester):
    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "rocketbox"]
    assert plugin.value == "rocketbox.cluster.pytest_plugin"
    pytester.makepyfile(test_user="def test_uses_it(rocketbox_cluster):\n    pass\n")
    # Without the entry point's plugin the fixture does not exist: nothing else provides it.
    result = run_inner(pytester, "-p", "no:rocketbox")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'rocketbox_cluster' not found*"])


def test_the_readme_example_sends_and_receives_through_the_fixtures(pytester):
    pytester.makepyfile(test_readme_example=readme_example())
    result = run_inner(pytester)
    result.assert_outcomes(passed=2)


def test_a_failing_or_hung_test_still_stops_its_cluster(pytester):
    pytester.makeconftest(LAB_CONFTEST)
    pytester.makepyfile(test_teardown='''
import os
import threading

import pytest

from rocketbox.cluster import Message


def test_passes(rocketbox_cluster, rocketbox_producer, lab):
    lab.record(rocketbox_cluster)
    assert rocketbox_producer.send(Message("Orders", b"fine")).status.name == "SEND_OK"


def test_fails(rocketbox_cluster, rocketbox_producer, rocketbox_consumer, lab):
    lab.record(rocketbox_cluster)
    billing = rocketbox_consumer("Orders")
    rocketbox_producer.send(Message("Orders", b"order 1"))
    billing.wait_for(1)
    assert False, "the application under test is broken"


@pytest.mark.timeout(5, method="signal", func_only=True)
def test_hangs(rocketbox_cluster, lab):
    lab.record(rocketbox_cluster)
    threading.Event().wait()


def test_nothing_of_the_clusters_above_is_left(lab):
    facts = {fact["test"]: fact for fact in lab.facts()}
    assert sorted(facts) == ["test_fails", "test_hangs", "test_passes"]
    for name, fact in facts.items():
        # the supervisor, a NameServer, the broker main and its 2 worker processes, the web process
        assert len(fact["processes"]) >= 6, (name, fact["processes"])
        assert lab.still_running(fact["processes"]) == [], name
    assert not os.path.exists(facts["test_passes"]["data_dir"])
    for name in ("test_fails", "test_hangs"):
        assert os.path.isdir(os.path.join(facts[name]["data_dir"], "logs")), name
''')
    result = run_inner(pytester)
    result.assert_outcomes(passed=2, failed=2)
    facts = read_facts(pytester)
    result.stdout.fnmatch_lines(["*the application under test is broken*", "*Timeout*"])
    for name in ("test_fails", "test_hangs"):
        assert f"data dir kept for its logs: {facts[name]['data_dir']} " in result.stdout.str(), name
    assert facts["after the run"]["alive"] == []
    assert facts["after the run"]["data_dirs_left"] == sorted([facts["test_fails"]["data_dir"],
                                                                facts["test_hangs"]["data_dir"]])


def test_marker_and_parametrized_options_shape_the_cluster(pytester):
    pytester.makeconftest(LAB_CONFTEST)
    pytester.makepyfile(test_options='''
import socket
import urllib.request

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import wait_until

pytestmark = pytest.mark.rocketbox(metrics=False)


@pytest.mark.rocketbox(brokers=2, flush_mode="SYNC_FLUSH", proxy=True)
def test_marker_options(rocketbox_cluster, lab):
    lab.record(rocketbox_cluster)
    rocketbox_cluster.create_topic("Spread", queues=1)
    with Admin(config=rocketbox_cluster.client_config()) as admin:
        assert sorted(b["brokerName"] for b in admin.route("Spread")["brokerDatas"]) == ["broker-a", "broker-b"]
        masters = admin.master_endpoints()
        assert sorted(masters) == ["broker-a", "broker-b"]
        assert {admin.broker_config(endpoint)["flushDiskType"] for endpoint in masters.values()} == {"SYNC_FLUSH"}
    assert rocketbox_cluster.metrics_url is None   # the module's marker
    host, port = rocketbox_cluster.proxy_endpoint.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=5).close()


@pytest.mark.parametrize("rocketbox_cluster", [{"namesrvs": 2, "console": True}], indirect=True)
def test_parametrized_options(rocketbox_cluster, lab):
    lab.record(rocketbox_cluster)
    addresses = rocketbox_cluster.namesrv.split(";")
    assert len(addresses) == 2
    for address in addresses:
        with Admin(namesrv=address) as admin:
            wait_until(lambda: "broker-a" in admin.cluster_info()["brokerAddrTable"], 30,
                       what=f"broker-a registered with {address}")
    with urllib.request.urlopen(rocketbox_cluster.console_url, timeout=30) as page:
        assert page.status == 200 and b"broker-a" in page.read()


@pytest.mark.rocketbox(borkers=2)
def test_misspelt_option(rocketbox_cluster):
    pass
''')
    result = run_inner(pytester)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*rocketbox options of test_options.py::test_misspelt_option: "
                                 "unknown option 'borkers'*"])
    facts = read_facts(pytester)
    marked, parametrized = facts["test_marker_options"], facts["test_parametrized_options[rocketbox_cluster0]"]
    assert marked["endpoints"]["proxy_endpoint"] and marked["endpoints"]["metrics_url"] is None
    assert marked["endpoints"]["console_url"] is None
    assert parametrized["endpoints"]["console_url"].startswith("http://127.0.0.1:")
    assert parametrized["endpoints"]["proxy_endpoint"] is None and parametrized["endpoints"]["metrics_url"] is None
    # two broker groups of three processes (allocate: a thread of reput), one NameServer, the proxy, the supervisor
    assert len(marked["processes"]) == 9, marked["processes"]
    assert facts["after the run"] == {"test": "after the run", "alive": [], "data_dirs_left": []}


def test_the_session_cluster_serves_every_test_of_the_run(pytester):
    pytester.makeconftest(LAB_CONFTEST + '''

@pytest.fixture(scope="session")
def rocketbox_session_options():
    return {"metrics": False}
''')
    pytester.makepyfile(test_session='''
from rocketbox.cluster import Message, Producer


def test_first_sends(rocketbox_session_cluster, rocketbox_producer, lab):
    lab.record(rocketbox_session_cluster)
    assert rocketbox_session_cluster.metrics_url is None   # the overridden rocketbox_session_options
    rocketbox_session_cluster.create_topic("Shared", queues=1)
    rocketbox_producer.send(Message("Shared", b"from the first test"))


def test_second_reads_it(rocketbox_session_cluster, rocketbox_consumer, lab):
    lab.record(rocketbox_session_cluster)
    assert rocketbox_session_cluster.process.pid == lab.facts()[0]["supervisor"]
    reader = rocketbox_consumer.pull()
    (queue,) = reader.queues("Shared")
    # a long poll: it answers once the message is dispatched (or after 10 s, empty)
    assert [m.body for m in reader.pull(queue, 0, suspend_ms=10_000).messages] == [b"from the first test"]


def test_third_consumes_with_its_own_listener(rocketbox_session_cluster, rocketbox_consumer, lab):
    lab.record(rocketbox_session_cluster)
    seen = []
    shared = rocketbox_consumer("Shared", listener=seen.extend)   # None: consumed
    with Producer("Third", namesrv=rocketbox_session_cluster.namesrv) as producer:
        producer.send(Message("Shared", b"for the listener"))
    # A new group starts at the queue's first message (the queue still holds it), as in RocketMQ.
    expected = [b"from the first test", b"for the listener"]
    assert [m.body for m in shared.wait_for(2)] == expected
    assert [m.body for m in seen] == expected
''')
    result = run_inner(pytester)
    result.assert_outcomes(passed=3)
    facts = read_facts(pytester)
    runs = [facts[name] for name in
            ("test_first_sends", "test_second_reads_it", "test_third_consumes_with_its_own_listener")]
    assert len({(run["supervisor"], run["data_dir"]) for run in runs}) == 1
    assert facts["after the run"] == {"test": "after the run", "alive": [], "data_dirs_left": []}
