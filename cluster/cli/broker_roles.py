"""``cluster status``' live part: each broker's role (MASTER or SLAVE), broker id, epoch and
replication lag, asked of the running brokers themselves (GET_BROKER_RUNTIME_INFO with detail).

Under failover the id is the replica id the controller knows the broker by (1, 2, ...: ``cluster
controller`` prints the same), which stays with the process through every change of role; routes
still list the master under brokerId 0, RocketMQ's rule. Without failover it is the broker id.

Every broker is asked at once with a short time-out, so a broker that does not answer shows as
such and status never waits long. Lag is in CommitLog bytes: for a slave, how far its log ends
behind its master's; for a master, the largest of its connected slaves' distance from its end,
as its HA server last heard their acknowledgements (none without a connected slave).
"""

from __future__ import annotations

import json
from concurrent.futures import TimeoutError as FutureTimeout

from rocketbox.cluster.config import SLAVE
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.client_transport import TransportError

ASK_TIMEOUT_MS = 1000
COLUMNS = ["name", "broker", "id", "role", "epoch", "write pos", "lag (bytes)", "answer"]


def _ask_all(client, endpoints) -> dict[str, dict | None]:
    """endpoint -> its runtime info, or None when it did not answer in time (asked in parallel)."""
    futures = {e: client.call_async(e, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {"detail": "true"}), ASK_TIMEOUT_MS)
               for e in dict.fromkeys(endpoints)}
    answers = {}
    for endpoint, future in futures.items():
        try:
            answers[endpoint] = json.loads(future.result(timeout=ASK_TIMEOUT_MS / 1000 + 1).body)
        except (TransportError, FutureTimeout, ValueError):
            answers[endpoint] = None
    return answers


def broker_rows(state: dict) -> list[dict]:
    """One record per broker main process of the cluster.json ``state``; ``answered`` false (and the
    live fields None) for one that is not running or did not answer."""
    brokers = [(child["name"], child.get("state"), (child.get("ready_info") or {}).get("endpoint"))
               for child in state.get("children", []) if child.get("role") == "broker"]
    from rocketbox.cluster.zmq_transport import RpcClient   # status asks; `cluster up` loads no ZeroMQ
    client = RpcClient(default_timeout_ms=ASK_TIMEOUT_MS)
    try:
        infos = _ask_all(client, [endpoint for _name, run, endpoint in brokers if run == "running" and endpoint])
        rows = [_row(name, infos.get(endpoint) if run == "running" else None) for name, run, endpoint in brokers]
        # A slave whose master runs on another host: ask that master too.
        elsewhere = [row["masterAddress"] for row in rows if row["role"] == "SLAVE" and row["masterAddress"]
                     and _master_of(rows, row) is None]
        remote = _ask_all(client, [f"tcp://{addr}" for addr in elsewhere])
    finally:
        client.close()
    masters = [_row(addr, info) for addr, info in remote.items() if info is not None]
    for row in rows:
        if row["role"] == "SLAVE":
            master = _master_of(rows + masters, row)
            if master is not None:
                row["lagBytes"] = max(master["writePos"] - row["writePos"], 0)
    return rows


def _row(name: str, info: dict | None) -> dict:
    if info is None:
        return {"name": name, "answered": False, "brokerName": None, "brokerId": None, "routeBrokerId": None,
                "replicaId": None, "role": None, "epoch": None,
                "writePos": None, "confirmPos": None, "lagBytes": None, "masterAddress": None, "address": None}
    ha = info.get("ha") or {}
    slave = info["brokerRole"] == SLAVE
    behind = [info["writePos"] - s["ackedPos"] for s in ha.get("slaves", [])]
    controller = info.get("controller") or {}
    return {"name": name, "answered": True, "brokerName": info["brokerName"],
            "brokerId": controller.get("replicaId", info["brokerId"]), "routeBrokerId": info["brokerId"],
            "replicaId": controller.get("replicaId"),
            "role": "SLAVE" if slave else "MASTER", "epoch": info["epoch"], "writePos": info["writePos"],
            "confirmPos": info["confirmPos"], "lagBytes": None if slave or not behind else max(max(behind), 0),
            "masterAddress": ha.get("masterAddress") if slave else None, "address": info["address"]}


def _master_of(rows: list[dict], slave: dict) -> dict | None:
    """The answering master of ``slave``'s group: its configured master address first, else the
    group's one master among ``rows``."""
    group = [r for r in rows if r["answered"] and r["role"] == "MASTER" and r["brokerName"] == slave["brokerName"]]
    named = [r for r in group if r["address"] == slave["masterAddress"]]
    return (named or group or [None])[0]


def table_title(rows: list[dict]) -> str:
    if any(r["replicaId"] is not None for r in rows):
        return "brokers: role, replica id (as `cluster controller` names them), epoch, replication lag"
    return "brokers: role, id, epoch, replication lag"


def table_rows(rows: list[dict]) -> list[list]:
    return [[r["name"], r["brokerName"], r["brokerId"], r["role"], r["epoch"], r["writePos"],
             "-" if r["lagBytes"] is None else r["lagBytes"], "yes" if r["answered"] else "no answer"]
            for r in rows]
