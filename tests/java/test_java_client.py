"""Apache RocketMQ's unmodified Java client 4.9.8 against RocketBox's remoting door (tests/java/apache.py
says where the client comes from; the tests skip and say why where it is absent). Each scenario is one
of our programs in tests/java/programs; the same requests through RocketBox's own remoting client run
always in tests/remoting/test_java_paths.py."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from rocketbox.cluster.testing import LocalCluster
from tests.java.apache import run_java

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class OtherRocketMQ:
    """A RocketMQ NameServer started by someone else (Apache's own, to compare against)."""
    remoting_namesrv: str


@pytest.fixture(scope="module")
def cluster(java_programs, tmp_path_factory):
    """One cluster for the module's scenarios (started only where the Java client is there), with
    SQL92 filtering on as the SQL scenario needs (RocketMQ's enablePropertyFilter). With
    $ROCKETBOX_JAVA_NAMESRV=host:port the same scenarios run against that NameServer instead: how
    they are run against Apache RocketMQ's broker (enablePropertyFilter=true) side by side."""
    other = os.environ.get("ROCKETBOX_JAVA_NAMESRV")
    if other:
        yield OtherRocketMQ(other)
        return
    with LocalCluster(str(tmp_path_factory.mktemp("java-client")), remoting=True,
                      broker_overrides={"enable_property_filter": True}) as started:
        yield started


def _run(java_programs, tmp_path, main_class, *args, **kwargs):
    result = run_java(java_programs, main_class, *args, home=tmp_path / "java", **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("body_bytes, compress_type", [(100, "ZLIB"), (5 * 1024, "ZLIB"), (5 * 1024, "LZ4"),
                                                       (5 * 1024, "ZSTD")])
def test_send_and_push_consume(cluster, java_programs, tmp_path, body_bytes, compress_type):
    """A body over 4 KiB is compressed by the Java client: sysFlag bit 0 and the type in bits 8-10
    (ZLIB 0x301 by default; LZ4 0x101 and ZSTD 0x201 with rocketmq.message.compressType)."""
    out = _run(java_programs, tmp_path, "SendAndPush", cluster.remoting_namesrv, f"JavaSendPush{compress_type}", "20",
               str(body_bytes), jvm_options=(f"-Drocketmq.message.compressType={compress_type}",))
    assert out.count("SEND_OK") == 20 and "received 20 of 20" in out


def test_delivered_messages_carry_what_apache_delivers(cluster, java_programs, tmp_path):
    """Every header field and property a Java consumer sees, as Apache 4.9.8's broker delivers them
    (its run of Inspect prints the same names): CLUSTER stamped, WAIT not stored, no record CRC
    property, the born host's port, a delayed message's REAL_TOPIC / REAL_QID / DELAY."""
    out = _run(java_programs, tmp_path, "Inspect", cluster.remoting_namesrv, "JavaInspect")
    got: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        if line.startswith("got "):
            _, kind, pair = line.split(" ", 2)
            name, value = pair.split("=", 1)
            got.setdefault(kind, {})[name] = value
    assert set(got) == {"plain", "delayed", "big"}, out
    always = {"@topic", "@flag", "@sysFlag", "@bornHost", "@storeHost", "@reconsumeTimes", "@bodyLength", "@msgId",
              "@preparedTransactionOffset", "CLUSTER", "CONSUME_START_TIME", "KEYS", "MAX_OFFSET", "MIN_OFFSET",
              "TAGS", "UNIQ_KEY"}
    assert set(got["plain"]) == always | {"u"}, got["plain"]
    assert set(got["big"]) == always, got["big"]
    assert set(got["delayed"]) == always | {"DELAY", "REAL_QID", "REAL_TOPIC", "WAIT"}, got["delayed"]
    assert got["big"]["@sysFlag"] == "769" and got["big"]["@bodyLength"] == "5120"
    assert got["delayed"]["REAL_TOPIC"] == "JavaInspect" and got["delayed"]["DELAY"] == "1"
    for fields in got.values():
        assert fields["CLUSTER"] == "DefaultCluster"
        assert not fields["@bornHost"].endswith(":0"), fields["@bornHost"]


def test_admin_api_queries_find_what_was_sent(cluster, java_programs, tmp_path):
    """earliestMsgStoreTime (32), queryMessage by key and viewMessage by unique id (QUERY_MESSAGE with
    its response header), a send's trace by its id in RMQ_SYS_TRACE_TOPIC (mqadmin queryMsgTraceById's
    lookup), viewMessage by offset id (33)."""
    out = _run(java_programs, tmp_path, "AdminQueries", cluster.remoting_namesrv, "JavaQueries")
    assert out.count("byUniqueId") == 3 and " ok" in out.split("trace ", 1)[1].splitlines()[0]
    assert "byOffsetId ok" in out


def test_sql92_and_tag_consumers_get_only_their_messages(cluster, java_programs, tmp_path):
    """MessageSelector.bySql: CHECK_CLIENT_CONFIG (46) at start, pulls that leave the expression to the
    heartbeat's subscription."""
    out = _run(java_programs, tmp_path, "SqlFilter", cluster.remoting_namesrv, "JavaSql")
    assert "sql got [3, 4, 5]" in out and "tag got [1, 3, 5, 7, 9]" in out


def test_request_reply(cluster, java_programs, tmp_path):
    """DefaultMQProducer.request: the responder's createReplyMessage finds CLUSTER, its reply (325) is
    pushed to the requester (326)."""
    out = _run(java_programs, tmp_path, "RequestReply", cluster.remoting_namesrv, "JavaRequests", "3")
    assert "replies 3 of 3" in out


def test_pull_consumer_reads_every_queue_and_keeps_its_offsets(cluster, java_programs, tmp_path):
    """DefaultMQPullConsumer: pullBlockIfNotFound over every queue, offsets persisted one-way and read
    back by a new consumer of the group (failed once in five full runs in the issue's first runs)."""
    out = _run(java_programs, tmp_path, "PullConsumer", cluster.remoting_namesrv, "JavaPull", "40")
    assert "pulled 40 of 40" in out and "offsets ok" in out


def test_two_members_share_the_queues_and_one_takes_over(cluster, java_programs, tmp_path):
    """Two push consumers of one group split the queues (NOTIFY_CONSUMER_IDS_CHANGED, the member list);
    when one leaves the other gets every queue and every message."""
    out = _run(java_programs, tmp_path, "Rebalance", cluster.remoting_namesrv, "JavaRebalance", "40")
    assert "round 2 A=40 of 40" in out


def test_a_steady_2000_messages_a_second_are_all_stored(cluster, java_programs, tmp_path):
    """30,000 sync sends paced at 2,000 a second by 4 senders, retries off: none refused (the issue saw
    35-385 refused SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE] of 36,000 on a loaded machine; Apache none). Counts
    failures, not times."""
    out = _run(java_programs, tmp_path, "SteadyLoad", cluster.remoting_namesrv, "JavaSteady", "2000", "15", "4",
               timeout_s=240)
    assert "ok 30000 failed 0" in out
