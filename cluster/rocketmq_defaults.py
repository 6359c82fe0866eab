"""Apache RocketMQ 4.9.8's settings beyond RocketBox's own, so mqadmin sees every key it knows.

getBrokerConfig answers 178 keys on Apache's broker (BrokerConfig, NettyServerConfig,
NettyClientConfig, MessageStoreConfig) and getNamesrvConfig 21; tools read some of them by name
(exportConfigs reads 16 and crashes on a missing one, exportMetrics reads
``clientCallbackExecutorThreads`` as the CPU count). RocketBox answers its own settings under
RocketMQ's keys (``rocketmq_keys.BROKER_KEYS``) and under its own names; this module adds the
rest:

- ``broker_aliases``: RocketMQ keys whose meaning RocketBox has under another setting, with
  RocketBox's real value (``haSlaveFallbehindMax`` is ``ha_slave_fall_behind_max_bytes``;
  ``maxTransferCountOnMessageInMemory`` the pull batch bound, which RocketBox applies whether the
  bytes are in memory or not, so the ``InDisk`` keys say the same);
- ``BROKER_DEFAULTS``: settings that have no meaning in RocketBox (thread pools of a JVM broker,
  Netty buffers, DLedger, transient store pools, commercial counters, ...), with Apache's
  defaults, so a reader sees what a stock Apache broker would say; the few of them that Apache
  derives from the CPU count are computed the same way (``broker_cpu_defaults``);
- ``NAMESRV_DEFAULTS``: the same for the NameServer (Netty's server settings, ``productEnvName``).

Pure: tables and arithmetic, no I/O.
"""

from __future__ import annotations

import os

from rocketbox.cluster.config import BrokerConfig
from rocketbox.cluster.config_file import broker_settings

# Apache 4.9.8's defaults, as its getBrokerConfig prints them, for keys RocketBox has no setting for.
BROKER_DEFAULTS: dict[str, str] = {
    "accessMessageInMemoryMaxRatio": "40", "adminBrokerThreadPoolNums": "16", "autoDeleteUnusedStats": "false",
    "bitMapLengthConsumeQueueExt": "112", "brokerPermission": "6", "brokerTopicEnable": "true",
    "channelNotActiveInterval": "60000", "checkCRCOnRecover": "true", "cleanFileForciblyEnable": "true",
    "clientAsyncSemaphoreValue": "65535", "clientChannelMaxIdleTimeSeconds": "120",
    "clientCloseSocketIfTimeout": "true", "clientManageThreadPoolNums": "32",
    "clientManagerThreadPoolQueueCapacity": "1000000", "clientOnewaySemaphoreValue": "65535",
    "clientPooledByteBufAllocatorEnable": "false", "clientSocketRcvBufSize": "0", "clientSocketSndBufSize": "0",
    "clientWorkerThreads": "4", "clusterTopicEnable": "true", "commercialBaseCount": "1",
    "commercialBigCount": "1", "commercialEnable": "true", "commercialTimerCount": "1",
    "commercialTransCount": "1", "commitCommitLogLeastPages": "4", "commitCommitLogThoroughInterval": "200",
    "commitIntervalCommitLog": "200", "compressedRegister": "false",
    "configBlackList": "configBlackList;brokerConfigPath", "connectTimeoutMillis": "3000",
    "consumerFallbehindThreshold": "17179869184", "consumerManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000", "debugLockEnable": "false", "defaultQueryMaxNum": "32",
    "deleteConsumeQueueFilesInterval": "100", "destroyMapedFileIntervalForcibly": "120000",
    "disableConsumeIfConsumerReadSlowly": "false", "diskFallRecorded": "true", "duplicationEnable": "false",
    "enableCalcFilterBitMap": "false", "enableConsumeQueueExt": "false", "enableDLegerCommitLog": "false",
    "enableDetailStat": "true", "enableLmq": "false", "enableMultiDispatch": "false",
    "enableScheduleAsyncDeliver": "false", "enableScheduleMessageStats": "true",
    "endTransactionPoolQueueCapacity": "100000", "expectConsumerNumUseFilter": "32",
    "fastFailIfNoBufferInStorePool": "false", "fetchNamesrvAddrByAddressServer": "false",
    "filterDataCleanTimeSpan": "86400000", "filterServerNums": "0", "filterSupportRetry": "false",
    "flushCommitLogLeastPages": "4", "flushCommitLogThoroughInterval": "10000", "flushCommitLogTimed": "true",
    "flushConsumeQueueLeastPages": "2", "flushConsumeQueueThoroughInterval": "60000",
    "flushConsumerOffsetHistoryInterval": "60000", "flushDelayOffsetInterval": "10000",
    "flushLeastPagesWhenWarmMapedFile": "4096", "forceRegister": "true", "haSendHeartbeatInterval": "5000",
    "heartbeatThreadPoolQueueCapacity": "50000", "highSpeedMode": "false", "isEnableBatchPush": "false",
    "isolateLogEnable": "false", "mappedFileSizeConsumeQueueExt": "50331648", "maxDelayTime": "40",
    "maxErrorRateOfBloomFilter": "20", "maxLmqConsumeQueueNum": "20000", "maxMsgsNumBatch": "64",
    "messageIndexEnable": "true", "messageIndexSafe": "false", "messageStorePlugIn": "",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC", "notifyConsumerIdsChangedEnable": "true",
    "offsetCheckInSlave": "false", "pullThreadPoolQueueCapacity": "100000", "putMsgIndexHightWater": "600000",
    "putThreadPoolQueueCapacity": "10000", "queryThreadPoolQueueCapacity": "20000",
    "redeleteHangedFileInterval": "120000", "regionId": "DefaultRegion", "registerBrokerTimeoutMills": "6000",
    "rejectTransactionMessage": "false", "replyThreadPoolQueueCapacity": "10000", "rocketmqHome": "",
    "scheduleAsyncDeliverMaxPendingLimit": "2000", "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "serverAsyncSemaphoreValue": "64", "serverCallbackExecutorThreads": "0", "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true", "serverSelectorThreads": "3", "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0", "serverSocketSndBufSize": "0", "serverWorkerThreads": "8",
    "shortPollingTimeMills": "1000", "slaveTimeout": "3000", "startAcceptSendRequestTimeStamp": "0",
    "storeReplyMessageEnable": "true", "traceOn": "true", "traceTopicEnable": "false", "transferMsgByHeap": "true",
    "transientStorePoolEnable": "false", "transientStorePoolSize": "5", "useEpollNativeSelector": "false",
    "useReentrantLockWhenPutMessage": "true", "useTLS": "false", "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}

# Apache 4.9.8's NameServer settings RocketBox has no counterpart for (NamesrvConfig, NettyServerConfig).
NAMESRV_DEFAULTS: dict[str, str] = {
    "rocketmqHome": "", "productEnvName": "center", "clusterTest": "false",
    "configBlackList": "configBlackList;configStorePath;kvConfigPath", "serverWorkerThreads": "8",
    "serverCallbackExecutorThreads": "0", "serverSelectorThreads": "3", "serverOnewaySemaphoreValue": "256",
    "serverAsyncSemaphoreValue": "64", "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0",
    "writeBufferHighWaterMark": "0", "writeBufferLowWaterMark": "0", "serverSocketBacklog": "1024",
    "serverPooledByteBufAllocatorEnable": "true", "useEpollNativeSelector": "false",
    "serverChannelMaxIdleTimeSeconds": "120",
}
# What a NameServer's updateNamesrvConfig may never change (RocketMQ's configBlackList, plus rocketmqHome).
NAMESRV_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})


