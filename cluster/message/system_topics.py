"""The system topics: RocketMQ 5's TopicValidator, the one list every part of RocketBox asks.

Pure: no I/O. A topic is a system topic when it is one of RocketMQ's named ones or begins with
``rmq_sys_``; only the lower-case prefix counts (``RMQ_SYS_TRANS_HALF_TOPIC`` and
``RMQ_SYS_TRACE_TOPIC`` are in the set by name, and a user's ``RMQ_SYS_orders`` is an ordinary
topic, as in RocketMQ). A system topic is not created, deleted or read by a client; the
not-sendable ones also refuse a client's send (TopicValidator.isNotAllowedSendTopic), as do the pop
revive topics, which only the broker writes.
"""

from __future__ import annotations

# The topic RocketMQ clients ask a route for when a topic is unknown (auto-create's template).
AUTO_CREATE_TOPIC_KEY = "TBW102"
# Delayed messages wait here (broker/schedule.py), one queue per delay level.
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
# Half messages and their outcomes (broker/transaction.py).
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"

SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# A cluster's pop checkpoints and acks (broker/pop_format.py): rmq_sys_REVIVE_LOG_<cluster>.
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"

SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC_KEY, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC, TRACE_TOPIC,
                           TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
                           ROCKSDB_OFFSET_TOPIC})
NOT_SENDABLE_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                                 SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, ROCKSDB_OFFSET_TOPIC})


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_sendable_topic(topic: str) -> bool:
    """A topic a client may not send to: the broker's own (delays, halves, their outcomes, pop revive
    logs) and the events RocketMQ reserves."""
    return topic in NOT_SENDABLE_TOPICS or topic.startswith(REVIVE_TOPIC_PREFIX)
