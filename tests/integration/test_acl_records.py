"""Access control on what a request touches beyond its header, through both doors
of a live cluster: the native door with account CURVE keys, the remoting door with RocketMQ's
AccessKey/Signature. Account ``intruder`` (PUB|SUB on RecA and group RecGroupA only) tries
everything it may not: end ``ownerb01``'s half message on RecB with a made-up or copied id, read
RecB's records by offset, copy one into its own retry topic, ack a pop of RecB, send into RecGroupB's
retry topic, unregister RecGroupB's client, take its queue locks and read its offsets and
connections. Each is refused (NO_PERMISSION with the reason, or "no half message" for an id that
names none) and RecGroupB's state stays as it was; the owner's own requests still work."""

from __future__ import annotations

import json
import os

import pytest

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.acl.curve import CLIENTS_DIR, client_keys_for, curve_dir, make_key_pair
from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.client.transaction import LocalTransactionState, TransactionProducer
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.testing import LocalCluster, read_topic, wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient

pytestmark = pytest.mark.timeout(300)

TOPIC_A, TOPIC_B, GROUP_A, GROUP_B, TX_GROUP = "RecA", "RecB", "RecGroupA", "RecGroupB", "RecTxB"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
ACL = """
accounts:
  - accessKey: ownerb01
    secretKey: ownerb01-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["RecB=PUB|SUB"]
    groupPerms: ["RecGroupB=SUB"]
  - accessKey: intruder
    secretKey: intruder-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["RecA=PUB|SUB"]
    groupPerms: ["RecGroupA=SUB"]
  - accessKey: popper01
    secretKey: popper01-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["RecB=SUB"]
    groupPerms: ["RecGroupA=SUB"]
  - accessKey: reader01
    secretKey: reader01-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: ["RecB=DENY"]
"""
ACCOUNTS = ("ownerb01", "intruder", "popper01", "reader01")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    acl_file = str(tmp_path_factory.mktemp("acl-records-conf") / "plain_acl.yml")
    with open(acl_file, "w") as f:
        f.write(ACL)
    for account in ACCOUNTS:
        make_key_pair(os.path.join(curve_dir(acl_file), CLIENTS_DIR), account)
    with LocalCluster(str(tmp_path_factory.mktemp("acl-records")), acl_file=acl_file) as started:
        with Admin(config=started.client_config()) as admin:
            for topic in (TOPIC_A, TOPIC_B):
                admin.create_topic(topic, 1)
        yield started


class Doors:
    """Raw requests from an account through one door; the cluster's own key through the native one."""

    def __init__(self, cluster, door: str):
        self.cluster, self.door = cluster, door
        self.broker = cluster.topology.brokers[0]
        self._native: dict = {}
        self._remoting = RemotingRpcClient(5000)

    def _native_client(self, account):
        if account not in self._native:
            self._native[account] = RpcClient(5000, client_keys_for(self.cluster.topology.acl_file, account))
        return self._native[account]

    def ask(self, account: str, code: int, fields: dict, body: bytes = b"") -> Command:
        if self.door == "remoting":
            signed = sign_remoting(fields, body, account, f"{account}-secret")
            return self._remoting.call(self.broker.remoting_address, Command(int(code), signed, body))
        return self.own(code, fields, body, account)

    def own(self, code: int, fields: dict, body: bytes = b"", account: str | None = None) -> Command:
        """Through the native door; ``account`` None: the cluster's own key, which passes every check."""
        return self._native_client(account).call(f"tcp://{self.broker.address}", Command(int(code), fields, body))

    def close(self) -> None:
        self._remoting.close()
        for client in self._native.values():
            client.close()


@pytest.fixture(params=["native", "remoting"])
def doors(cluster, request):
    opened = Doors(cluster, request.param)
    yield opened
    opened.close()


def _refused(response: Command, reason: str) -> None:
    assert response.code == ResponseCode.NO_PERMISSION and reason in response.remark, (response.code, response.remark)


def _send(cluster, account: str, topic: str, body: bytes, **fields):
    with Producer("RecProducers", config=cluster.client_config(account, send_retry_count=0)) as producer:
        return producer.send(Message(topic, body, **fields))


def _phys(offset_msg_id: str) -> int:
    return parse_offset_msg_id(offset_msg_id)[2]