def broker_cpu_defaults(cpus: int | None = None) -> dict[str, str]:
    """The thread counts Apache derives from the processors it runs on (BrokerConfig's initialisers)."""
    cpus = cpus or os.cpu_count() or 1
    send = min(cpus, 4)
    return {key: str(value) for key, value in {
        "sendMessageThreadPoolNums": send, "putMessageFutureThreadPoolNums": min(cpus, 4),
        "pullMessageThreadPoolNums": 16 + cpus * 2, "processReplyMessageThreadPoolNums": 16 + cpus * 2,
        "queryMessageThreadPoolNums": 8 + cpus, "heartbeatThreadPoolNums": min(32, cpus),
        "endTransactionThreadPoolNums": max(8 + cpus * 2, send * 4), "clientCallbackExecutorThreads": cpus,
    }.items()}


def broker_aliases(cfg: BrokerConfig) -> dict[str, str]:
    """RocketMQ keys for settings RocketBox keeps under another name: RocketBox's values."""
    store = cfg.store
    pull_count, pull_bytes = str(cfg.pull_batch_count_max), str(cfg.pull_batch_bytes_max)
    return {
        "brokerIP2": cfg.host,
        "storePathCommitLog": os.path.join(store.store_dir, "commitlog"),
        "flushIntervalConsumeQueue": str(store.flush_logics_interval_ms),
        "flushConsumerOffsetInterval": str(cfg.consumer_offset_persist_interval_ms),
        "haSlaveFallbehindMax": str(cfg.ha_slave_fall_behind_max_bytes),
        "haHousekeepingInterval": str(cfg.ha_slave_expiry_ms),
        "haTransferBatchSize": str(cfg.ha_chunk_bytes),
        "warmMapedFileEnable": "true" if store.preheat_enabled else "false",
        "maxTransferCountOnMessageInMemory": pull_count, "maxTransferCountOnMessageInDisk": pull_count,
        "maxTransferBytesOnMessageInMemory": pull_bytes, "maxTransferBytesOnMessageInDisk": pull_bytes,
    }


def apache_broker_keys(cfg: BrokerConfig, cpus: int | None = None) -> dict[str, str]:
    """Every RocketMQ key getBrokerConfig answers beyond RocketBox's own settings."""
    return {**BROKER_DEFAULTS, **broker_cpu_defaults(cpus), **broker_aliases(cfg)}


def broker_config_answer(cfg: BrokerConfig, cpus: int | None = None) -> dict[str, str]:
    """What getBrokerConfig answers and ``cluster config show`` prints for a broker: Apache's keys,
    with RocketBox's own settings winning where both name one."""
    return {**apache_broker_keys(cfg, cpus), **broker_settings(cfg)}


def apache_namesrv_keys(kv_config_path: str, config_store_path: str) -> dict[str, str]:
    """getNamesrvConfig's keys beyond RocketBox's own NameServer settings."""
    return {**NAMESRV_DEFAULTS, "kvConfigPath": kv_config_path, "configStorePath": config_store_path}
