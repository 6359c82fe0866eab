"""Requests as a peer could send them, for the handler and door fuzz targets: every field a handler
reads, valid, with a few dropped or replaced by edge values; bodies shaped as each code's handler
parses them (heartbeats, lock batches, subscription group and topic configs, batches, broker config
lines), damaged, or another code's."""

from __future__ import annotations

from hypothesis import strategies as st

from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.message import batch_format
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.wire_format import Command
from tests.fuzz.strategies import json_scalars, json_text, shaped_object

_names = st.sampled_from(("T", "G", "%RETRY%G", "%DLQ%G", "TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_REVIVE_LOG_C",
                          "bad name!", "", "t" * 128, "RMQ_SYS_TRANS_HALF_TOPIC", "broker-a"))
_numbers = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(("2147483648", "-2147483649", str(1 << 63),
                                                                    str(1 << 70), "1e3", "x", "", " 1", "0x1")))
_handles = st.builds("v1 {} {} {} {} {} {} {} {}".format, *([st.integers(0, 50)] * 7), _names)
_free_text = st.one_of(st.text(max_size=16), _numbers, _names, _handles)
_properties = st.lists(st.tuples(st.sampled_from(("TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TIMER_DELIVER_MS", "WAIT",
                                                  "TRAN_MSG", "PGROUP", "REAL_TOPIC", "__SHARDINGKEY", "a")),
                                 st.one_of(_numbers, st.text(max_size=6), st.just("true"))), max_size=4).map(
    lambda pairs: properties_text(pairs))
_expressions = st.sampled_from(("*", "a || b", "", "a > 1 AND b = 'x'", "a >", "TAGS IS NOT NULL", "((", "a IN ()"))
_field_values = {
    "topic": _names, "b": _names, "consumerGroup": _names, "producerGroup": _names, "a": _names, "group": _names,
    "queueId": _numbers, "e": _numbers, "queueOffset": _numbers, "commitOffset": _numbers, "maxMsgNums": _numbers,
    "sysFlag": _numbers, "f": _numbers, "bornTimestamp": _numbers, "g": _numbers, "flag": _numbers,
    "properties": _properties, "i": _properties, "expressionType": st.sampled_from(("TAG", "SQL92", "x")),
    "subscription": _expressions, "subVersion": _numbers, "suspendTimeoutMillis": st.just("0"),
    "pollTime": st.just("0"), "invisibleTime": _numbers, "extraInfo": _handles, "offset": _numbers,
    "delayLevel": _numbers, "originMsgId": _free_text, "maxReconsumeTimes": _numbers, "readQueueNums": _numbers,
    "writeQueueNums": _numbers, "perm": _numbers, "attributes": st.sampled_from(("+message.type=FIFO", ",", "-x",
                                                                                "+a=b")),
    "timestamp": _numbers, "msgId": _free_text, "key": _free_text, "beginTimestamp": _numbers,
    "endTimestamp": _numbers, "clientID": _free_text, "tranStateTableOffset": _numbers, "commitLogOffset": _numbers,
    "commitOrRollback": _numbers, "isForce": st.sampled_from(("true", "false", "x")), "brokerName": _names,
    "brokerAddr": st.sampled_from(("127.0.0.1:1", "h:1", "not a host", "")), "clusterName": _names,
    "brokerId": _numbers, "detail": st.sampled_from(("true", "false")),
}
# Every field a handler reads, with a value that passes: a request starts from these and has a few
# dropped or replaced, so it gets past the first check and into the handler's deeper parsing.
VALID_FIELDS = {
    "topic": "T", "consumerGroup": "G", "group": "G", "groupName": "G", "producerGroup": "PG", "queueId": "0",
    "queueOffset": "0", "offset": "0", "maxMsgNums": "4", "commitOffset": "0", "sysFlag": "0", "timestamp": "0",
    "suspendTimeoutMillis": "0", "pollTime": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
    "invisibleTime": "5000", "order": "false", "initMode": "0", "expType": "TAG", "exp": "*", "bornTime": "0",
    "extraInfo": "v1 0 0 5000 0 0 0 0 broker-a", "properties": properties_text([("UNIQ_KEY", "U1")]),
    "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "bornTimestamp": "0", "flag": "0",
    "reconsumeTimes": "0", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "topicSysFlag": "0",
    "attributes": "", "delayLevel": "0", "originMsgId": "0A0000010000000000000000", "originTopic": "T",
    "maxReconsumeTimes": "16", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8",
    "fromTransactionCheck": "false", "msgId": "7F00000100002A9F0000000000000000", "transactionId": "t",
    "key": "k", "maxNum": "4", "beginTimestamp": "0", "endTimestamp": str(1 << 62), "isForce": "true",
    "clientId": "c", "clientID": "c", "jstackEnable": "false", "statsName": "TOPIC_PUT_NUMS", "statsKey": "T",
    "detail": "true", "cleanOffset": "false", "brokerName": "broker-b", "brokerId": "0",
    "brokerAddr": "127.0.0.1:10999", "clusterName": "C", "masterEpoch": "0", "haServerAddr": "",
    "remotingAddr": "", "a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
    "i": properties_text([("UNIQ_KEY", "U2")]), "j": "0", "k": "false", "l": "16", "m": "false"}
