"""brokerStatus (GET_BROKER_RUNTIME_INFO 28 through the remoting door): RocketMQ's KVTable, every key
Apache's 4.9.8 broker answers (51 with a scheduled message; clusterList, exportMetrics and the
console read them by name), string values.

From RocketBox's own measures: boot time and runtime, put and get counts and rates (putTps,
getTransferedTps: messages a second over 10 s, 1 min, 10 min; getFoundTps: pulls that found
messages; getTotalTps: messages served), the day marks (msgPutTotalTodayMorning, ...:
``stats.DailyTotals``), bytes and messages stored (putMessageSizeTotal, putMessageTimesTotal,
putMessageAverageSize), CommitLog offsets, bytes left to flush and to dispatch, disk use of the
store (commitLogDiskRatio, per CommitLog directory too, consumeQueueDiskRatio,
commitLogDirCapacity), the oldest message's store time, each delay level's progress
(scheduleMessageOffset_N: "delivered,max").

With Apache's idle values, because RocketBox has no such part: its JVM thread pools' queues
(send/pull/query/EndTransaction ...QueueSize 0, ...HeadWaitTimeMills 0, capacities Apache's, the
send queue's RocketBox's send_queue_capacity), pageCacheLockTimeMills and dispatchMaxBuffer 0,
remainTransientStoreBufferNumbs Integer.MAX_VALUE (no transient pool), startAcceptSendRequestTimeStamp 0.
Not measured in RocketMQ's form (send latencies are in the metrics, ``rocketmq_rpc_latency``):
putMessageEntireTimeMax, getMessageEntireTimeMax, putLatency99/999, putMessageDistributeTime
(zeros), putMessageFailedTimes and getMissTps (0). RocketBox adds brokerRole, brokerActive and
flushDiskType.
"""

from __future__ import annotations

import math
import os
import shutil

from rocketbox.cluster.broker.schedule import PROGRESS_GROUP as SCHEDULE_PROGRESS_GROUP
from rocketbox.cluster.broker.stats import WINDOWS_S
from rocketbox.cluster.message.system_topics import SCHEDULE_TOPIC
from rocketbox.cluster.wire_format import VERSION

RUNNING_VERSION_DESC = "RocketBox-0.1.0"
INT_MAX = 2**31 - 1
# StoreStatsService's put-time buckets, all zero here (see the module docstring).
PUT_DISTRIBUTE_TIME = " ".join(f"[{b}]:0" for b in ("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms",
                                                      "200~500ms", "500ms~1s", "1~2s", "2~3s", "3~4s", "4~5s",
                                                      "5~10s", "10s~")) + " "


def human_bytes(count: int) -> str:
    """Java's MixAll.humanReadableByteCount(bytes, si=false): "0 B", "1.5 KiB", "252.0 GiB"."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def store_disk(store_dir: str) -> dict:
    """The disk under the store: share in use, total and free bytes, and the CommitLog's directory."""
    commitlog_dir = os.path.join(store_dir, "commitlog")
    try:
        usage = shutil.disk_usage(store_dir)
    except OSError:
        return {"ratio": 0.0, "totalBytes": 0, "freeBytes": 0, "commitLogDir": commitlog_dir}
    return {"ratio": usage.used / usage.total if usage.total else 0.0, "totalBytes": usage.total,
            "freeBytes": usage.free, "commitLogDir": commitlog_dir}


def schedule_offsets(schedule, store) -> dict[int, tuple[int, int]]:
    """Delay level -> (the schedule's delivered offset, the level queue's max offset), levels with progress."""
    offsets = {}
    for queue_id in range(len(schedule.levels_ms)):
        delivered = schedule.progress.query(SCHEDULE_PROGRESS_GROUP, SCHEDULE_TOPIC, queue_id)
        if delivered is not None:
            offsets[queue_id + 1] = (delivered, store.max_offset(SCHEDULE_TOPIC, queue_id))
    return offsets


