"""``spark.read.format("rocketbox")``: topics as Spark tables, on PySpark's Python DataSource API.

Read (batch and ``readStream``) plans one partition per message queue and offset range
and pulls it with a ``PullConsumer``; rows arrive as Arrow record batches. Write sends
rows with a ``Producer``, batched per queue; a ``key`` column picks the queue by hash
(RocketMQ's SelectMessageQueueByHash), so one key's rows keep their order.

Options (Kafka's names where Kafka has one):

    namesrv                NameServer addresses, host:port separated by ',' or ';' (required)
    topic                  the topic (required; a ``topic`` column overrides it per row on write)
    startingOffsets        earliest | latest | {"broker-a": {"0": 23}}  (batch: earliest, stream: latest)
    endingOffsets          latest | {"broker-a": {"0": 99}}   (batch only, exclusive)
    maxOffsetsPerTrigger   rows per micro-batch at most, shared by the queues by their backlog
    pullBatchSize          messages per pull (default 1024)
    writeBatchSize         rows per batch send (default 256)
    requestTimeoutMs       per request (default the client's, 3000)
    transport              native (RocketBox's ZeroMQ door, the default) | remoting (RocketMQ's TCP
                           protocol: namesrv is then a remoting address, RocketBox's or Apache RocketMQ's)

No client lives on a reader or writer object: they are pickled to executors. Each Python
worker keeps its clients in a per-process cache instead (Spark reuses its workers).
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter, InputPartition, WriterCommitMessage)

from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from rocketbox.cluster.client.message import Message, MessageQueue
from rocketbox.spark import offsets as offs
from rocketbox.spark.schemas import MESSAGE

log = logging.getLogger(__name__)
TRANSPORTS = ("native", "remoting")

FORMAT = "rocketbox"
PULL_GROUP = "rocketbox-spark-reader"
PRODUCER_GROUP = "rocketbox-spark-writer"
PULL_BATCH_DEFAULT = 1024
WRITE_BATCH_DEFAULT = 256
WRITE_BATCH_BYTES_MAX = 1024 * 1024
# A pull that returns nothing while the range is not yet read: retried, long-polling, this many times.
EMPTY_PULLS_MAX = 20
EMPTY_PULL_WAIT_MS = 500


# ------------------------------------------------------------------ options and clients

@dataclass(frozen=True)
class Options:
    namesrv: tuple[str, ...]
    topic: str
    pull_batch: int
    write_batch: int
    request_timeout_ms: int | None
    transport: str = "native"

    @classmethod
    def parse(cls, options: dict, *, topic_required: bool = True) -> "Options":
        namesrv = tuple(p.strip() for p in options.get("namesrv", "").replace(";", ",").split(",") if p.strip())
        if not namesrv:
            raise ValueError("the rocketbox source needs option namesrv (host:port of a NameServer)")
        topic = options.get("topic", "")
        if topic_required and not topic:
            raise ValueError("the rocketbox source needs option topic")
        timeout = options.get("requestTimeoutMs")
        transport = options.get("transport", "native")
        if transport not in TRANSPORTS:
            raise ValueError(f"option transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
        return cls(namesrv, topic, _positive(options, "pullBatchSize", PULL_BATCH_DEFAULT),
                   _positive(options, "writeBatchSize", WRITE_BATCH_DEFAULT), int(timeout) if timeout else None,
                   transport)

    def client_config(self):
        from rocketbox.cluster.client.routes import config_for
        changes = {"request_timeout_ms": self.request_timeout_ms} if self.request_timeout_ms else {}
        return config_for(self.namesrv, transport=self.transport, **changes)


def _positive(options: dict, name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be a positive integer, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"option {name} must be a positive integer, not {raw!r}")
    return value


_clients: dict[tuple, object] = {}
_clients_lock = threading.Lock()


def _client(kind: str, opts: Options):
    """A PullConsumer or Producer for these NameServers, one per process and kind."""
    from rocketbox.cluster import Producer, PullConsumer
    cache_key = (kind, opts.namesrv, opts.request_timeout_ms, opts.transport)
    with _clients_lock:
        client = _clients.get(cache_key)
        if client is None:
            cls, group = (PullConsumer, PULL_GROUP) if kind == "pull" else (Producer, PRODUCER_GROUP)
            client = _clients[cache_key] = cls(group, config=opts.client_config())
        return client


def queue_bounds(opts: Options) -> offs.Bounds:
    consumer = _client("pull", opts)
    return {(mq.broker_name, mq.queue_id): (consumer.min_offset(mq), consumer.max_offset(mq))
            for mq in consumer.queues(opts.topic)}


# ------------------------------------------------------------------ reading

class QueuePartition(InputPartition):
    def __init__(self, queue_range: offs.QueueRange):
        super().__init__(queue_range)
        self.range = queue_range


def _arrow_schema():
    # Derived from the Spark schema, so nullability matches what Spark checks on every batch.
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(MESSAGE, timezone="UTC")


def _record_batch(messages: list, broker: str, schema):
    import pyarrow as pa
    columns = [
        [m.topic for m in messages], [broker] * len(messages), [m.queue_id for m in messages],
        [m.queue_offset for m in messages], [m.msg_id for m in messages], [m.keys for m in messages],
        [m.tags for m in messages], [list(m.properties.items()) for m in messages], [m.body for m in messages],
        [m.born_timestamp_ms * 1000 for m in messages], [m.store_timestamp_ms * 1000 for m in messages]]
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


def read_range(opts: Options, queue_range: offs.QueueRange):
    """Record batches of the messages in [start, end) of one queue, in offset order."""
    from rocketbox.cluster import PullStatus
    consumer = _client("pull", opts)
    schema = _arrow_schema()
    mq = MessageQueue(opts.topic, queue_range.broker, queue_range.queue_id)
    offset, empty_pulls, last_status = queue_range.start, 0, None
    # Bounded: every useful pull advances the offset; empty ones wait (long poll) and are counted.
    while offset < queue_range.end and empty_pulls < EMPTY_PULLS_MAX:
        result = consumer.pull(mq, offset, min(opts.pull_batch, queue_range.end - offset),
                               suspend_ms=EMPTY_PULL_WAIT_MS if empty_pulls else 0)
        last_status = result.status
        if result.status == PullStatus.OFFSET_ILLEGAL:
            if offset < result.min_offset:
                # Retention deleted the range's start: go on from what is left, as RocketMQ's
                # consumers correct OFFSET_TOO_SMALL (rows below are gone for every reader).
                log.warning("%s: offsets %d..%d were deleted by retention; reading from %d",
                            mq, offset, result.min_offset - 1, result.min_offset)
                offset = result.min_offset
                continue
            raise RuntimeError(f"offset {offset} of {mq} is past the queue's end "
                               f"(the queue holds {result.min_offset}..{result.max_offset})")
        messages = [m for m in result.messages if m.queue_offset < queue_range.end]
        if not messages:
            empty_pulls += 1
            continue
        empty_pulls = 0
        offset = messages[-1].queue_offset + 1
        yield _record_batch(messages, queue_range.broker, schema)
    if offset < queue_range.end:
        raise RuntimeError(f"{mq}: read stopped at offset {offset}, planned up to {queue_range.end} "
                           f"({empty_pulls} empty pulls, last {last_status})")


class BatchReader(DataSourceReader):
    def __init__(self, options: dict):
        self.opts = Options.parse(options)
        self.starting = offs.parse_spec(options.get("startingOffsets"), "earliest")
        self.ending = offs.parse_spec(options.get("endingOffsets"), "latest")
        if self.ending == "earliest":
            raise ValueError("endingOffsets cannot be 'earliest'")

    def partitions(self):
        bounds = queue_bounds(self.opts)
        start = offs.resolve(self.starting, bounds, "earliest")
        end = offs.resolve(self.ending, bounds, "latest")
        return [QueuePartition(r) for r in offs.ranges(start, end)]

    def read(self, partition: QueuePartition):
        return read_range(self.opts, partition.range)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.opts = Options.parse(options)
        self.starting = offs.parse_spec(options.get("startingOffsets"), "latest")
        raw_cap = options.get("maxOffsetsPerTrigger")
        self.rows_per_trigger = _positive(options, "maxOffsetsPerTrigger", 0) if raw_cap else None
        self.target: offs.Offsets | None = None   # Trigger.AvailableNow: read up to here, then stop

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {q: high for q, (_low, high) in queue_bounds(self.opts).items()}

    def initialOffset(self) -> dict:
        return offs.to_json(offs.resolve(self.starting, queue_bounds(self.opts), "earliest"))

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
        return ReadMaxRows(self.rows_per_trigger) if self.rows_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        from pyspark.sql.streaming.datasource import ReadMaxRows
        begin = offs.from_json(start)
        if self.target is not None:
            latest = {q: max(high, begin.get(q, 0)) for q, high in self.target.items()}
        else:
            # A queue added since the last batch (updateTopic) is read from its beginning.
            latest = {q: max(high, begin.get(q, low)) for q, (low, high) in queue_bounds(self.opts).items()}
        if isinstance(limit, ReadMaxRows):   # ReadAllAvailable (Trigger.Once) ignores the cap
            latest = offs.capped(begin, latest, limit.max_rows)
        return offs.to_json(latest)

    def reportLatestOffset(self) -> dict:
        return offs.to_json({q: high for q, (_low, high) in queue_bounds(self.opts).items()})

    def partitions(self, start: dict, end: dict):
        return [QueuePartition(r) for r in offs.ranges(offs.from_json(start), offs.from_json(end))]

    def read(self, partition: QueuePartition):
        return read_range(self.opts, partition.range)


# ------------------------------------------------------------------ writing

@dataclass
class SentCommit(WriterCommitMessage):
    rows: int
    batches: int


def write_rows(options: dict, field_names: list[str], rows: Iterator) -> SentCommit:
    """Send every row; rows of one queue go in order, in batches. A failed send fails the
    task (Spark may retry it, so the sink is at-least-once, as Kafka's is)."""
    from rocketbox.cluster.client.selectors import select_by_hash
    opts = Options.parse(options, topic_required="topic" not in field_names)
    if "body" not in field_names:
        raise ValueError("writing to rocketbox needs a body column (binary or string)")
    producer = _client("produce", opts)
    pending: dict[MessageQueue, list[Message]] = {}
    pending_bytes: dict[MessageQueue, int] = {}
    round_robin = itertools.count()
    sent_rows = sent_batches = 0

    def flush(mq: MessageQueue) -> None:
        nonlocal sent_rows, sent_batches
        batch = pending.pop(mq, None)
        pending_bytes.pop(mq, None)
        if batch:
            producer.send_batch(batch, queue=mq)
            sent_rows += len(batch)
            sent_batches += 1

    for row in rows:
        values = row.asDict() if hasattr(row, "asDict") else dict(zip(field_names, row))
        message = _message(values, opts.topic)
        queues = producer.routes.publish_route(message.topic)[1]
        key = values.get("key")
        if key is not None:
            mq = select_by_hash(queues, str(key))
        else:
            mq = queues[(next(round_robin) // opts.write_batch) % len(queues)]
        pending.setdefault(mq, []).append(message)
        pending_bytes[mq] = pending_bytes.get(mq, 0) + len(message.body)
        if len(pending[mq]) >= opts.write_batch or pending_bytes[mq] >= WRITE_BATCH_BYTES_MAX:
            flush(mq)
    for mq in list(pending):
        flush(mq)
    return SentCommit(sent_rows, sent_batches)


def _message(values: dict, default_topic: str) -> Message:
    body = values.get("body")
    if body is None:
        raise ValueError("a row to write has a null body")
    if isinstance(body, str):
        body = body.encode()
    keys = values.get("keys")
    if keys is None and values.get("key") is not None:
        keys = str(values["key"])
    properties = {str(k): str(v) for k, v in (values.get("properties") or {}).items()}
    return Message(values.get("topic") or default_topic, bytes(body), tags=values.get("tags"),
                   keys=list(keys) if isinstance(keys, (list, tuple)) else keys, properties=properties)


class BatchWriter(DataSourceWriter):
    def __init__(self, options: dict, field_names: list[str]):
        Options.parse(options, topic_required="topic" not in field_names)  # fail on the driver, early
        self.options = dict(options)
        self.field_names = field_names

    def write(self, iterator) -> SentCommit:
        return write_rows(self.options, self.field_names, iterator)

    def commit(self, messages) -> None:
        log.info("rocketbox write: %d rows sent", sum(m.rows for m in messages if m))


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict, field_names: list[str]):
        Options.parse(options, topic_required="topic" not in field_names)
        self.options = dict(options)
        self.field_names = field_names

    def write(self, iterator) -> SentCommit:
        return write_rows(self.options, self.field_names, iterator)

    def commit(self, messages, batchId) -> None:
        log.info("rocketbox stream write, batch %s: %d rows sent", batchId, sum(m.rows for m in messages if m))


# ------------------------------------------------------------------ the source

class RocketBoxDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        return MESSAGE

    def reader(self, schema):
        return BatchReader(self.options)

    def streamReader(self, schema):
        return StreamReader(self.options)

    def writer(self, schema, overwrite: bool):
        return BatchWriter(self.options, schema.fieldNames())

    def streamWriter(self, schema, overwrite: bool):
        return StreamWriter(self.options, schema.fieldNames())


def register(session) -> None:
    """Make ``format("rocketbox")`` known to ``session``."""
    session.dataSource.register(RocketBoxDataSource)
