"""What a controller node takes from a pickle (controller/raft_wire.py) and its secret file
(controller/secret.py), in process."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from rocketbox.cluster.controller import raft_wire
from rocketbox.cluster.controller.secret import ControllerSecretError, default_secret_path, make_secret, read_secret
from rocketbox.cluster.controller.state import ControllerState, Replica


class _RunsCode:
    def __reduce__(self):
        return os.system, ("true",)


def test_the_allow_list_takes_the_controller_state_and_pysyncobj_messages():
    state = ControllerState()
    state.register("broker-a", Replica(1, "127.0.0.1:10911", "127.0.0.1:10912"))
    message = {"type": "append_entries", "term": 3, "entries": [(b"\x01payload", 7, 3)], "peers": {"a", "b"},
               "frozen": frozenset({1, 2}), "state": state}
    loaded = raft_wire._loads(pickle.dumps(message, 2))   # PySyncObj's protocol
    assert loaded["entries"] == message["entries"] and loaded["frozen"] == {1, 2}
    assert loaded["state"].group("broker-a").replica(1) == Replica(1, "127.0.0.1:10911", "127.0.0.1:10912")


@pytest.mark.parametrize("payload", [_RunsCode(), pickle.loads, ControllerSecretError("a class of ours not on the list")])
def test_the_allow_list_refuses_every_other_global(payload):
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        raft_wire._loads(pickle.dumps(payload, 2))


def test_bytes_come_only_through_latin1():
    crafted = pickle.dumps(b"\xff\x00", 2).replace(b"latin1", b"rot13_")
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        raft_wire._loads(crafted)


def test_the_secret_is_made_once_owner_only_and_read_back(tmp_path):
    path = default_secret_path(str(tmp_path / "data"))
    assert path == str(tmp_path / "data" / "controller.secret")
    make_secret(path)
    first = read_secret(path)
    assert len(first) == 64 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    make_secret(path)   # kept: every node of a cluster must hold the same one
    assert read_secret(path) == first
    assert default_secret_path(str(tmp_path / "data"), str(tmp_path / "acl" / "plain_acl.yml")) == \
        str(tmp_path / "acl" / "controller.secret")


def test_a_missing_or_malformed_secret_is_refused_with_the_file(tmp_path, caplog):
    with pytest.raises(ControllerSecretError, match="cannot read the controller secret .*missing"):
        read_secret(str(tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_text("not a secret\n")
    with pytest.raises(ControllerSecretError, match="not a controller secret"):
        read_secret(str(bad))
    shared = tmp_path / "shared"
    shared.write_text("ab" * 32 + "\n")
    shared.chmod(0o644)
    assert read_secret(str(shared)) == "ab" * 32
    assert "may be read by other users" in caplog.text
