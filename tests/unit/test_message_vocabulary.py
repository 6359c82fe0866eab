"""The message's vocabulary (cluster/message/): the properties text, the ids, the tag hash and the one
list of system topics every door, the console and the metrics ask."""

from hypothesis import given, strategies as st

from rocketbox.cluster.console.topics import SYSTEM, topic_kind
from rocketbox.cluster.message import system_topics
from rocketbox.cluster.message.ids import offset_msg_id, pack_host, parse_offset_msg_id, unique_id, unique_id_prefix
from rocketbox.cluster.message.properties import decode_properties, encode_properties, properties_text, property_mark
from rocketbox.cluster.message.tags import java_string_hash, tag_hash_code
from rocketbox.cluster.metrics.families import is_system
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.status import ProxyError


def test_properties_text_golden():
    """The properties string and the marks the broker searches it for."""
    assert properties_text([("TAGS", "A"), ("KEYS", "k1 k2")]) == "TAGS\x01A\x02KEYS\x01k1 k2\x02"
    assert encode_properties({"TAGS": "d"}) == b"TAGS\x01d\x02"
    assert encode_properties({}) == b""
    assert decode_properties(b"TAGS\x01d\x02KEYS\x01a b\x02NOVALUE\x02") == {"TAGS": "d", "KEYS": "a b", "NOVALUE": ""}
    assert property_mark("DELAY") == "DELAY\x01"
    assert property_mark("TRAN_MSG", "true") == "TRAN_MSG\x01true\x02"


def test_offset_msg_id_golden_and_parsed_back():
    host = pack_host("127.0.0.1", 10911)
    assert offset_msg_id(host, 1000) == "7F00000100002A9F00000000000003E8"
    assert parse_offset_msg_id("7F00000100002A9F00000000000003E8") == ("127.0.0.1", 10911, 1000)


def test_unique_id_golden_layout():
    prefix = unique_id_prefix(bytes([127, 0, 0, 1]), 0x12345, bytes([0xAB, 0xCD, 0xEF, 0x01]))
    assert prefix == "7F000001" "2345" "ABCDEF01"                # pid keeps its low 16 bits
    assert unique_id(prefix, 0x2A) == "7F0000012345ABCDEF01" "00000000002A"
    assert len(unique_id(prefix, 2**48 - 1)) == 32


def test_java_string_hash_known_values():
    # Values Java's String.hashCode() gives for these strings.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("TagA") == 2598919
    # Non-ASCII: UTF-16 code units, a surrogate pair counts as two.
    assert java_string_hash("é") == 233
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


@given(st.text(max_size=40))
def test_java_string_hash_matches_definition(s):
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    expected = h - (1 << 32) if h >= 1 << 31 else h
    assert java_string_hash(s) == expected


def test_tag_hash_code_zero_without_tag():
    assert tag_hash_code(None) == 0
    assert tag_hash_code("") == 0
    assert tag_hash_code("TagA") == 2598919


def test_java_string_hash_long_strings_take_the_loop():
    s = "k" * 300 + "é"
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    assert java_string_hash(s) == (h - (1 << 32) if h >= 1 << 31 else h)
    assert java_string_hash("k" * 256) == java_string_hash("k" * 255) * 31 + 107 - \
        ((java_string_hash("k" * 255) * 31 + 107 + (1 << 31)) // (1 << 32)) * (1 << 32)


ROCKETMQ_SYSTEM_TOPICS = ("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                          "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                          "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC")


def test_system_topics_are_rocketmqs_topic_validator():
    for topic in (*ROCKETMQ_SYSTEM_TOPICS, "rmq_sys_REVIVE_LOG_DefaultCluster", "rmq_sys_anything"):
        assert system_topics.is_system_topic(topic), topic
    for topic in ("RMQ_SYS_orders", "TopicTest", "%RETRY%G", "%DLQ%G", "rmq_SYS_x"):
        assert not system_topics.is_system_topic(topic), topic
    sendable = {"TBW102", "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_anything"}
    for topic in (*ROCKETMQ_SYSTEM_TOPICS, "rmq_sys_REVIVE_LOG_C", "rmq_sys_anything"):
        assert system_topics.is_not_sendable_topic(topic) == (topic not in sendable), topic


def test_proxy_console_and_metrics_ask_the_one_list():
    for topic in (*ROCKETMQ_SYSTEM_TOPICS, "rmq_sys_REVIVE_LOG_C", "RMQ_SYS_orders", "TopicTest"):
        system = system_topics.is_system_topic(topic)
        assert (topic_kind(topic, None)[0] == SYSTEM) == system, topic
        assert is_system(topic) == ("true" if system else "false"), topic
        try:
            validation.topic(topic)
            refused = False
        except ProxyError:
            refused = True
        assert refused == system, topic
