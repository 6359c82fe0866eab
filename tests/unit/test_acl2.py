"""ACL 2.0 (RocketMQ 5.3's auth module): resources and their patterns, the policy entry that decides,
authentication and authorization with Apache's refusal texts, the store's edits, the migration
from a plain_acl.yml, and the topology's choice between ACL 1.0 and 2.0."""

from __future__ import annotations

import json

import pytest

from rocketbox.cluster.acl.auth_decision import deciding_entry
from rocketbox.cluster.acl.auth_migration import migrate_plain_acl
from rocketbox.cluster.acl.auth_model import AuthError, AuthStore, parse_policies, parse_resource
from rocketbox.cluster.acl.auth_store import ensure, read_auth_file
from rocketbox.cluster.acl.decision import AUTHENTICATION, AUTHORIZATION, Caller, decide
from rocketbox.cluster.acl.permissions import PUB, SUB
from rocketbox.cluster.acl.signature import remoting_signature_ok, sign_remoting
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.topology import access_file

pytestmark = pytest.mark.timeout(30)


def _store(acls: dict[str, list] | None = None, **users) -> AuthStore:
    """users: name -> (password, type[, status]); acls: name -> the policies of its AclInfo."""
    data = {"clusterName": "DefaultCluster",
            "users": [{"username": n, "password": u[0], "userType": u[1], "userStatus": (u[2:] or ("enable",))[0]}
                      for n, u in users.items()],
            "acls": [{"subject": f"User:{n}", "policies": p} for n, p in (acls or {}).items()]}
    return AuthStore(json.loads(json.dumps(data)))


def _signed(user: str, secret: str, address: str = "127.0.0.1", fields: dict | None = None) -> Caller:
    """A remoting caller that signed its request with ``secret`` as RocketMQ's clients do."""
    signed = sign_remoting(fields or {"topic": "orders", "queueId": "0"}, b"body", user, secret)
    return Caller(address, user, lambda password: remoting_signature_ok(password, signed, b"body"))


def _entries(*entries: dict, kind: str = "Custom") -> list[dict]:
    return [{"policyType": kind, "entries": list(entries)}]


def test_resources_parse_as_apache_reads_them():
    assert parse_resource("*").key == "*" and parse_resource("*").type == "Any"
    literal, prefixed, anyone = parse_resource("Topic:orders"), parse_resource("topic:ord*"), parse_resource("Group:*")
    assert (literal.type, literal.name, literal.pattern) == ("Topic", "orders", "LITERAL")
    assert (prefixed.type, prefixed.name, prefixed.pattern, prefixed.key) == ("Topic", "ord", "PREFIXED", "Topic:ord*")
    assert (anyone.type, anyone.pattern, anyone.key) == ("Group", "ANY", "Group:*")
    assert parse_resource("Queue:x") is None and parse_resource(" ") is None
    assert prefixed.matches(literal) and not prefixed.matches(parse_resource("Group:orders"))
    assert parse_resource("*").matches(parse_resource("Cluster:c"))