class Undecided:
    def execute_local_transaction(self, message, arg):
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, message):
        return LocalTransactionState.UNKNOW


def _half(cluster, body: bytes, keys: str = "") -> dict:
    """An open half message of ownerb01's on RecB: the END_TRANSACTION header that commits it."""
    with TransactionProducer(TX_GROUP, Undecided(), config=cluster.client_config("ownerb01")) as producer:
        sent = producer.send_message_in_transaction(Message(TOPIC_B, body, keys=keys or None)).send_result
    return {"producerGroup": TX_GROUP, "tranStateTableOffset": str(sent.queue_offset),
            "commitLogOffset": str(_phys(sent.offset_msg_id)), "commitOrRollback": "8",
            "fromTransactionCheck": "false", "msgId": sent.msg_id, "transactionId": sent.msg_id}


def _runtime(doors) -> dict:
    return json.loads(doors.own(RequestCode.GET_BROKER_RUNTIME_INFO, {"detail": "true"}).body)


# ---------------------------------------------------------------- forged transaction ends

def test_a_half_of_another_topic_is_not_ended_with_a_made_up_or_copied_id(cluster, doors):
    body = f"half-{doors.door}".encode()
    commit = _half(cluster, body)
    committed = _runtime(doors)["transactions"]["committed"]
    # Everything right but the account: it lacks PUB on the half's topic.
    _refused(doors.ask("intruder", RequestCode.END_TRANSACTION, commit),
             "No permission for topic:RecB: accessKey=intruder needs PUB, has DENY")
    _refused(doors.ask("intruder", RequestCode.END_TRANSACTION, {**commit, "commitOrRollback": "12"}), "topic:RecB")
    # Naming its own topic (as the proxy names the one it checked) finds no half of that topic there.
    named = doors.ask("intruder", RequestCode.END_TRANSACTION, {**commit, "topic": TOPIC_A})
    assert named.code == ResponseCode.SYSTEM_ERROR and named.remark.startswith("no half message of topic RecA")
    # Ids that name no half, or another one, are refused even for the owner.
    not_half = _phys(_send(cluster, "ownerb01", TOPIC_B, b"plain").offset_msg_id)
    for wrong, remark in (({"commitLogOffset": str(not_half)}, "no half message at CommitLog offset"),
                          ({"commitLogOffset": str(1 << 40)}, "no half message at CommitLog offset"),
                          ({"msgId": "0" * 32}, "no half message with msgId"),
                          ({"producerGroup": "OtherGroup"}, "no half message of producer group"),
                          ({"tranStateTableOffset": str(int(commit["tranStateTableOffset"]) + 7)},
                           "no half message at transaction state table offset")):
        answer = doors.ask("ownerb01", RequestCode.END_TRANSACTION, {**commit, **wrong})
        assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark.startswith(remark), (wrong, answer.remark)
    assert _runtime(doors)["transactions"]["committed"] == committed   # still a half
    # Its owner commits it, and RecB's consumers see it then.
    assert doors.ask("ownerb01", RequestCode.END_TRANSACTION, commit).code == ResponseCode.SUCCESS
    assert _runtime(doors)["transactions"]["committed"] == committed + 1
    with PullConsumer(GROUP_B, config=cluster.client_config("ownerb01")) as consumer:
        wait_until(lambda: body in [m.body for m in read_topic(consumer, TOPIC_B)], 30, interval_s=0.1,
                   what="the committed half on RecB")


# ---------------------------------------------------------------- records across topics

