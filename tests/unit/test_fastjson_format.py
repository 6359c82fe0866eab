"""fastjson's dialect for maps keyed by MessageQueue objects: golden bytes and round trips."""

import pytest

from rocketbox.cluster.fastjson_format import FastjsonError, ObjectKey, dumps, loads, message_queue_key

pytestmark = pytest.mark.timeout(10)

# The shape mqadmin topicStatus reads (TopicStatsTable), fields in name order as fastjson writes them.
GOLDEN = ('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
          '{"lastUpdateTimestamp":1700000000000,"maxOffset":5,"minOffset":0}}}')


def test_message_queue_keys_are_written_as_objects():
    table = {message_queue_key("T", "broker-a", 0): {"lastUpdateTimestamp": 1700000000000, "maxOffset": 5,
                                                       "minOffset": 0}}
    assert dumps({"offsetTable": table}) == GOLDEN


def test_golden_parses_back_to_object_keys():
    parsed = loads(GOLDEN.encode())
    (key, value), = parsed["offsetTable"].items()
    assert isinstance(key, ObjectKey)
    assert key.as_dict() == {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    assert key == message_queue_key("T", "broker-a", 0)
    assert value["maxOffset"] == 5


def test_integer_keys_are_written_bare_as_fastjson_writes_them():
    """DelayOffsetSerializeWrapper's Map<Integer, Long>, as Apache's broker answers GET_ALL_DELAY_OFFSET."""
    golden = '{"offsetTable":{1:5,18:0}}'
    assert dumps({"offsetTable": {1: 5, 18: 0}}) == golden
    assert loads(golden) == {"offsetTable": {1: 5, 18: 0}}
    assert dumps({True: 1, "2": 2}) == '{"True":1,"2":2}'


# RocketMQ's ResetOffsetBody (INVOKE_BROKER_TO_RESET_OFFSET's answer, RESET_CONSUMER_CLIENT_OFFSET to Java).
RESET_GOLDEN = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}'
# ResetOffsetBodyForC: what the C++ client reads.
RESET_ROWS_GOLDEN = (b'{"offsetTable":[{"topic":"T","brokerName":"b","queueId":0,"offset":5},'
                     b'{"topic":"T","brokerName":"b","queueId":1,"offset":7}]}')


def test_reset_offset_bodies_in_both_forms():
    from rocketbox.cluster.protocol import MessageQueue, offset_table_from_reset_body, reset_offset_body
    offsets = {MessageQueue("T", "b", 1): 7, MessageQueue("T", "b", 0): 5}
    assert reset_offset_body(offsets) == RESET_GOLDEN
    assert reset_offset_body(offsets, rows=True) == RESET_ROWS_GOLDEN
    assert offset_table_from_reset_body(RESET_GOLDEN) == offsets == offset_table_from_reset_body(RESET_ROWS_GOLDEN)
    for bad in (b'{"offsetTable":{"T":5}}', b'{"offsetTable":[{"topic":"T"}]}', b'[1]', b'{"offsetTable":3}'):
        with pytest.raises(ValueError):
            offset_table_from_reset_body(bad)


def test_plain_json_is_read_as_json_reads_it():
    text = ' { "a" : [1, 2.5, -3e2, true, false, null, "x\\u00e9\\n"], "b": {} , "c": [] } '
    assert loads(text) == {"a": [1, 2.5, -300.0, True, False, None, "xé\n"], "b": {}, "c": []}


def test_non_ascii_is_kept_and_round_trips():
    value = {"k": "主题", message_queue_key("主题", "b", 3): {"consumeTps": 1.5}}
    assert loads(dumps(value)) == value


@pytest.mark.parametrize("bad", ['{"a":1', '{"a" 1}', '[1,]', '{"a":1}x', '', '{[1]:2}', '{{"a":[1]}:2}',
                                 'nul', '{"a":1,}', '"unterminated'])
def test_malformed_text_is_refused(bad):
    with pytest.raises(FastjsonError):
        loads(bad)


# Found by tests/fuzz: each escaped as RecursionError, UnicodeDecodeError or json's JSONDecodeError.
@pytest.mark.parametrize("bad", ["[" * 2000 + "]" * 2000, b"\x80", '"\\x"', '"abc', "1" * 5000,
                                 '{{"a":1,{"b":2}:3}:4}'])   # TypeError: sorting an ObjectKey among str keys
def test_what_python_would_raise_on_is_refused_as_fastjson_error(bad):
    with pytest.raises(FastjsonError):
        loads(bad)


def test_every_cut_of_the_golden_is_refused():
    for cut in range(len(GOLDEN)):
        with pytest.raises(ValueError):
            loads(GOLDEN[:cut])


def test_body_json_reads_apache_rocketmq_answers_as_plain_json():
    """Apache RocketMQ 4.9.8's NameServer answering GET_BROKER_CLUSTER_INFO (captured): fastjson writes
    ``brokerAddrs``, a map keyed by broker id, with bare numbers as keys. body_json gives what a JSON
    answer (RocketBox's) gives: string keys."""
    from rocketbox.cluster.fastjson_format import body_json
    apache = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:16911"},"brokerName":"broker-a",'
              b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
    assert body_json(apache) == {"brokerAddrTable": {"broker-a": {"brokerAddrs": {"0": "127.0.0.1:16911"},
                                                                  "brokerName": "broker-a",
                                                                  "cluster": "DefaultCluster"}},
                                 "clusterAddrTable": {"DefaultCluster": ["broker-a"]}}
    assert body_json(b'{"brokerAddrs":{"0":"a"}}') == {"brokerAddrs": {"0": "a"}}
    with pytest.raises(ValueError):
        body_json(b"{0:")