def test_the_most_specific_matching_entry_decides_and_custom_comes_before_default():
    policies = parse_policies(_entries(
        {"resource": "Topic:*", "actions": ["All"], "decision": "Allow"},
        {"resource": "Topic:pay*", "actions": ["Pub"], "decision": "Deny"},
        {"resource": "Topic:payments-open*", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Topic:payments-open-frozen", "actions": ["Pub", "Sub"], "decision": "Deny"})
        + _entries({"resource": "Group:*", "actions": ["Sub"], "decision": "Allow"}, kind="Default"))

    def decision(name: str, action: str = "Pub", kind: str = "Topic") -> str | None:
        entry = deciding_entry(policies, parse_resource(f"{kind}:{name}"), (action,), "127.0.0.1")
        return entry.decision if entry else None

    assert decision("orders") == "Allow"                      # only Topic:* matches
    assert decision("payroll") == "Deny"                      # a prefix beats ANY
    assert decision("payments-open-1") == "Allow"             # the longer prefix wins
    assert decision("payments-open-frozen", "Sub") == "Deny"  # a literal beats every prefix
    assert decision("payroll", "Sub") == "Allow"              # Topic:pay* names Pub only: Topic:* decides
    assert decision("g1", "Sub", "Group") == "Allow"          # no Custom entry matches: the Default policy
    assert decision("g1", "Pub", "Group") is None


def test_source_ips_limit_an_entry_to_addresses_and_cidr_blocks():
    policies = parse_policies(_entries({"resource": "Topic:orders", "actions": ["Pub"],
                                        "sourceIps": ["10.1.0.0/16", "127.0.0.1"], "decision": "Allow"}))
    wanted = parse_resource("Topic:orders")
    assert deciding_entry(policies, wanted, ("Pub",), "10.1.200.3")
    assert deciding_entry(policies, wanted, ("Pub",), "127.0.0.1")
    assert deciding_entry(policies, wanted, ("Pub",), "10.2.0.1") is None


def test_authentication_refusals_carry_apaches_text():
    store = _store(alice=("alice-secret", "Normal"), carol=("carol-secret", "Normal", "disable"))
    send = RequestCode.SEND_MESSAGE
    assert decide(store, _signed("alice", "wrong-secret"), send, {}, False).reason == "check signature failed."
    assert decide(store, _signed("nobody", "x"), send, {}, False).reason == "User:nobody is not found."
    assert decide(store, _signed("carol", "carol-secret"), send, {}, False).reason == "User:carol is disabled."
    unsigned = decide(store, Caller("127.0.0.1", None), send, {}, False)
    assert (unsigned.kind, unsigned.reason) == (AUTHENTICATION, "username cannot be null.")
    assert decide(store, _signed("alice", "alice-secret"), send, {}, False) is None


def test_authorization_allows_what_a_policy_allows_and_refuses_with_apaches_reason():
    store = _store({"alice": _entries({"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"},
                                      {"resource": "Topic:audit", "actions": ["All"], "decision": "Deny"},
                                      {"resource": "Group:billing", "actions": ["Sub"], "decision": "Allow"})},
                   alice=("alice-secret", "Normal"), root=("root-secret", "Super"))
    alice = _signed("alice", "alice-secret", "10.0.0.7")
    assert decide(store, alice, RequestCode.SEND_MESSAGE, {"orders": PUB}, False) is None
    assert decide(store, alice, RequestCode.PULL_MESSAGE, {"%RETRY%billing": SUB}, False) is None
    refused = decide(store, alice, RequestCode.PULL_MESSAGE, {"orders": SUB}, False)
    assert (refused.kind, refused.reason) == (
        AUTHORIZATION, "User:alice has no permission to access Topic:orders from 10.0.0.7, no matched policies.")
    denied = decide(store, alice, RequestCode.SEND_MESSAGE, {"audit": PUB}, False)
    assert denied.reason == "User:alice has no permission to access Topic:audit from 10.0.0.7, the decision is deny."
    admin = decide(store, alice, RequestCode.AUTH_CREATE_USER, {}, True)
    assert admin.reason == ("User:alice has no permission to access Cluster:DefaultCluster from 10.0.0.7, "
                            "no matched policies.")
    root = _signed("root", "root-secret")
    assert decide(store, root, RequestCode.AUTH_CREATE_USER, {"audit": PUB}, True) is None   # Super: anything


def test_edits_refuse_what_apache_refuses():
    store = _store(alice=("alice-secret", "Normal"))
    with pytest.raises(AuthError, match="The user is existed"):
        store.create_user({"username": "alice", "password": "x", "userType": "Normal", "userStatus": "enable"})
    with pytest.raises(AuthError, match="The subject of User:bob is not exist."):
        store.put_acl("User:bob", parse_policies(_entries({"resource": "Topic:t", "actions": ["Pub"],
                                                            "decision": "Allow"})))
    for entry, text in (({"resource": "Topic:t", "actions": ["Any"], "decision": "Allow"}, "can not be Any"),
                        ({"resource": "Queue:t", "actions": ["Pub"], "decision": "Allow"}, "The resource is null."),
                        ({"resource": "Topic:t", "actions": ["Pub"], "decision": "Maybe"}, "decision is null"),
                        ({"resource": "Topic:t", "actions": ["Pub"], "sourceIps": ["10.0.0.300"],
                          "decision": "Allow"}, "The source ip is invalid.")):
        with pytest.raises(AuthError, match=text):
            parse_policies(_entries(entry))
    store.put_acl("User:alice", parse_policies(_entries({"resource": "Topic:t", "actions": ["Pub"],
                                                          "decision": "Allow"})))
    store.put_acl("User:alice", parse_policies(_entries({"resource": "Topic:t", "actions": ["Sub"],
                                                          "decision": "Deny"},
                                                         {"resource": "Topic:u", "actions": ["Pub"],
                                                          "decision": "Allow"})))
    entries = store.acl_of("User:alice")["policies"][0]["entries"]
    assert [(e["resource"], e["actions"], e["decision"]) for e in entries] == [
        ("Topic:t", ["Sub"], "Deny"), ("Topic:u", ["Pub"], "Allow")]   # same resource replaced, others added
    store.delete_acl("User:alice", None, "Topic:t")
    assert [e["resource"] for e in store.acl_of("User:alice")["policies"][0]["entries"]] == ["Topic:u"]
    store.delete_user("alice")
    assert store.acl_of("User:alice") is None and not store.users


def test_a_plain_acl_yml_migrates_to_users_and_acls_that_decide_as_before(tmp_path):
    plain = tmp_path / "plain_acl.yml"
    plain.write_text("""
accounts:
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
  - accessKey: writer01
    secretKey: writer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["orders=PUB|SUB", "audit=SUB"]
    groupPerms: ["billing=DENY"]
""")
    path = str(tmp_path / "auth" / "auth.json")
    ensure(path, "DefaultCluster", json.dumps({"username": "rocketmq", "password": "init-secret"}),
           json.dumps({"accessKey": "inner-user", "secretKey": "inner-secret"}), migrate_plain_acl(str(plain)))
    store = read_auth_file(path)
    assert {n: u["userType"] for n, u in store.users.items()} == {
        "rocketmq": "Super", "inner-user": "Super", "rocketmq2": "Super", "writer01": "Normal"}
    assert store.users["rocketmq2"]["password"] == "12345678"
    writer = _signed("writer01", "writer-secret")
    assert decide(store, writer, RequestCode.SEND_MESSAGE, {"orders": PUB}, False) is None
    assert "the decision is deny" in decide(store, writer, RequestCode.SEND_MESSAGE, {"other": PUB}, False).reason
    # audit=SUB names no Pub: the Default policy (defaultTopicPerm DENY: All, Deny) decides, as in Apache.
    assert "Topic:audit from 127.0.0.1, the decision is deny." in decide(
        store, writer, RequestCode.SEND_MESSAGE, {"audit": PUB}, False).reason
    assert decide(store, writer, RequestCode.PULL_MESSAGE, {"%RETRY%anygroup": SUB}, False) is None
    assert "Group:billing" in decide(store, writer, RequestCode.PULL_MESSAGE, {"%RETRY%billing": SUB}, False).reason
    # A second start changes nothing a user already set.
    ensure(path, "DefaultCluster", json.dumps({"username": "rocketmq", "password": "other"}), "",
           migrate_plain_acl(str(plain)))
    assert read_auth_file(path).users["rocketmq"]["password"] == "init-secret"


def test_a_cluster_runs_acl_1_or_acl_2():
    both = {"authentication_enabled": True, "authorization_enabled": True}
    assert access_file("/d", "/conf/plain_acl.yml", {}) == ("/conf/plain_acl.yml", "")
    assert access_file("/d", "", both) == ("/d/auth/auth.json", "")
    assert access_file("/d", "/c/p.yml", {**both, "migrate_auth_from_v1_enabled": True,
                                          "auth_config_path": "/e"}) == ("/e/auth.json", "/c/p.yml")
    with pytest.raises(ValueError, match="not both"):
        access_file("/d", "/c/p.yml", both)
    with pytest.raises(ValueError, match="together"):
        access_file("/d", "", {"authentication_enabled": True})