def test_a_record_of_another_topic_is_not_viewed_by_offset(cluster, doors):
    theirs = _send(cluster, "ownerb01", TOPIC_B, b"secret of B")
    half = _half(cluster, b"uncommitted secret of B")
    mine = _send(cluster, "intruder", TOPIC_A, b"mine")
    for fields in ({"offset": str(_phys(theirs.offset_msg_id))}, {"msgId": theirs.offset_msg_id},
                   {"offset": half["commitLogOffset"]}):
        _refused(doors.ask("intruder", RequestCode.VIEW_MESSAGE_BY_ID, fields),
                 "No permission for topic:RecB: accessKey=intruder needs SUB")
    seen = doors.ask("intruder", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(_phys(mine.offset_msg_id))})
    assert seen.code == ResponseCode.SUCCESS and fmt.decode_at(seen.body, 0).body == b"mine"
    # The owner reads its half (its real topic is RecB).
    assert doors.ask("ownerb01", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": half["commitLogOffset"]}).code == \
        ResponseCode.SUCCESS


def test_a_record_of_another_topic_is_not_copied_into_a_retry_topic(cluster, doors):
    theirs = _send(cluster, "ownerb01", TOPIC_B, b"copy me")
    before = _runtime(doors)
    back = {"group": GROUP_A, "offset": str(_phys(theirs.offset_msg_id)), "delayLevel": "0",
            "maxReconsumeTimes": "16"}
    _refused(doors.ask("intruder", RequestCode.CONSUMER_SEND_MSG_BACK, back), "topic:RecB")
    _refused(doors.ask("intruder", RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "delayLevel": "-1"}), "topic:RecB")
    after = _runtime(doors)
    assert (after["sentBackToRetry"], after["sentToDeadLetters"]) == (before["sentBackToRetry"],
                                                                       before["sentToDeadLetters"])
    # A request naming the original topic (the proxy's) must name the record's.
    named = doors.own(RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "originTopic": TOPIC_A})
    assert named.code == ResponseCode.SYSTEM_ERROR and "is not of topic RecA" in named.remark
    mine = _send(cluster, "intruder", TOPIC_A, b"retry me")
    assert doors.ask("intruder", RequestCode.CONSUMER_SEND_MSG_BACK,
                     {**back, "offset": str(_phys(mine.offset_msg_id))}).code == ResponseCode.SUCCESS


def test_a_pop_is_acked_only_by_who_may_read_its_topic(cluster, doors):
    _send(cluster, "ownerb01", TOPIC_B, f"pop-{doors.door}".encode())
    popped = doors.ask("popper01", RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP_A, "topic": TOPIC_B, "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
        "pollTime": "0", "initMode": "0", "exp": "*", "expType": "TAG"})
    assert popped.code == ResponseCode.SUCCESS, popped.remark
    handle = popped.fields["handles"].split(",")[0]
    # The intruder is in the group but may not read RecB: leaving the topic out no longer gets it past.
    for code, extra in ((RequestCode.ACK_MESSAGE, {}), (RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                                        {"invisibleTime": "1000"})):
        _refused(doors.ask("intruder", code, {"consumerGroup": GROUP_A, "extraInfo": handle, **extra}), "topic:RecB")
    acked = doors.ask("popper01", RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP_A, "topic": TOPIC_B,
                                                            "extraInfo": handle})
    assert acked.code == ResponseCode.SUCCESS, acked.remark   # still pending: nobody acked it before


def test_the_broker_own_topics_are_read_by_admins_only(cluster, doors):
    key = f"half-key-{doors.door}"
    _half(cluster, b"parked secret", keys=key)
    query = {"topic": HALF_TOPIC, "key": key, "maxNum": "32", "beginTimestamp": "0",
             "endTimestamp": str(1 << 62)}
    wait_until(lambda: doors.own(RequestCode.QUERY_MESSAGE, query).code == ResponseCode.SUCCESS, 30,
               what="the half indexed")
    # reader01 reads every topic by default, RecB excepted: no half of RecB reaches it either way.
    _refused(doors.ask("reader01", RequestCode.QUERY_MESSAGE, query), "topic:RecB")
    pull = broker_api.pull_request("RecReaders", MessageQueue(HALF_TOPIC, doors.broker.broker_name, 0), 0, 32, "*", 0)
    _refused(doors.ask("reader01", RequestCode.PULL_MESSAGE, pull.fields),
             "Need admin permission for request code=11, but accessKey=reader01 is not")
    # And no client writes there, not even with the cluster's key: a forged pop checkpoint would
    # have the revive timer copy any record into its sender's retry topic.
    revive = f"rmq_sys_REVIVE_LOG_{doors.broker.cluster_name}"
    with pytest.raises(ClientError) as refused:
        with Producer("RecForger", config=cluster.client_config(send_retry_count=0)) as producer:
            producer.send(Message(revive, b'{"g":"RecGroupA"}', tags="ck"))
    assert "is the broker's own" in str(refused.value)


# ---------------------------------------------------------------- group isolation

