"""The controller's request handlers and election scan, inside a NameServer process.

Every replica of every broker group heartbeats to every NameServer (BROKER_HEARTBEAT,
CONTROLLER_REGISTER_BROKER at boot: the same fields): its group, replica id, addresses, the
last epoch in its log and its CommitLog end, and, from a master, the replicas it has in sync.
Each node keeps these (``live``, local, not replicated) and answers with its view of the group
plus whether it is the Raft leader: brokers act only on the leader's answer.

Only the leader proposes changes (``raft.py``): a replica it does not know (or at a new
address) is registered; a master's sync set is altered to what the master reports; and every
``controller_scan_interval_ms`` a group whose master has been silent for
``broker_heartbeat_timeout_ms`` gets the best live replica of its sync set as master, in a new
epoch (``state.choose_master``). A node elects only once it has been up for a whole time-out,
so a restarted node that has not yet heard the live brokers does not take them for dead.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.controller.raft import ReplicatedController
from rocketbox.cluster.controller.state import GroupState, Liveness, Replica, choose_master
from rocketbox.cluster.namesrv import address_problem
from rocketbox.cluster.protocol import (ProtocolError, RequestCode, ResponseCode, answers_refusals, field_int, field_str,
                              json_body, require_name, to_json_bytes)
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

PROPOSAL_RETRY_S = 1.0
# A group's first master is chosen this long after its first replica registers...
FIRST_ELECTION_WAIT_S = 1.0
# ...and, while replica 1 (the broker configured as master, brokerId 0) is not registered and alive,
# at most this long: a first start elects the configured master whichever process registered first
# (on a busy machine the configured slave's heartbeat came first by over a second, and was elected).
CONFIGURED_MASTER_ID = 1
FIRST_MASTER_WAIT_MAX_S = 10.0


class ControllerService:
    def __init__(self, cfg: NamesrvConfig, replicated: ReplicatedController, clock_s=time.monotonic):
        self.cfg = cfg
        self.replicated = replicated
        self.clock_s = clock_s
        self.started_s = clock_s()
        self.timeout_s = cfg.broker_heartbeat_timeout_ms / 1000
        # broker name -> replica id -> what it last said
        self.live: dict[str, dict[int, Liveness]] = {}
        # broker name -> replica id -> the sync set it last reported as master
        self.reported_sync_sets: dict[str, dict[int, frozenset[int]]] = {}
        # (kind, broker name or broker name/replica id) -> when a proposal may be made again (one in flight)
        self._proposed_until: dict[tuple[str, str], float] = {}
        self._stuck_logged: dict[str, int] = {}
        self.first_heard_s: dict[str, float] = {}   # broker name -> when a replica of it was first heard   # broker name -> epoch whose stall was logged
        self.handlers = {
            RequestCode.BROKER_HEARTBEAT: self.on_heartbeat,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.on_heartbeat,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.on_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.on_metadata,
        }

    # ---- requests ----

    @answers_refusals
    def on_heartbeat(self, request: Command, reply=None) -> Command:
        broker_name = require_name("broker", field_str(request, "brokerName"))
        replica_id = field_int(request, "brokerId")
        address = field_str(request, "brokerAddr")
        ha_address = field_str(request, "haServerAddr")
        problem = address_problem(address) or address_problem(ha_address)
        if problem:
            raise ProtocolError(problem)
        if replica_id < 1:
            raise ProtocolError(f"a replica id is at least 1, not {replica_id}")
        now = self.clock_s()
        self.first_heard_s.setdefault(broker_name, now)
        self.live.setdefault(broker_name, {})[replica_id] = Liveness(
            now, field_int(request, "epoch", 0), field_int(request, "maxOffset", 0))
        sync_set = json_body(request).get("syncStateSet")
        if sync_set is not None:
            self.reported_sync_sets.setdefault(broker_name, {})[replica_id] = frozenset(int(i) for i in sync_set)
        if self.replicated.is_leader():
            group = self.replicated.group(broker_name)
            if group.replica(replica_id) != Replica(replica_id, address, ha_address):
                # One registration in flight a replica, not a group: a replica's must not wait for another's.
                self._propose("register", f"{broker_name}/{replica_id}", lambda done: self.replicated.register(
                    broker_name, Replica(replica_id, address, ha_address), done))
            elif group.master_id is None:
                self._consider(group, now)
            self._follow_sync_set(group)
        return self._answer(request, broker_name)

    def on_replica_info(self, request: Command, reply=None) -> Command:
        return self._answer(request, field_str(request, "brokerName", ""))

    def on_metadata(self, request: Command, reply=None) -> Command:
        body = {"isLeader": self.replicated.is_leader(), "raft": self.replicated.status(),
                "groups": [g.to_json() for g in self.replicated.groups()]}
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(body))

    def _answer(self, request: Command, broker_name: str) -> Command:
        body = self.replicated.group(broker_name).to_json()
        body["isLeader"] = self.replicated.is_leader()
        body["leaderAddress"] = self.replicated.leader_address()
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(body))

    # ---- the leader's decisions ----

    def scan(self) -> None:
        if not self.replicated.is_leader():
            return
        now = self.clock_s()
        for group in self.replicated.groups():
            self._consider(group, now)

    def _consider(self, group: GroupState, now: float) -> None:
        if group.epoch and now - self.started_s < self.timeout_s:
            return   # not up long enough to know who is alive (a group that never had a master has nobody to lose)
        live = self.live.get(group.broker_name, {})
        if not group.epoch:
            waited = now - self.first_heard_s.get(group.broker_name, now)
            if waited < FIRST_ELECTION_WAIT_S:
                return   # replicas started together have all registered: the first master is the lowest id
            configured = live.get(CONFIGURED_MASTER_ID)
            if waited < FIRST_MASTER_WAIT_MAX_S and (group.replica(CONFIGURED_MASTER_ID) is None or configured is None
                                                     or now - configured.heard_s > self.timeout_s):
                return
        chosen = choose_master(group, live, now, self.timeout_s)
        if chosen is None:
            master = live.get(group.master_id)
            if group.master_id is not None and (master is None or now - master.heard_s > self.timeout_s) \
                    and self._stuck_logged.get(group.broker_name) != group.epoch:
                self._stuck_logged[group.broker_name] = group.epoch
                log.error("group %s: master %s is silent and no replica may take over (sync set %s; heard from "
                          "%s): waiting for a replica of the sync set", group.broker_name, group.master_id,
                          sorted(group.sync_set), {i: round(now - seen.heard_s, 1) for i, seen in live.items()})
            return
        floor = max((seen.epoch for seen in live.values()), default=0)
        old = group.master_id

        def elect(done):
            self.replicated.elect(group.broker_name, chosen, group.epoch, floor, done)
        if self._propose("elect", group.broker_name, elect):
            log.warning("group %s: master %s silent for over %.1f s; electing replica %d (epoch %d -> %d)",
                        group.broker_name, old, self.timeout_s, chosen, group.epoch, max(group.epoch, floor) + 1)

    def _follow_sync_set(self, group: GroupState) -> None:
        reported = self.reported_sync_sets.get(group.broker_name, {}).get(group.master_id)
        if group.master_id is None or reported is None or reported == group.sync_set:
            return
        self._propose("sync", group.broker_name, lambda done: self.replicated.alter_sync_set(
            group.broker_name, group.master_id, group.epoch, sorted(reported), done))

    def _propose(self, kind: str, subject: str, propose) -> bool:
        """``propose(done)`` unless a proposal of ``kind`` about ``subject`` (a group, or a group's replica)
        is in flight and younger than PROPOSAL_RETRY_S."""
        key = (kind, subject)
        now = self.clock_s()
        if self._proposed_until.get(key, 0.0) > now:
            return False
        self._proposed_until[key] = now + PROPOSAL_RETRY_S

        def done(outcome):   # on PySyncObj's thread: only clear the in-flight mark
            self._proposed_until.pop(key, None)
            if outcome is not True and kind == "elect":
                log.info("election in %s: %s", subject, "superseded" if outcome is False else outcome)
        propose(done)
        return True
