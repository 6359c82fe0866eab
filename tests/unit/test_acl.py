"""Access control's pure parts: plain_acl.yml parsing, white address patterns, permission words, the
resources each request needs, the signatures real clients compute (golden values from openssl and
from the RocketMQ 5 Python client's own signer), and RocketMQ's order of decisions."""

from __future__ import annotations

import json

import pytest
import yaml

from rocketbox.cluster.acl.addresses import AclFormatError, address_matcher, host_of
from rocketbox.cluster.acl.decision import AUTHENTICATION, AUTHORIZATION, Caller, decide
from rocketbox.cluster.acl.model import parse_acl
from rocketbox.cluster.acl.permissions import DENY, PUB, SUB, describe, parse_permission, permits
from rocketbox.cluster.acl.resources import UnreadableRequest, needed_resources, needs_admin
from rocketbox.cluster.acl.signature import (grpc_authorization, grpc_signature_ok, parse_basic,
                                             parse_grpc_authorization, remoting_content, remoting_signature,
                                             remoting_signature_ok, sign_remoting)
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.wire_format import Command

pytestmark = pytest.mark.timeout(60)

# RocketMQ's distribution/conf/plain_acl.yml, as its users start from it.
DISTRIBUTION_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def _config(text: str = DISTRIBUTION_ACL):
    return parse_acl(yaml.safe_load(text))


def test_distribution_file_parses_as_rocketmq_reads_it():
    config = _config()
    assert [p for p, _ in config.global_white] == ["10.10.103.*", "192.168.0.*"]
    first, admin = config.accounts["RocketMQ"], config.accounts["rocketmq2"]
    assert first.secret_key == "12345678"          # a YAML integer, read as its text
    assert not first.admin and admin.admin
    assert first.default_topic_perm == DENY and first.default_group_perm == SUB
    assert first.resource_perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB,
                                    "%RETRY%groupA": DENY, "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB}
    assert first.permission_of("topicZ") == DENY and first.permission_of("%RETRY%groupZ") == SUB
    assert admin.default_topic_perm == DENY        # missing = DENY
    assert not first.white_match("192.168.1.5") and admin.white_match("192.168.1.5")


@pytest.mark.parametrize("text, problem", [
    ("accounts: [{accessKey: short, secretKey: 12345678}]", "longer than 6"),
    ("accounts: [{accessKey: longenough, secretKey: 123}]", "longer than 6"),
    ("accounts: [{secretKey: 12345678}]", "accessKey is missing"),
    ("accounts: [{accessKey: longenough, secretKey: 12345678, topicPerms: [noequals]}]", "name=PERMISSION"),
    ("accounts: [{accessKey: longenough, secretKey: 12345678, topicPerms: topicA=PUB}]", "not a list"),
    ("accounts: [{accessKey: longenough, secretKey: 12345678, admin: maybe}]", "not true or false"),
    ("accounts: [{accessKey: longenough, secretKey: 12345678, whiteRemoteAddress: 300.1.1.1}]", "not an IP"),
    ("globalWhiteRemoteAddresses: [192.168.*]", "four parts"),
    ("globalWhiteRemoteAddresses: 10.0.0.1", "not a list"),
    ("accounts: {accessKey: x}", "not a list"),
    ("- a\n- b", "not a mapping"),
    ("accounts: [17]", "not a mapping"),
])
def test_bad_files_are_refused_with_the_reason(text, problem):
    with pytest.raises(AclFormatError, match=problem):
        _config(text)


def test_unknown_words_read_as_deny_and_are_noted_and_repeats_keep_the_first():
    config = _config("accounts:\n"
                     "  - {accessKey: account1, secretKey: secret11, defaultTopicPerm: WRITE, topicPerms: [t=ALL]}\n"
                     "  - {accessKey: account1, secretKey: secret22}\n")
    account = config.accounts["account1"]
    assert account.secret_key == "secret11"
    assert account.default_topic_perm == DENY and account.resource_perms == {"t": DENY}
    assert len(config.warnings) == 3 and "listed again" in config.warnings[-1]
    assert _config("") == parse_acl(None)          # an empty file: no account


