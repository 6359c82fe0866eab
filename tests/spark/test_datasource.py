"""The rocketbox DataSource against a real cluster: batch read, offsets, streaming with a
restart from its checkpoint, and write with a key column choosing the queue."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.client.selectors import select_by_hash
from rocketbox.cluster.testing import LocalCluster, read_topic, wait_until
from rocketbox.spark.datasource import register
from tests.conftest import client_config

QUEUES = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("ds-cluster"))) as running:
        yield running


@pytest.fixture(scope="module")
def rspark(spark):
    register(spark)
    return spark


def _topic(cluster, name: str) -> None:
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic(name, QUEUES)


def _send(cluster, topic: str, start: int, count: int) -> list[str]:
    """``count`` keyed messages, bodies ``m<i>``, spread over the queues; their msg ids, once every
    one is dispatched (a read plans its ranges from the queues' max offsets, which move only then)."""
    cfg = client_config(cluster)
    with Producer("ds-test-producer", config=cfg) as producer, Admin(config=cfg) as admin:
        stored_before = sum(row["maxOffset"] for row in admin.queue_offsets(topic))
        ids = []
        for i in range(start, start + count, 50):
            batch = [Message(topic, f"m{j}".encode(), tags=f"t{j % 3}", keys=f"key{j % 7}",
                             properties={"n": str(j)}) for j in range(i, min(start + count, i + 50))]
            producer.send_batch(batch)
            ids.extend(m.properties["UNIQ_KEY"] for m in batch)
        wait_until(lambda: sum(row["maxOffset"] for row in admin.queue_offsets(topic)) == stored_before + count,
                   30, what=f"{count} messages of {topic} dispatched")
        return ids


def _reader(spark, cluster, topic: str, stream: bool = False, **options):
    source = spark.readStream if stream else spark.read
    reader = source.format("rocketbox").option("namesrv", cluster.namesrv).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_returns_every_message_with_its_columns(rspark, cluster):
    _topic(cluster, "DsBatch")
    ids = _send(cluster, "DsBatch", 0, 600)
    df = _reader(rspark, cluster, "DsBatch")
    assert df.rdd.getNumPartitions() == QUEUES  # one partition per queue
    rows = df.collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids)
    by_body = {bytes(r.body): r for r in rows}
    row = by_body[b"m10"]
    assert row.topic == "DsBatch" and row.broker == "broker-a"
    assert row.keys == ["key3"] and row.tags == "t1" and row.properties["n"] == "10"
    assert row.born_timestamp <= row.store_timestamp
    # Offsets per queue are 0..n-1, each once.
    per_queue = {}
    for r in rows:
        per_queue.setdefault(r.queue_id, []).append(r.queue_offset)
    assert sum(len(v) for v in per_queue.values()) == 600
    assert all(sorted(v) == list(range(len(v))) for v in per_queue.values())


def test_batch_read_honours_starting_and_ending_offsets(rspark, cluster):
    _topic(cluster, "DsRange")
    _send(cluster, "DsRange", 0, 400)
    starting = json.dumps({"broker-a": {"0": 10, "1": -2}})   # queue 0 from 10, queue 1 earliest
    ending = json.dumps({"broker-a": {"0": 20, "1": 5, "2": 0, "3": 0}})
    rows = _reader(rspark, cluster, "DsRange", startingOffsets=starting, endingOffsets=ending).collect()
    got = sorted((r.queue_id, r.queue_offset) for r in rows)
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)]
    with pytest.raises(Exception, match="offsets must be"):
        _reader(rspark, cluster, "DsRange", startingOffsets="{not json").collect()


def test_streaming_read_caps_batches_and_restarts_from_its_checkpoint(rspark, cluster, tmp_path):
    _topic(cluster, "DsStream")
    first = _send(cluster, "DsStream", 0, 300)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_available_now() -> None:
        stream = _reader(rspark, cluster, "DsStream", stream=True, startingOffsets="earliest",
                         maxOffsetsPerTrigger="100")
        query = (stream.writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert not query.isActive
        assert query.exception() is None
        return query

    query = run_available_now()
    batches = [p for p in query.recentProgress if p.numInputRows]
    assert sum(p.numInputRows for p in batches) == 300
    assert max(p.numInputRows for p in batches) <= 100   # maxOffsetsPerTrigger held
    second = _send(cluster, "DsStream", 300, 150)
    run_available_now()   # the same checkpoint: only what is new
    stored = rspark.read.parquet(out).select("msg_id").collect()
    assert sorted(r.msg_id for r in stored) == sorted(first + second)   # each exactly once


def test_a_stream_starts_at_latest_unless_told_as_the_readme_says(rspark, cluster, tmp_path):
    """Kafka's convention, written in spark/README.md: a new streaming query reads only what arrives
    after it starts; ``startingOffsets=earliest`` reads what is already there."""
    _topic(cluster, "DsDefault")
    _send(cluster, "DsDefault", 0, 40)
    counts = {}
    for starting in (None, "earliest"):
        options = {"startingOffsets": starting} if starting else {}
        name = starting or "default"
        query = (_reader(rspark, cluster, "DsDefault", stream=True, **options).writeStream.format("parquet")
                 .option("path", str(tmp_path / name)).option("checkpointLocation", str(tmp_path / f"{name}-cp"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        counts[name] = sum(p.numInputRows for p in query.recentProgress)
    assert counts == {"default": 0, "earliest": 40}
    readme = (Path(__file__).resolve().parents[2] / "spark" / "README.md").read_text()
    assert "A streaming query starts at `latest`" in readme


def test_write_sends_rows_with_the_key_choosing_the_queue(rspark, cluster):
    _topic(cluster, "DsWrite")
    rows = [(f"user{i % 5}", f"{i}".encode(), "tw") for i in range(500)]
    df = rspark.createDataFrame(rows, "key string, body binary, tags string").repartition(1)
    (df.write.format("rocketbox").option("namesrv", cluster.namesrv).option("topic", "DsWrite")
     .option("writeBatchSize", "16").mode("append").save())
    with PullConsumer("ds-write-check", config=client_config(cluster)) as consumer:
        messages = read_topic(consumer, "DsWrite")
        queues = sorted(consumer.queues("DsWrite"))
    assert len(messages) == 500
    for m in messages:
        key = m.keys[0]
        assert m.queue_id == select_by_hash(queues, key).queue_id and m.tags == "tw"
    # Each key's bodies in queue order are the order the rows were written.
    by_key = {}
    for m in sorted(messages, key=lambda m: (m.queue_id, m.queue_offset)):
        by_key.setdefault(m.keys[0], []).append(int(m.body))
    assert all(v == sorted(v) and len(v) == 100 for v in by_key.values())
    assert zlib.crc32(b"".join(sorted(m.body for m in messages))) == \
        zlib.crc32(b"".join(sorted(str(i).encode() for i in range(500))))


def test_missing_options_are_refused_clearly(rspark, cluster):
    with pytest.raises(Exception, match="needs option namesrv"):
        rspark.read.format("rocketbox").option("topic", "X").load().collect()
    with pytest.raises(Exception, match="maxOffsetsPerTrigger must be a positive integer"):
        q = _reader(rspark, cluster, "DsBatch", stream=True, maxOffsetsPerTrigger="-3")
        q.writeStream.format("memory").queryName("bad").start().awaitTermination(30)