def _heartbeat(client_id: str) -> bytes:
    return json.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": GROUP_B, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [{"topic": TOPIC_B, "subString": "*"}]}]}).encode()


def _members(doors) -> list[str]:
    answer = doors.own(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP_B})
    return json.loads(answer.body)["consumerIdList"] if answer.code == ResponseCode.SUCCESS else []


@pytest.fixture
def member(doors) -> str:
    """A live consumer of RecGroupB (ownerb01's), by its client id."""
    client_id = f"owner-{doors.door}@1"
    assert doors.own(RequestCode.HEART_BEAT, {}, _heartbeat(client_id), "ownerb01").code == ResponseCode.SUCCESS
    assert client_id in _members(doors)
    return client_id


def test_a_send_into_a_group_retry_topic_needs_that_group(doors, member):
    retry_b = {"topic": f"%RETRY%{GROUP_B}", "queueId": "0"}
    retry_end = doors.own(RequestCode.GET_MAX_OFFSET, retry_b).fields["offset"]
    # Naming the intruder's own group, or none.
    send = {"a": GROUP_A, "b": f"%RETRY%{GROUP_B}", "c": "TBW102", "d": "1", "e": "0", "f": "0", "g": "0", "h": "0"}
    for fields in (send, {k: v for k, v in send.items() if k != "a"}):
        _refused(doors.ask("intruder", RequestCode.SEND_MESSAGE_V2, fields, b"into B's retry"), "group:RecGroupB")
    assert doors.own(RequestCode.GET_MAX_OFFSET, retry_b).fields["offset"] == retry_end


def test_an_unregister_without_a_group_unregisters_no_consumer(doors, member):
    for fields in ({"clientID": member}, {"clientID": member, "consumerGroup": "", "producerGroup": ""}):
        assert doors.ask("intruder", RequestCode.UNREGISTER_CLIENT, fields).code == ResponseCode.SUCCESS
    _refused(doors.ask("intruder", RequestCode.UNREGISTER_CLIENT, {"clientID": member, "consumerGroup": GROUP_B}),
             "group:RecGroupB")
    assert member in _members(doors)
    # The member itself leaves by naming its group.
    assert doors.ask("ownerb01", RequestCode.UNREGISTER_CLIENT,
                     {"clientID": member, "consumerGroup": GROUP_B}).code == ResponseCode.SUCCESS
    assert member not in _members(doors)


def test_a_group_queue_locks_are_taken_by_its_accounts_only(doors, member):
    queue = {"topic": TOPIC_B, "brokerName": doors.broker.broker_name, "queueId": 0}
    for code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        _refused(doors.ask("intruder", code, {}, json.dumps({"consumerGroup": GROUP_B, "clientId": "intruder@1",
                                                             "mqSet": [queue]}).encode()), "group:RecGroupB")
    owners_lock = json.dumps({"consumerGroup": GROUP_B, "clientId": member, "mqSet": [queue]}).encode()
    locked = doors.ask("ownerb01", RequestCode.LOCK_BATCH_MQ, {}, owners_lock)
    assert locked.code == ResponseCode.SUCCESS and json.loads(locked.body)["lockOKMQSet"] == [queue]
    assert doors.ask("ownerb01", RequestCode.UNLOCK_BATCH_MQ, {}, owners_lock).code == ResponseCode.SUCCESS


def test_a_group_offsets_and_connections_are_read_by_its_accounts_only(doors, member):
    # A topic the intruder may read: the group is what refuses.
    for code, fields in ((RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP_B, "topic": TOPIC_A,
                                                             "queueId": "0"}),
                         (RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP_B}),
                         (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP_B}),
                         (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP_B})):
        _refused(doors.ask("intruder", code, fields), "group:RecGroupB")
        assert doors.ask("ownerb01", code, {**fields, "topic": TOPIC_B}).code == ResponseCode.SUCCESS, code
    # (The owner's would be relayed to its client, which this raw one does not answer.)
    _refused(doors.ask("intruder", RequestCode.GET_CONSUMER_RUNNING_INFO,
                       {"consumerGroup": GROUP_B, "clientId": member}), "group:RecGroupB")
    _refused(doors.ask("intruder", RequestCode.GET_ALL_CONSUMER_OFFSET, {}), "Need admin permission for request code=43")