@pytest.mark.parametrize("word, bits", [("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB), ("SUB|PUB", PUB | SUB),
                                        (" DENY ", DENY), ("pub", DENY), ("", DENY), (None, DENY)])
def test_permission_words(word, bits):
    assert parse_permission(word) == bits


def test_permits_follows_rocketmq():
    assert permits(PUB, PUB | SUB) and permits(SUB, SUB) and not permits(PUB, SUB)
    assert not permits(PUB, PUB | SUB | DENY)
    assert describe(PUB | SUB) == "PUB|SUB" and describe(DENY) == "DENY"


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("10.10.1-100.*", ["10.10.1.9", "10.10.100.0"], ["10.10.101.1", "10.10.0.1"]),
    ("10.10.10.1-100", ["10.10.10.50"], ["10.10.10.101"]),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
    ("127.0.0.1,10.0.0.2", ["127.0.0.1", "10.0.0.2"], ["10.0.0.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "garbage"]),
    ("::1", ["0:0:0:0:0:0:0:1", "::1"], ["::2"]),
    ("fe80:0:0:0:0:0:0:1-ff", ["fe80::10"], ["fe80::100", "fe81::10"]),
    ("", [], ["127.0.0.1"]),
])
def test_address_patterns(pattern, yes, no):
    match = address_matcher(pattern)
    assert all(match(a) for a in yes) and not any(match(a) for a in no)


# Braces hold the last part only: RocketMQ refuses 10.10.{1,2}.* too (it splits it at the comma).
@pytest.mark.parametrize("pattern", ["10.0.0.300", "1.2.3.x-y", "10.0.0.5-1", "fe80::1-ff", "a.b", "10.0.*",
                                     "10.10.{1,2}.*", "10.{1,2}"])
def test_bad_address_patterns(pattern):
    with pytest.raises(AclFormatError):
        address_matcher(pattern)


def test_host_of_strips_ports():
    assert host_of("10.0.0.1:5555") == "10.0.0.1" and host_of("[::1]:9876") == "::1"
    assert host_of("10.0.0.1") == "10.0.0.1" and host_of("::1") == "::1" and host_of("") == ""


def _cmd(code, fields=None, body=b""):
    return Command(int(code), dict(fields or {}), body)


@pytest.mark.parametrize("cmd, needed", [
    (_cmd(RequestCode.SEND_MESSAGE, {"topic": "T", "group": "P"}), {"T": PUB}),
    (_cmd(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}), {"T": PUB}),
    (_cmd(RequestCode.SEND_BATCH_MESSAGE, {"b": "%RETRY%G", "a": "G"}), {"%RETRY%G": SUB}),
    (_cmd(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}), {"T": SUB, "%RETRY%G": SUB}),
    (_cmd(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"}), {"T": SUB, "%RETRY%G": SUB}),
    (_cmd(RequestCode.POP_MESSAGE, {"topic": "T", "consumerGroup": "G"}), {"T": SUB, "%RETRY%G": SUB}),
    (_cmd(RequestCode.QUERY_MESSAGE, {"topic": "T"}), {"T": SUB}),
    (_cmd(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}), {"%RETRY%G": SUB}),
    (_cmd(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}), {"%RETRY%G": SUB}),
    (_cmd(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}), {"%RETRY%G": SUB}),
    (_cmd(RequestCode.HEART_BEAT, body=json.dumps({"consumerDataSet": [
        {"groupName": "G", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "%RETRY%G"}]}],
        "producerDataSet": [{"groupName": "P"}]}).encode()), {"%RETRY%G": SUB, "T1": SUB}),
    (_cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), {}),
])
def test_needed_resources(cmd, needed):
    assert needed_resources(cmd) == needed


@pytest.mark.parametrize("body", [b"{nope", b"\xff\xfe", b"[" * 5000 + b"]" * 5000])
def test_an_unreadable_heartbeat_says_so(body):
    with pytest.raises(UnreadableRequest, match="not JSON"):
        needed_resources(_cmd(RequestCode.HEART_BEAT, body=body))


def test_admin_codes():
    for code in (17, 25, 215, 200, 207, 216, 329, 222, 103, 904, 1003, 1004, 1005, 1007):
        assert needs_admin(code)
    for code in (10, 11, 34, 105, 26):
        assert not needs_admin(code)


def test_remoting_signature_golden():
    """openssl: printf 'RocketMQALIYUNPIDtopicBhello' | openssl dgst -sha1 -hmac 12345678 -binary | base64"""
    fields = {"b": "topicB", "a": "PID", "OnsChannel": "ALIYUN", "AccessKey": "RocketMQ"}
    assert remoting_content(fields, b"hello") == b"RocketMQALIYUNPIDtopicBhello"
    assert remoting_signature("12345678", remoting_content(fields, b"hello")) == "DEx7LPre2c6B9f4V5v+0ivtOX3A="
    signed = sign_remoting({"b": "topicB", "a": "PID", "OnsChannel": "ALIYUN"}, b"hello", "RocketMQ", "12345678")
    assert signed["Signature"] == "DEx7LPre2c6B9f4V5v+0ivtOX3A="
    assert remoting_signature_ok("12345678", {**signed, "_UNIQUE_KEY_QUERY": "false"}, b"hello")
    assert not remoting_signature_ok("12345679", signed, b"hello")
    assert not remoting_signature_ok("12345678", signed, b"hellO")
    assert not remoting_signature_ok("12345678", {**signed, "b": "topicC"}, b"hello")
    assert not remoting_signature_ok("12345678", {k: v for k, v in signed.items() if k != "Signature"}, b"hello")


