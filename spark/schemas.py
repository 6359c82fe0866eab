"""The tables the Spark side reads and writes, one schema each.

MESSAGE: what the ``rocketbox`` DataSource yields for a topic (Kafka-like columns).

HISTORY: the load generator's record, Jepsen style: one ``invoke`` row when a send
attempt starts and one completion row when it ends, sharing ``process`` and ``op``.
Completion types: ``ok`` (acknowledged: queue and offset known), ``fail`` (definitely
not stored: the broker refused it, or it never left the client) and ``info``
(indeterminate: a time-out, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
SLAVE_NOT_AVAILABLE; it may or may not be stored). An attempt the task never finished
(the task died) has an invoke and no completion: indeterminate too. Every attempt of one
logical message (``key``, ``seq``) carries the same ``msg_id`` (the UNIQ_KEY, made once
and kept on resends, as RocketMQ's client does) and the same ``body_crc``.

READS: one row per delivery of a message to a reader. ``reader`` names the path
(``datasource`` or ``push``); ``consumer`` the consuming instance (a push client id, or a
DataSource partition); ``delivery_index`` increases with every delivery to one consumer,
so the order a consumer saw is kept even though DataFrames have none. ``key`` and
``seq`` are parsed from the body (null when it does not parse: that read is unexpected).

COMMITS: push consumers' offset commits, ``committed_offset`` being the next offset the
group will consume in that queue, and (``kind`` "start") the offset a consumer began
reading a queue from, which it had read from the broker. A redelivery at or after the last
committed offset, or at or after where its consumer's current session on that queue
started (a member that took a queue over while the old owner still committed), is what
at-least-once promises; one before both is a bug, and so is a session started below the
offset committed at that moment.
"""

from __future__ import annotations

from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType, TimestampType)

MESSAGE = StructType([
    StructField("topic", StringType(), False),
    StructField("broker", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("queue_offset", LongType(), False),
    StructField("msg_id", StringType(), False),
    StructField("keys", ArrayType(StringType(), False), False),
    StructField("tags", StringType(), True),
    StructField("properties", MapType(StringType(), StringType(), False), False),
    StructField("body", BinaryType(), False),
    StructField("born_timestamp", TimestampType(), False),
    StructField("store_timestamp", TimestampType(), False),
])

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)

HISTORY = StructType([
    StructField("process", StringType(), False),     # the load task (partition and attempt)
    StructField("op", LongType(), False),            # attempt number within the process
    StructField("type", StringType(), False),        # invoke | ok | fail | info
    StructField("key", StringType(), False),
    StructField("seq", LongType(), False),           # per-key sequence number, from 0
    StructField("msg_id", StringType(), False),
    StructField("body_crc", LongType(), False),      # zlib.crc32 of the body sent
    StructField("time_ns", LongType(), False),       # wall clock (time.time_ns) of the event
    StructField("broker", StringType(), True),       # ok only
    StructField("queue_id", IntegerType(), True),    # the queue chosen (invoke) or stored in (ok)
    StructField("queue_offset", LongType(), True),   # ok only
    StructField("error", StringType(), True),        # fail and info
])

READER_DATASOURCE, READER_PUSH = "datasource", "push"

READS = StructType([
    StructField("reader", StringType(), False),
    StructField("consumer", StringType(), False),
    StructField("delivery_index", LongType(), False),
    StructField("msg_id", StringType(), False),
    StructField("key", StringType(), True),
    StructField("seq", LongType(), True),
    StructField("body_crc", LongType(), False),      # zlib.crc32 of the body received
    StructField("broker", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("queue_offset", LongType(), False),
    StructField("born_ms", LongType(), False),
    StructField("store_ms", LongType(), False),
    StructField("delivered_ns", LongType(), False),  # wall clock when the reader got it
])

COMMIT, QUEUE_START = "commit", "start"

COMMITS = StructType([
    StructField("consumer", StringType(), False),
    StructField("broker", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("committed_offset", LongType(), False),
    StructField("time_ns", LongType(), False),
    StructField("kind", StringType(), True),         # commit (or null) | start
])

# What the checker returns: one row per case found.
ANOMALY = StructType([
    StructField("anomaly", StringType(), False),
    StructField("reader", StringType(), True),
    StructField("msg_id", StringType(), True),
    StructField("key", StringType(), True),
    StructField("seq", LongType(), True),
    StructField("broker", StringType(), True),
    StructField("queue_id", IntegerType(), True),
    StructField("queue_offset", LongType(), True),
    StructField("explained", StringType(), True),    # why a duplicate is expected, or null
    StructField("detail", StringType(), True),
])


def encode_body(key: str, seq: int, size: int) -> bytes:
    """A load message body: ``key|seq|`` then padding to ``size`` bytes."""
    head = f"{key}|{seq}|".encode()
    return head + b"x" * max(0, size - len(head))


def decode_body(body: bytes) -> tuple[str, int] | None:
    """(key, seq) of a load body; None when it is not one."""
    parts = bytes(body).split(b"|", 2)
    if len(parts) != 3:
        return None
    try:
        return parts[0].decode(), int(parts[1])
    except (UnicodeDecodeError, ValueError):
        return None
