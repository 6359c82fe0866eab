"""The cluster page's data: every process the supervisor runs (its cluster.json) and every broker
registered with the NameServers, each asked for its runtime info (role, id, epoch, CommitLog
positions, replication) and its brokerStatus table (rates, disk ratio), all brokers at once with
a short time-out so one that hangs shows as "no answer" instead of holding the page."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.zmq_transport import TransportError

# SLAVE in the brokers' runtime info (config.SLAVE).
SLAVE_ROLE = "SLAVE"


def read_processes(state_path: str) -> dict:
    """The supervisor's run state: {state, supervisor_pid, processes: [...]}; a missing or torn file
    reads as no processes (the supervisor rewrites it atomically, so torn means not yet written)."""
    try:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {"state": "unknown", "supervisor_pid": None, "processes": [], "updated": None}
    rows = []
    for child in state.get("children", []):
        info = child.get("ready_info") or {}
        rows.append({"name": child.get("name"), "role": child.get("role"), "pid": child.get("pid"),
                     "state": child.get("state"), "restarts": child.get("restarts", 0),
                     "endpoint": info.get("endpoint", ""), "remoting": info.get("remoting", "")})
    return {"state": state.get("state", "unknown"), "supervisor_pid": state.get("supervisor_pid"),
            "processes": rows}


def _registered_brokers(admin) -> list[dict]:
    """(cluster, broker name, id, native endpoint) of every broker the NameServers know."""
    info = admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in (info.get("clusterAddrTable") or {}).items()
                  for name in names}
    out = []
    for name, data in sorted((info.get("brokerAddrTable") or {}).items()):
        for broker_id, address in sorted((data.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
            out.append({"cluster": cluster_of.get(name, ""), "brokerName": name, "registeredId": int(broker_id),
                        "address": address, "endpoint": normalize_endpoint(address)})
    return out


def _ask(admin, endpoint: str) -> tuple[dict | None, dict | None, str]:
    try:
        return admin.broker_runtime_info(endpoint), admin.broker_status(endpoint), ""
    except (ClientError, TransportError, ValueError) as exc:
        return None, None, str(exc)


def broker_rows(admin) -> list[dict]:
    """One row per registered broker: role, id, epoch, replication lag (CommitLog bytes: a slave's
    distance behind its master's end; a master's farthest slave), disk use, in/out TPS."""
    brokers = _registered_brokers(admin)
    if not brokers:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(brokers))) as pool:
        answers = list(pool.map(lambda b: _ask(admin, b["endpoint"]), brokers))
    rows = [_row(broker, info, status, error) for broker, (info, status, error) in zip(brokers, answers)]
    masters = {r["brokerName"]: r for r in rows if r["answered"] and r["role"] == "MASTER"}
    for row in rows:
        master = masters.get(row["brokerName"])
        if row["answered"] and row["role"] == SLAVE_ROLE and master is not None:
            row["lagBytes"] = max(master["writePos"] - row["writePos"], 0)
    return rows


def _row(broker: dict, info: dict | None, status: dict | None, error: str) -> dict:
    row = {**broker, "answered": info is not None, "error": error, "role": None, "brokerId": None, "epoch": None,
           "writePos": None, "minPos": None, "lagBytes": None, "diskRatio": None, "commitLogBytes": None,
           "putTps": None, "getTps": None, "writable": None, "uptimeS": None}
    if info is None:
        return row
    slave = info["brokerRole"] == SLAVE_ROLE
    behind = [info["writePos"] - s["ackedPos"] for s in (info.get("ha") or {}).get("slaves", [])]
    row.update(role=SLAVE_ROLE if slave else "MASTER", brokerId=info["brokerId"], epoch=info["epoch"],
               writePos=info["writePos"], minPos=info.get("minPos", 0), writable=info.get("writable"),
               commitLogBytes=max(info["writePos"] - info.get("minPos", 0), 0),
               lagBytes=None if slave or not behind else max(max(behind), 0),
               uptimeS=int(info.get("uptimeMs", 0) // 1000))
    row.update(diskRatio=_float(status.get("commitLogDiskRatio")), putTps=first_rate(status.get("putTps")),
               getTps=first_rate(status.get("getTransferedTps")))
    return row


def first_rate(text) -> float | None:
    """brokerStatus' rates are "last-10s last-1min last-10min" per second: the first."""
    try:
        return float(str(text).split()[0])
    except (IndexError, ValueError):
        return None


def _float(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def cluster_page(admin, state_path: str) -> dict:
    started = time.monotonic()
    processes = read_processes(state_path)
    try:
        brokers, problem = broker_rows(admin), ""
    except (ClientError, TransportError) as exc:
        brokers, problem = [], f"the NameServers did not answer: {exc}"
    return {**processes, "brokers": brokers, "problem": problem,
            "askedMs": int((time.monotonic() - started) * 1000)}