_changes = st.lists(st.tuples(st.sampled_from(sorted(VALID_FIELDS)),
                              st.one_of(st.none(), *_field_values.values(), _free_text)), max_size=4)


def _with_changes(changes) -> dict[str, str]:
    fields = dict(VALID_FIELDS)
    for name, value in changes:
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = str(value)
    return fields


fields = _changes.map(_with_changes)
_mq = shaped_object({"topic": _names, "brokerName": _names, "queueId": st.integers(-2, 40)})
_heartbeat = shaped_object({
    "clientID": _free_text,
    "consumerDataSet": st.lists(shaped_object({
        "groupName": _names, "consumeType": st.sampled_from(("CONSUME_PASSIVELY", "CONSUME_ACTIVELY", 1)),
        "messageModel": st.sampled_from(("CLUSTERING", "BROADCASTING", "1", 7)),
        "consumeFromWhere": st.text(max_size=6),
        "subscriptionDataSet": st.lists(shaped_object({"topic": _names, "subString": _expressions,
                                                       "expressionType": st.sampled_from(("TAG", "SQL92", "?")),
                                                       "tagsSet": st.lists(st.text(max_size=4), max_size=2)}),
                                        max_size=2)}), max_size=2),
    "producerDataSet": st.lists(shaped_object({"groupName": _names}), max_size=2)})
_lock_batch = shaped_object({"consumerGroup": _names, "clientId": _free_text, "mqSet": st.lists(_mq, max_size=3)})
_group_config = shaped_object({"groupName": _names, "consumeEnable": st.booleans(), "retryMaxTimes": _numbers,
                               "consumeMessageOrderly": st.booleans(), "brokerId": st.integers(-1, 3)})
_topic_table = shaped_object({"topicConfigTable": st.dictionaries(_names, shaped_object({
    "topicName": _names, "readQueueNums": st.one_of(st.integers(-1, 64), json_scalars),
    "writeQueueNums": st.one_of(st.integers(-1, 64), json_scalars), "perm": st.one_of(st.integers(-1, 7), json_scalars),
    "attributes": st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2)}), max_size=3)})
_batches = st.lists(st.tuples(st.integers(-1, 3), st.binary(max_size=16), _properties.map(str.encode)),
                    max_size=3).map(batch_format.encode_items)
_settings_lines = st.lists(st.sampled_from(("autoCreateTopicEnable=true", "transactionTimeOut=x", "fileReservedTime=-1",
                                            "deleteWhen=99", "brokerName=x", "=", "a=b=c", "#x", "slaveReadEnable=1")),
                           max_size=3).map(lambda lines: "\n".join(lines).encode())
# The body each code parses, shaped (and damaged); any code may get another's body or bytes.
_BODY_OF = {RequestCode.HEART_BEAT: json_text(_heartbeat), RequestCode.LOCK_BATCH_MQ: json_text(_lock_batch),
            RequestCode.UNLOCK_BATCH_MQ: json_text(_lock_batch),
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: json_text(_group_config),
            RequestCode.REGISTER_BROKER: json_text(_topic_table), RequestCode.SEND_BATCH_MESSAGE: _batches,
            RequestCode.UPDATE_BROKER_CONFIG: _settings_lines}
_any_body = st.one_of(st.binary(max_size=32), st.just(b""), *_BODY_OF.values())


def request(code: int) -> st.SearchStrategy:
    body = _BODY_OF.get(code, st.binary(max_size=32))
    return st.builds(Command, st.just(code), fields, st.one_of(body, body, _any_body))