def test_grpc_authorization_golden():
    """The RocketMQ 5 Python client's Signature.sign('12345678', '20240101T101010Z'), and openssl's."""
    header = grpc_authorization("RocketMQ", "12345678", "20240101T101010Z")
    parsed = parse_grpc_authorization(header)
    assert parsed.access_key == "RocketMQ" and parsed.signed_headers == "x-mq-date-time"
    assert parsed.signature == "3854034966b9331348925ba667c94d96ade89613"
    assert grpc_signature_ok("12345678", "20240101T101010Z", parsed.signature.upper())
    assert not grpc_signature_ok("12345678", "20240101T101011Z", parsed.signature)
    for bad in ("", "Bearer x", "MQv2-HMAC-SHA1 Credential=a, Signature=b"):
        with pytest.raises(ValueError):
            parse_grpc_authorization(bad)


def test_http_basic():
    assert parse_basic("Basic Um9ja2V0TVE6MTIzNDU2Nzg=") == ("RocketMQ", "12345678")
    assert parse_basic("basic Um9ja2V0TVE6MTIzNDU2Nzg=") == ("RocketMQ", "12345678")
    for bad in (None, "", "Basic", "Basic !!!", "Bearer Um9ja2V0TVE6MTIzNDU2Nzg=", "Basic bm9jb2xvbg=="):
        assert parse_basic(bad) is None


def _signed_caller(address, key, secret):
    return Caller(address, key, lambda owned: owned == secret)


@pytest.mark.parametrize("caller, code, needed, admin_only, kind, reason", [
    (Caller("10.10.103.7", None), 17, {}, True, None, ""),                        # globally white: anything
    (Caller("10.0.0.1", None), 10, {"topicB": PUB}, False, AUTHENTICATION, "No accessKey is configured"),
    (Caller("10.0.0.1", None, None, "the CURVE key K is no account's"), 10, {}, False, AUTHENTICATION, "CURVE key K"),
    (_signed_caller("10.0.0.1", "stranger", "x"), 10, {}, False, AUTHENTICATION, "No acl config for stranger"),
    (_signed_caller("10.0.0.1", "RocketMQ", "wrong"), 10, {"topicB": PUB}, False, AUTHENTICATION,
     "Check signature failed for accessKey=RocketMQ"),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 10, {"topicB": PUB}, False, None, ""),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 10, {"topicA": PUB}, False, AUTHORIZATION,
     "No permission for topic:topicA: accessKey=RocketMQ needs PUB, has DENY"),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 10, {"topicC": PUB}, False, AUTHORIZATION, "has SUB"),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 10, {"topicZ": PUB}, False, AUTHORIZATION, "(its default)"),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 11, {"topicC": SUB, "%RETRY%groupZ": SUB}, False, None, ""),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 11, {"topicC": SUB, "%RETRY%groupA": SUB}, False,
     AUTHORIZATION, "group:groupA"),
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 215, {}, True, AUTHORIZATION,
     "Need admin permission for request code=215, but accessKey=RocketMQ is not"),
    (_signed_caller("10.0.0.1", "rocketmq2", "12345678"), 215, {}, True, None, ""),
    (_signed_caller("10.0.0.1", "rocketmq2", "12345678"), 10, {"anyTopic": PUB}, False, None, ""),  # admin, no list
    (_signed_caller("192.168.1.9", "rocketmq2", "unsigned"), 215, {}, True, None, ""),  # its white address
    (Caller("10.0.0.1", "rocketmq2"), 10, {"anyTopic": PUB}, False, None, ""),   # CURVE: no proof to check
    (_signed_caller("10.0.0.1", "RocketMQ", "12345678"), 10, {"RMQ_SYS_TRACE_TOPIC": PUB}, False, None, ""),
])
def test_decisions_follow_rocketmq_order(caller, code, needed, admin_only, kind, reason):
    refusal = decide(_config(), caller, code, needed, admin_only)
    if kind is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.kind == kind and reason in refusal.reason
        assert "12345678" not in refusal.reason


def test_acl_files_that_do_not_read_are_refused_and_a_reload_keeps_the_accounts(tmp_path):
    from rocketbox.cluster.acl.acl_file import AclFile, read_acl_file
    path = tmp_path / "plain_acl.yml"
    # \U escapes past Unicode: PyYAML's chr() raises ValueError or OverflowError (found by the fuzz test).
    for text, problem in (("accounts: [", "not YAML"), ("[" * 5000 + "]" * 5000, "not YAML"),
                          ('accounts: "\\U0011FFFF"', "not YAML"), ('accounts: "\\U99999999"', "not YAML"),
                          ("accounts: 3", "not a list")):
        path.write_text(text)
        with pytest.raises(AclFormatError, match=problem):
            read_acl_file(str(path))
    with pytest.raises(AclFormatError, match="cannot read"):
        read_acl_file(str(tmp_path / "missing.yml"))
    path.write_text(DISTRIBUTION_ACL)
    acl = AclFile(str(path))
    assert not acl.reload_if_changed()                 # nothing changed
    path.write_text("accounts: [{accessKey: short}]")
    assert not acl.reload_if_changed() and "RocketMQ" in acl.config.accounts   # broken: the old accounts hold
    path.write_text(DISTRIBUTION_ACL.replace("rocketmq2", "rocketmq3"))
    assert acl.reload_if_changed() and "rocketmq3" in acl.config.accounts and acl.loads == 2
