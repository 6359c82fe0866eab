"""Topic message types (RocketMQ 5's message.type attribute) on a live master and slave: created
with the CLI, read back with GET_TOPIC_CONFIG from the master and, once copied, from the slave; set
through the remoting door as mqadmin updateTopic -a does; kept by updates that do not mention it;
bad attributes refused with the reason and nothing changed."""

from __future__ import annotations

import json

import pytest

from rocketbox.cluster import Admin
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command
from tests.cli_helpers import run_cli
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(180)


def _topic_config(rpc, endpoint: str, topic: str) -> Command:
    return rpc.call(endpoint, Command(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}))


def _update_topic(rpc, endpoint: str, topic: str, **fields: str) -> Command:
    return rpc.call(endpoint, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "order": "false", **fields}))


def test_message_types_from_cli_to_master_and_slave(start_cluster):
    cluster = start_cluster(slaves=1, broker_overrides={"slave_sync_interval_ms": 200})
    master, slave = cluster.topology.brokers[0], cluster.topology.slaves[0]
    master_endpoint, slave_endpoint = f"tcp://{master.address}", f"tcp://{slave.address}"
    namesrv = ("--namesrv", cluster.namesrv)

    created = run_cli("topic", "create", "FifoOrders", "--queues", "2", "--message-type", "FIFO", *namesrv)
    assert "message type FIFO" in created.stdout
    run_cli("topic", "create", "Plain", *namesrv)
    assert "message type LITE" in run_cli("topic", "create", "Sessions", "--message-type", "LITE", *namesrv).stdout
    refused = run_cli("topic", "create", "Odd", "--message-type", "lite", *namesrv, check=False)
    assert refused.returncode == 2 and "invalid choice: 'lite'" in refused.stderr

    with Admin(config=client_config(cluster)) as admin:
        answer = _topic_config(admin.rpc, master_endpoint, "FifoOrders")
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = json.loads(answer.body)
        assert (config["topicName"], config["writeQueueNums"], config["attributes"]) == \
            ("FifoOrders", 2, {"message.type": "FIFO"})
        assert admin.topic_configs("Plain")[master.broker_name]["attributes"] == {}
        unknown = _topic_config(admin.rpc, master_endpoint, "NoSuchTopic")
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in unknown.remark
        everything = json.loads(admin.rpc.call(master_endpoint, Command(RequestCode.GET_ALL_TOPIC_CONFIG, {})).body)
        assert everything["topicConfigTable"]["FifoOrders"]["attributes"] == {"message.type": "FIFO"}

        # The slave copies the master's table (broker/slave_sync.py), attributes included.
        def slave_type():
            reply = _topic_config(admin.rpc, slave_endpoint, "FifoOrders")
            return reply.code == ResponseCode.SUCCESS and json.loads(reply.body)["attributes"]
        assert wait_until(slave_type, 15, interval_s=0.05, what="the slave copied FifoOrders") == \
            {"message.type": "FIFO"}

        # An update that says nothing of attributes keeps them (RocketMQ's alterCurrentAttributes).
        run_cli("topic", "update", "FifoOrders", "--queues", "3", *namesrv)
        config = admin.topic_configs("FifoOrders")[master.broker_name]
        assert (config["writeQueueNums"], config["attributes"]) == (3, {"message.type": "FIFO"})

        # Refused with RocketMQ's code and a reason; the topic is left as it was.
        for attributes, reason in (("+message.type=BOGUS", "message.type=BOGUS is not one of"),
                                   ("+color=red", "unsupported key: color"),
                                   ("message.type=FIFO", "add/alter attribute format is wrong"),
                                   ("-message.type", None)):
            reply = _update_topic(admin.rpc, master_endpoint, "Plain", attributes=attributes)
            if reason is None:   # Plain has no message.type to delete
                reason = "attempt to delete a nonexistent key: message.type"
            assert reply.code == ResponseCode.SYSTEM_ERROR and reason in reply.remark, (attributes, reply.remark)
        new_with_delete = _update_topic(admin.rpc, master_endpoint, "Fresh", attributes="-message.type")
        assert "only add attribute is supported while creating" in new_with_delete.remark
        assert _topic_config(admin.rpc, master_endpoint, "Fresh").code == ResponseCode.TOPIC_NOT_EXIST
        config = admin.topic_configs("Plain")[master.broker_name]
        assert (config["writeQueueNums"], config["attributes"]) == (4, {})

    # RocketMQ's door, as mqadmin updateTopic -a +message.type=DELAY sends it, then -message.type.
    remoting = RemotingRpcClient(default_timeout_ms=5000)
    try:
        door = master.remoting_address
        assert _update_topic(remoting, door, "Plain", attributes="+message.type=DELAY").code == ResponseCode.SUCCESS
        assert json.loads(_topic_config(remoting, door, "Plain").body)["attributes"] == {"message.type": "DELAY"}
        assert _update_topic(remoting, door, "Plain", attributes="-message.type").code == ResponseCode.SUCCESS
        assert json.loads(_topic_config(remoting, door, "Plain").body)["attributes"] == {}
        # RocketMQ 5.4's PRIORITY is taken; 5.5's LITE too, with its lite topics' idle time (minutes).
        assert _update_topic(remoting, door, "Urgent", attributes="+message.type=PRIORITY").code == \
            ResponseCode.SUCCESS
        assert json.loads(_topic_config(remoting, door, "Urgent").body)["attributes"] == {"message.type": "PRIORITY"}
        lite = _update_topic(remoting, door, "Chats", attributes="+message.type=LITE,+lite.topic.expiration=60")
        assert lite.code == ResponseCode.SUCCESS, lite.remark
        assert json.loads(_topic_config(remoting, door, "Chats").body)["attributes"] == \
            {"message.type": "LITE", "lite.topic.expiration": "60"}
        too_long = _update_topic(remoting, door, "Chats", attributes="+lite.topic.expiration=43201")
        assert too_long.code == ResponseCode.SYSTEM_ERROR and "out of range" in too_long.remark, too_long.remark
    finally:
        remoting.close()

    route = json.loads(run_cli("topic", "route", "FifoOrders", "--json", *namesrv).stdout)
    assert route["messageTypes"] == {master.broker_name: "FIFO"}
    table = run_cli("topic", "route", "Plain", *namesrv).stdout
    assert " any " in table, table
