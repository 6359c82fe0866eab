"""A broker replica in controller mode: its role from the controller, its heartbeat and lease.

At boot (``resolve``, before serving) the replica registers with every NameServer's controller
node and waits for the Raft leader to name its group's master. Its role then holds for the
life of the process: when a later heartbeat answer from the leader names another master or
epoch, the process exits with ``EXIT_ROLE_CHANGED`` and the supervisor restarts the group,
which boots again in the new role (a returning master first cuts its log back to where it
left the new master's: ``divergence_point``). Role changes are rare, and one boot path for
every role is easier to trust than switching a running store between writer and copier.

Fencing. A master accepts writes only while it holds a lease: ``controller_lease_ms`` from
the sending of a heartbeat that the leader answered naming it master of its current epoch.
The leader replaces a master only after ``broker_heartbeat_timeout_ms`` of silence counted
from the last heartbeat it received, which is later than any lease's start, and the lease is
shorter: a master cut off or stopped stops writing before another is elected. Its replicated
bytes carry its epoch, and replicas of a newer epoch refuse them (``ha.py``), so in sync
replication a stale master cannot get a write acknowledged even if timing failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import deque

from rocketbox.cluster.config import SLAVE, BrokerConfig
from rocketbox.cluster.protocol import RequestCode, ResponseCode, to_json_bytes
from rocketbox.cluster.shm import epoch_format
from rocketbox.cluster.shm.epochs import entries_from_json
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError

log = logging.getLogger(__name__)

RESOLVE_ROUND_S = 1.0
RESOLVE_PAUSE_S = 0.2


class RoleResolutionError(RuntimeError):
    pass


def effective_config(cfg: BrokerConfig, view: dict, replica_id: int) -> BrokerConfig:
    """The static config turned into the role the controller named (routes: master id 0)."""
    if view["masterId"] == replica_id:
        return dataclasses.replace(cfg, broker_id=0, ha_master_address="", master_address="")
    return dataclasses.replace(cfg, broker_id=replica_id, broker_role=SLAVE,
                               ha_master_address=view["masterHaAddress"], master_address=view["masterAddress"])


class ControllerClient:
    def __init__(self, cfg: BrokerConfig, store, epochs, rpc: RpcClient):
        self.cfg = cfg
        self.replica_id = cfg.broker_id + 1
        self.store = store
        self.epochs = epochs
        self.rpc = rpc
        self.view: dict = {}
        self.lease_until_s = 0.0
        self.heartbeats_answered = 0
        self._answers: deque = deque(maxlen=64)   # (sent_at_s, view) from the RPC thread
        self._sync_state = None   # a master's SyncStateSet (sync_state.py), reported in every heartbeat
        self._on_role_change = None

    @property
    def is_master(self) -> bool:
        return self.view.get("masterId") == self.replica_id

    @property
    def epoch(self) -> int:
        return int(self.view.get("epoch", 0))

    def _request(self, code: RequestCode) -> Command:
        body = {"syncStateSet": sorted(self._sync_state.local)} if self._sync_state and self.is_master else {}
        return Command(code, {
            "brokerName": self.cfg.broker_name, "brokerId": str(self.replica_id), "brokerAddr": self.cfg.address,
            "haServerAddr": self.cfg.ha_address, "clusterName": self.cfg.cluster_name,
            "epoch": str(self.epochs.last_epoch), "maxOffset": str(self.store.commitlog.write_pos)},
            to_json_bytes(body))

    # ---- boot ----

    def resolve(self) -> tuple[dict, int | None]:
        """Block until the controller's leader names the group's master: (its answer, and for a
        slave the end of the prefix its log shares with the master's, where it must truncate).

        A slave whose master does not give its epoch list asks the controller again: the master
        may be the one that died, and registering keeps this replica alive in the controller's
        eyes, so it can be elected meanwhile."""
        deadline = time.monotonic() + self.cfg.controller_register_timeout_ms / 1000
        last = "no answer yet"
        while time.monotonic() < deadline:
            view, last = self._leader_view(last)
            if view is None:
                time.sleep(RESOLVE_PAUSE_S)
                continue
            self.view = view
            if self.is_master:
                self._log_role()
                return view, None
            keep, last = self._divergence(last)
            if keep is not None:
                self._log_role()
                return view, keep
        raise RoleResolutionError(f"no controller named a reachable master for {self.cfg.broker_name} within "
                                  f"{self.cfg.controller_register_timeout_ms} ms ({last})")

    def _log_role(self) -> None:
        log.info("controller: %s replica %d is %s of epoch %d (master replica %s at %s)", self.cfg.broker_name,
                 self.replica_id, "MASTER" if self.is_master else "SLAVE", self.epoch, self.view["masterId"],
                 self.view["masterAddress"])

    def _leader_view(self, last: str) -> tuple[dict | None, str]:
        futures = [self.rpc.call_async(e, self._request(RequestCode.CONTROLLER_REGISTER_BROKER),
                                       int(RESOLVE_ROUND_S * 1000)) for e in self.cfg.namesrv_endpoints]
        for future in futures:
            try:
                view = _view_of(future.result(RESOLVE_ROUND_S + 0.5))
            except (TransportError, TimeoutError, ValueError) as exc:
                last = str(exc)
                continue
            if view.get("isLeader") and view.get("masterId") is not None:
                return view, last
            last = "the leader has not named a master yet" if view.get("isLeader") else "not the leader"
        return None, last

    def _divergence(self, last: str) -> tuple[int | None, str]:
        endpoint = f"tcp://{self.view['masterAddress']}"
        try:
            response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_EPOCH_CACHE, {}),
                                     int(RESOLVE_ROUND_S * 1000))
            body = json.loads(response.body)
            if response.code != ResponseCode.SUCCESS or int(body["epoch"]) != self.epoch:
                return None, f"the master {endpoint} is not at epoch {self.epoch} yet"
            keep = epoch_format.divergence_point(self.epochs.entries, self.store.commitlog.write_pos,
                                                 entries_from_json(body["epochs"]), int(body["maxOffset"]))
            return keep, last
        except (TransportError, ValueError, KeyError, TypeError) as exc:
            return None, f"epoch list of the master {endpoint}: {exc}"

    # ---- running ----

    def serve(self, loop, sync_state, on_role_change) -> None:
        """Heartbeat every interval; ``sync_state``: a master's SyncStateSet (None on a slave), told what
        the controller holds from each of the leader's answers."""
        self._sync_state = sync_state
        self._on_role_change = on_role_change
        self.lease_until_s = time.monotonic() + self.cfg.controller_lease_ms / 1000 if self.is_master else 0.0
        interval_s = self.cfg.controller_heartbeat_interval_ms / 1000
        loop.call_every(interval_s, self.heartbeat)
        loop.call_every(min(0.05, interval_s), self.take_answers)

    def heartbeat(self) -> None:
        sent_at = time.monotonic()
        for endpoint in self.cfg.namesrv_endpoints:
            future = self.rpc.call_async(endpoint, self._request(RequestCode.BROKER_HEARTBEAT),
                                         self.cfg.controller_heartbeat_interval_ms * 2)
            future.add_done_callback(lambda f: self._answered(sent_at, f))

    def _answered(self, sent_at: float, future) -> None:   # on the RPC thread
        if future.exception() is None:
            try:
                view = _view_of(future.result())
            except ValueError:
                return
            if view.get("isLeader"):
                self._answers.append((sent_at, view))

    def take_answers(self) -> None:
        """On the broker's loop: renew the lease, or notice that the role changed."""
        while self._answers:
            sent_at, view = self._answers.popleft()
            self.heartbeats_answered += 1
            same_master = view.get("masterId") == self.view.get("masterId") and view.get("epoch") == self.epoch
            if same_master:
                self.view = view
                if self._sync_state is not None:
                    self._sync_state.controller_holds(view.get("syncStateSet", ()))
                if self.is_master:
                    self.lease_until_s = max(self.lease_until_s, sent_at + self.cfg.controller_lease_ms / 1000)
                continue
            if view.get("masterId") is None and not self.is_master:
                continue   # no master for now: keep serving reads and wait
            log.warning("controller: %s now has master replica %s in epoch %s (this replica %d was %s in epoch %d):"
                        " restarting in the new role", self.cfg.broker_name, view.get("masterId"), view.get("epoch"),
                        self.replica_id, "MASTER" if self.is_master else "SLAVE", self.epoch)
            self.lease_until_s = 0.0
            self._answers.clear()
            self._on_role_change()
            return

    def lease_valid(self) -> bool:
        return time.monotonic() < self.lease_until_s

    def info(self) -> dict:
        return {"replicaId": self.replica_id, "epoch": self.epoch, "masterId": self.view.get("masterId"),
                "syncStateSet": self.view.get("syncStateSet"), "leaseValid": self.lease_valid(),
                "heartbeatsAnswered": self.heartbeats_answered}


def _view_of(response: Command) -> dict:
    if response.code != ResponseCode.SUCCESS:
        raise ValueError(f"controller answered {response.code}: {response.remark}")
    view = json.loads(response.body)
    if not isinstance(view, dict):
        raise ValueError("controller answer is not an object")
    return view