def _runtime_text(uptime_ms: int) -> str:
    days, rest = divmod(uptime_ms // 1000, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


def runtime_kv_table(info: dict, stats, *, commitlog_min_offset: int, earliest_ms: int, disk: dict,
                     send_queue_capacity: int, schedule_offsets: dict[int, tuple[int, int]]) -> dict[str, str]:
    """The KVTable. ``info``: the broker's runtime info (``BrokerService.runtime_info``); ``stats``:
    its BrokerStats; ``disk``: {"ratio", "totalBytes", "freeBytes", "commitLogDir"}; ``schedule_offsets``:
    delay level -> (delivered offset, max offset)."""
    stored, served = info["messagesStored"], info["messagesServed"]
    stored_bytes = sum(row["bytes"] for row in stats.sender.traffic_in.snapshot())
    ratio = f"{disk['ratio']:.4f}"
    idle_tps = " ".join("0.00" for _ in WINDOWS_S)
    values = {
        "brokerVersionDesc": RUNNING_VERSION_DESC, "brokerVersion": VERSION,
        "bootTimestamp": info["bootTimestamp"], "runtime": _runtime_text(info["uptimeMs"]),
        "putTps": stats.put_rate.tps_text(), "getTransferedTps": stats.served_rate.tps_text(),
        "getTotalTps": stats.served_rate.tps_text(), "getFoundTps": stats.found_rate.tps_text(),
        "getMissTps": idle_tps,
        "msgPutTotalTodayNow": stored, "msgGetTotalTodayNow": served,
        "msgPutTotalTodayMorning": stats.daily.today_morning[0], "msgGetTotalTodayMorning": stats.daily.today_morning[1],
        "msgPutTotalYesterdayMorning": stats.daily.yesterday_morning[0],
        "msgGetTotalYesterdayMorning": stats.daily.yesterday_morning[1],
        "putMessageTimesTotal": stored, "putMessageSizeTotal": stored_bytes,
        "putMessageAverageSize": float(stored_bytes / stored) if stored else 0.0, "putMessageFailedTimes": 0,
        "putMessageEntireTimeMax": 0, "getMessageEntireTimeMax": 0, "putLatency99": "0.00", "putLatency999": "0.00",
        "putMessageDistributeTime": PUT_DISTRIBUTE_TIME,
        "commitLogMinOffset": commitlog_min_offset, "commitLogMaxOffset": info["writePos"],
        "commitLogDiskRatio": ratio, f"commitLogDiskRatio_{disk['commitLogDir']}": ratio,
        "consumeQueueDiskRatio": ratio,
        "commitLogDirCapacity": f"Total : {human_bytes(disk['totalBytes'])}, Free : {human_bytes(disk['freeBytes'])}.",
        "remainHowManyDataToFlush": human_bytes(max(info["writePos"] - info["flushedPos"], 0)),
        "dispatchBehindBytes": max(info["writePos"] - info["dispatchedPos"], 0), "dispatchMaxBuffer": 0,
        "earliestMessageTimeStamp": earliest_ms, "pageCacheLockTimeMills": 0, "startAcceptSendRequestTimeStamp": 0,
        "remainTransientStoreBufferNumbs": INT_MAX,
        "sendThreadPoolQueueSize": 0, "sendThreadPoolQueueCapacity": send_queue_capacity,
        "sendThreadPoolQueueHeadWaitTimeMills": 0,
        "pullThreadPoolQueueSize": 0, "pullThreadPoolQueueCapacity": 100_000, "pullThreadPoolQueueHeadWaitTimeMills": 0,
        "queryThreadPoolQueueSize": 0, "queryThreadPoolQueueCapacity": 20_000, "queryThreadPoolQueueHeadWaitTimeMills": 0,
        "EndTransactionQueueSize": 0, "EndTransactionThreadPoolQueueCapacity": 100_000,
        "brokerRole": info["brokerRole"], "brokerActive": str(info["writable"]).lower(), "flushDiskType": info["flushMode"],
    }
    for level, (delivered, max_offset) in sorted(schedule_offsets.items()):
        values[f"scheduleMessageOffset_{level}"] = f"{delivered},{max_offset}"
    return {key: str(value) for key, value in values.items()}
