"""The consistency checker, Jepsen style: one pure DataFrame function per anomaly.

Every check takes the HISTORY, READS and (where it needs them) COMMITS tables of
``spark/schemas.py`` and returns ANOMALY rows, one per case; a clean run returns none but
explained duplicates. Checks are per reader (``datasource``, ``push``): each path must read
everything back on its own. No check collects or calls Python per row, so they scale with
the cluster; ``check_all`` is their union and ``summary`` counts it.

The anomalies (the ``anomaly`` column):

- ``lost``: an acknowledged msg_id (an ``ok`` completion) the reader never delivered.
- ``unexpected``: a delivery whose msg_id was never sent, whose body did not parse, or
  whose (key, seq) is not the one sent under that msg_id.
- ``aborted_read``: a delivered msg_id every attempt of which failed definitely.
- ``duplicate``: a msg_id delivered to one reader more than once, each copy beyond the
  first. Stored at two positions: ``explained`` is "producer retry" when some attempt was
  indeterminate and there are no more positions than attempts that were not ``fail``.
  One position delivered twice: "redelivery" for a push read at or after the group's
  committed offset at that moment, or at or after where the reading consumer's session on
  that queue started (COMMITS rows of kind "start"; a start below the commit of its moment
  explains nothing, unless the queue's broker lost power before it and the start is at or
  above what the broker had surely persisted: the commit of ``OFFSETS_DURABLE_AFTER_NS``
  before the cut, as the broker persists offsets every 5 s of its uptime, RocketMQ's
  flushConsumerOffsetInterval, or what it had at its previous cut when it came back from that
  one less than that before): what at-least-once allows; never for the DataSource.
- ``inconsistent_offset``: one queue position seen (by a reader or an ``ok`` row) holding
  two msg_ids or two body checksums.
- ``queue_order``: a consumer got a queue offset at or below the one before it, except a
  push consumer resuming at or after the committed offset (after a rebalance or restart).
  Forward gaps are not reported here: ``lost`` sees what they skipped.
- ``key_order``: the messages of one key, in store order, do not have increasing seqs.
- ``checksum_mismatch``: a delivered body whose crc is not the one sent.

What the checks take for granted: one topic per run, so (broker, queue_id, queue_offset)
names a position; (process, op) names one attempt over the whole run; COMMITS are the one
push group's, whichever consumer made them.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rocketbox.cluster.config import BrokerConfig
from rocketbox.spark.schemas import ANOMALY, COMMIT, FAIL, INFO, INVOKE, OK, QUEUE_START, READER_PUSH

LOST, UNEXPECTED, ABORTED_READ, DUPLICATE = "lost", "unexpected", "aborted_read", "duplicate"
INCONSISTENT_OFFSET, QUEUE_ORDER, KEY_ORDER, CHECKSUM_MISMATCH = (
    "inconsistent_offset", "queue_order", "key_order", "checksum_mismatch")
ANOMALIES = (LOST, UNEXPECTED, ABORTED_READ, DUPLICATE, INCONSISTENT_OFFSET, QUEUE_ORDER, KEY_ORDER,
             CHECKSUM_MISMATCH)

PRODUCER_RETRY, REDELIVERY = "producer retry", "redelivery"

# A commit the broker took this long before a power cut of its host was persisted (its offsets
# are written every consumer_offset_persist_interval_ms, 5 s), plus a second of slack.
OFFSETS_DURABLE_AFTER_NS = (BrokerConfig.consumer_offset_persist_interval_ms + 1_000) * 1_000_000

QUEUE = ("broker", "queue_id")
POSITION = (*QUEUE, "queue_offset")


def attempts(history: DataFrame) -> DataFrame:
    """One row per send attempt: its invoke joined to its completion by (process, op).

    ``type`` is ok, fail or info; an attempt that never completed is ``info`` (it may have
    been stored) with a null ``complete_ns``. ``queue_id`` is where an ok attempt was
    stored, else the queue the invoke chose; ``broker`` and ``queue_offset`` are ok only.
    """
    invokes = history.filter(F.col("type") == INVOKE).select(
        "process", "op", "msg_id", "key", "seq", "body_crc", F.col("time_ns").alias("invoke_ns"),
        F.col("queue_id").alias("chosen_queue_id"))
    completions = history.filter(F.col("type") != INVOKE).select(
        "process", "op", "type", F.col("time_ns").alias("complete_ns"), *POSITION, "error")
    return invokes.join(completions, ["process", "op"], "left").select(
        "process", "op", "msg_id", "key", "seq", "body_crc", "invoke_ns", "complete_ns",
        F.coalesce("type", F.lit(INFO)).alias("type"), "broker",
        F.coalesce("queue_id", "chosen_queue_id").alias("queue_id"), "queue_offset", "error")


def lost(history: DataFrame, reads: DataFrame, readers: list[str] | None = None) -> DataFrame:
    """Acknowledged msg_ids a reader never delivered, one row per (reader, msg_id).

    ``readers`` names the readers to hold to account; by default those present in reads
    (a reader that delivered nothing at all only shows up when named).
    """
    if readers is None:
        readers_df = reads.select("reader").distinct()
    else:
        readers_df = reads.sparkSession.createDataFrame([(r,) for r in readers], "reader string")
    acked = _first_position(history.filter(F.col("type") == OK), ["msg_id", "key", "seq"])
    missing = acked.crossJoin(readers_df).join(reads.select("reader", "msg_id"), ["reader", "msg_id"], "left_anti")
    return _cases(missing.withColumn("detail", F.lit("acknowledged, never delivered")), LOST)


def unexpected(history: DataFrame, reads: DataFrame) -> DataFrame:
    """Deliveries the history cannot account for, one row per distinct (reader, position, reason)."""
    sent = reads.join(_sent(history), "msg_id", "left")
    detail = (F.when(F.col("sent_key").isNull(), "never sent")
              .when(F.col("key").isNull() | F.col("seq").isNull(), "body did not parse")
              .when((F.col("key") != F.col("sent_key")) | (F.col("seq") != F.col("sent_seq")),
                    F.format_string("body says %s/%d, sent as %s/%d", "key", "seq", "sent_key", "sent_seq")))
    return _cases(sent.withColumn("detail", detail).filter(F.col("detail").isNotNull()), UNEXPECTED).distinct()


def aborted_reads(history: DataFrame, reads: DataFrame) -> DataFrame:
    """Delivered msg_ids whose every attempt failed definitely, one row per (reader, msg_id)."""
    failed = (attempts(history).groupBy("msg_id").agg(F.bool_and(F.col("type") == FAIL).alias("all_failed"))
              .filter("all_failed"))
    delivered = _first_position(reads.join(failed, "msg_id"), ["reader", "msg_id"], F.min("key").alias("key"),
                                F.min("seq").alias("seq"), F.count("*").alias("deliveries"))
    detail = F.format_string("every attempt failed definitely; %d deliveries", "deliveries")
    return _cases(delivered.withColumn("detail", detail), ABORTED_READ)


def duplicates(history: DataFrame, reads: DataFrame, commits: DataFrame, power_cuts=()) -> DataFrame:
    """Every copy of a msg_id a reader got beyond the first, explained or not (see the module doc)."""
    return _stored_twice(history, reads).unionByName(_delivered_twice(reads, commits, power_cuts))


def _stored_twice(history: DataFrame, reads: DataFrame) -> DataFrame:
    # A resend after an indeterminate attempt may store the message once per attempt that
    # was not refused: that many positions are expected, more are not.
    per_msg = attempts(history).groupBy("msg_id").agg(
        F.count("*").alias("n_attempts"),
        F.count_if(F.col("type") != FAIL).alias("n_maybe_stored"),
        F.count_if(F.col("type") == INFO).alias("n_indeterminate"))
    by_msg = Window.partitionBy("reader", "msg_id")
    copies = (reads.groupBy("reader", "msg_id", *POSITION).agg(F.min("key").alias("key"), F.min("seq").alias("seq"))
              .withColumn("copy", F.row_number().over(by_msg.orderBy(*POSITION)))
              .withColumn("n_positions", F.count("*").over(by_msg))
              .filter(F.col("copy") > 1)
              .join(per_msg, "msg_id", "left")
              .na.fill(0, ["n_attempts", "n_maybe_stored", "n_indeterminate"]))
    explained = F.when((F.col("n_indeterminate") > 0) & (F.col("n_positions") <= F.col("n_maybe_stored")),
                       F.lit(PRODUCER_RETRY))
    detail = F.format_string("stored at %d positions; %d attempts, %d not failed, %d indeterminate",
                             "n_positions", "n_attempts", "n_maybe_stored", "n_indeterminate")
    return _cases(copies.withColumn("explained", explained).withColumn("detail", detail), DUPLICATE)


def _delivered_twice(reads: DataFrame, commits: DataFrame, power_cuts=()) -> DataFrame:
    # Consumers interleave, so "first" is by wall clock across them.
    first_first = Window.partitionBy("reader", "msg_id", *POSITION).orderBy("delivered_ns", "consumer",
                                                                            "delivery_index")
    again = _with_committed(reads, commits, power_cuts).withColumn("copy", F.row_number().over(first_first)).filter(
        F.col("copy") > 1)
    explained = F.when((F.col("reader") == READER_PUSH) & _at_or_after_commit(), F.lit(REDELIVERY))
    detail = F.format_string("delivery %d of this position, to %s%s", "copy", "consumer", _committed_note())
    return _cases(again.withColumn("explained", explained).withColumn("detail", detail), DUPLICATE)


def inconsistent_offsets(history: DataFrame, reads: DataFrame) -> DataFrame:
    """Queue positions holding two msg_ids or two bodies, one row per position (reader null)."""
    seen = reads.select(F.col("reader").alias("source"), "msg_id", "body_crc", *POSITION).unionByName(
        history.filter(F.col("type") == OK).select(F.lit("history").alias("source"), "msg_id", "body_crc", *POSITION))
    at = seen.groupBy(*POSITION).agg(*(F.array_sort(F.collect_set(F.col(c).cast("string"))).alias(c)
                                       for c in ("msg_id", "body_crc", "source")))
    clash = at.filter((F.size("msg_id") > 1) | (F.size("body_crc") > 1))
    detail = F.format_string("msg_ids %s; body_crcs %s; seen by %s",
                             *(F.array_join(c, ",") for c in ("msg_id", "body_crc", "source")))
    return _cases(clash.withColumn("detail", detail).drop("msg_id"), INCONSISTENT_OFFSET)


def queue_order(reads: DataFrame, commits: DataFrame, power_cuts=()) -> DataFrame:
    """Deliveries to one consumer that went back (or stood still) in a queue without a commit to resume from."""
    seen = Window.partitionBy("reader", "consumer", *QUEUE).orderBy("delivery_index")
    steps = _with_committed(reads, commits, power_cuts).withColumn("previous", F.lag("queue_offset").over(seen))
    resumed = (F.col("reader") == READER_PUSH) & _at_or_after_commit()
    back = steps.filter((F.col("queue_offset") <= F.col("previous")) & ~resumed)
    detail = F.format_string("offset %d after %d at %s #%d%s", "queue_offset", "previous", "consumer",
                             "delivery_index", _committed_note())
    return _cases(back.withColumn("detail", detail), QUEUE_ORDER)


def key_order(reads: DataFrame) -> DataFrame:
    """Messages of one key whose seq does not rise in store order, per reader.

    A message stored twice in a queue (a producer retry) counts at its first position there.
    """
    firsts = (reads.filter(F.col("key").isNotNull() & F.col("seq").isNotNull())
              .groupBy("reader", "key", "seq", "msg_id", *QUEUE).agg(F.min("queue_offset").alias("queue_offset")))
    in_store = Window.partitionBy("reader", "key").orderBy(*POSITION)
    pairs = firsts.select("*", *(F.lag(c).over(in_store).alias(f"prev_{c}") for c in ("seq", "msg_id", *POSITION)))
    # The same msg_id stored in two queues is a duplicate, not a reordering.
    bad = pairs.filter((F.col("seq") <= F.col("prev_seq")) & (F.col("msg_id") != F.col("prev_msg_id")))
    detail = F.format_string("seq %d stored after seq %d (%s at %s/%d/%d)", "seq", "prev_seq", "prev_msg_id",
                             "prev_broker", "prev_queue_id", "prev_queue_offset")
    return _cases(bad.withColumn("detail", detail), KEY_ORDER)


def checksum_mismatches(history: DataFrame, reads: DataFrame) -> DataFrame:
    """Deliveries whose body crc is not the one sent under that msg_id."""
    bad = reads.join(_sent(history), "msg_id").filter(F.col("body_crc") != F.col("sent_crc"))
    detail = F.format_string("body_crc %d, sent %d", "body_crc", "sent_crc")
    return _cases(bad.withColumn("detail", detail), CHECKSUM_MISMATCH).distinct()


def check_all(history: DataFrame, reads: DataFrame, commits: DataFrame,
              readers: list[str] | None = None, power_cuts=()) -> DataFrame:
    """Every check's cases in one ANOMALY DataFrame. ``power_cuts``: (process name of the broker
    whose host lost power, start ns, end ns) of each power fault."""
    found = [lost(history, reads, readers), unexpected(history, reads), aborted_reads(history, reads),
             duplicates(history, reads, commits, power_cuts), inconsistent_offsets(history, reads),
             queue_order(reads, commits, power_cuts), key_order(reads), checksum_mismatches(history, reads)]
    return reduce(DataFrame.unionByName, found)


def summary(anomalies: DataFrame) -> DataFrame:
    """Case counts per (anomaly, reader, explained); explained null means unexplained."""
    return (anomalies.groupBy("anomaly", "reader", "explained").count()
            .orderBy("anomaly", F.col("reader").asc_nulls_first(), F.col("explained").asc_nulls_first()))


def _sent(history: DataFrame) -> DataFrame:
    """What every attempt of a msg_id carried (they all carry the same), one row per msg_id."""
    return history.filter(F.col("type") == INVOKE).groupBy("msg_id").agg(
        F.min("key").alias("sent_key"), F.min("seq").alias("sent_seq"), F.min("body_crc").alias("sent_crc"))


def _first_position(df: DataFrame, keys: list[str], *aggs) -> DataFrame:
    """One row per ``keys``: the lowest position among its rows, plus ``aggs``."""
    return df.groupBy(*keys).agg(F.min(F.struct(*POSITION)).alias("_at"), *aggs).select("*", "_at.*").drop("_at")


def _with_committed(reads: DataFrame, commits: DataFrame, power_cuts=()) -> DataFrame:
    """``reads`` plus ``committed`` (the latest committed offset of the read's queue at
    delivered_ns) and ``session_start`` (where the reading consumer's current session on
    that queue began, if that start was not below the offset committed at that moment, or,
    after a power cut of the queue's broker, not below what that broker had persisted).

    Null before the queue's first commit. A commit at the same instant as a delivery counts,
    and of commits at one instant the highest. Commits, starts and reads are merged into one
    timeline per queue, so this is a sort, not a join of every read with every commit.
    """
    kind = F.coalesce(F.col("kind"), F.lit(COMMIT)) if "kind" in commits.columns else F.lit(COMMIT)
    marks = commits.select(*QUEUE, F.col("consumer").alias("_by"), F.col("time_ns").alias("_t"),
                           F.when(kind == COMMIT, F.col("committed_offset")).alias("_commit"),
                           F.when(kind == QUEUE_START, F.col("committed_offset")).alias("_start"))
    events = (reads.withColumn("_t", F.col("delivered_ns")).withColumn("_by", F.col("consumer"))
              .unionByName(marks, allowMissingColumns=True))
    if power_cuts:
        events = events.unionByName(_power_cut_marks(commits, power_cuts), allowMissingColumns=True)
    timeline = (Window.partitionBy(*QUEUE).orderBy("_t", F.col("_commit").asc_nulls_last())
                .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    session = (Window.partitionBy(*QUEUE, "_by").orderBy("_t", F.col("_start").asc_nulls_last())
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    with_commit = events.withColumn("committed", F.last("_commit", ignorenulls=True).over(timeline))
    valid = F.col("_start") >= F.coalesce(F.col("committed"), F.lit(0))
    if power_cuts:
        # After a cut: the commit the broker had surely persisted (taken at its "_durable" mark).
        durable = F.when(F.col("_durable"), F.coalesce(F.col("committed"), F.lit(0)))
        with_commit = (with_commit.withColumn("_persisted", F.last(durable, ignorenulls=True).over(timeline))
                       .withColumn("_cut_seen", F.last("_cut", ignorenulls=True).over(timeline)))
        valid = valid | (F.col("_cut_seen").isNotNull() & (F.col("_start") >= F.col("_persisted")))
    valid_start = F.when(valid, F.col("_start"))
    return (with_commit.withColumn("_valid_start", valid_start)
            .withColumn("session_start", F.last("_valid_start", ignorenulls=True).over(session))
            .filter(F.col("reader").isNotNull())
            .drop("_t", "_by", "_commit", "_start", "_valid_start", "_durable", "_cut", "_persisted", "_cut_seen"))


def _power_cut_marks(commits: DataFrame, power_cuts) -> DataFrame:
    """Two timeline marks per power cut and queue of the broker it hit: ``_durable`` where the
    commits the broker surely persisted end (``durable_marks``), ``_cut``
    when the cut was over. A cut of process ``target`` hit broker b's host when target is b or
    one of b's processes (``b-...``)."""
    spark = commits.sparkSession
    rows = [(target, durable_ns, True, None) for target, durable_ns in durable_marks(power_cuts)]
    rows += [(target, end_ns, None, end_ns) for target, _start, end_ns in power_cuts]
    marks = spark.createDataFrame(rows, "target string, _t long, _durable boolean, _cut long")
    queues = commits.select(*QUEUE).distinct()
    hit = (F.col("target") == F.col("broker")) | F.col("target").startswith(F.concat(F.col("broker"), F.lit("-")))
    return queues.join(marks, hit).drop("target")


def durable_marks(power_cuts) -> list[tuple[str, int]]:
    """(target, ns) per power cut: the commits taken up to ns were surely persisted when it struck.

    OFFSETS_DURABLE_AFTER_NS before the cut, unless the broker came back from an earlier cut after
    that instant: its persisting runs on its own uptime, so a broker up for less than that may not
    have persisted anything since its restart, and what it surely had is what it had at the
    earlier cut (whose mark carries over)."""
    marks, last_cut = [], {}
    for target, start_ns, end_ns in sorted(power_cuts, key=lambda cut: cut[1]):
        durable_ns = start_ns - OFFSETS_DURABLE_AFTER_NS
        earlier = last_cut.get(target)
        if earlier is not None and durable_ns < earlier[1]:
            durable_ns = earlier[0]
        last_cut[target] = (durable_ns, end_ns)
        marks.append((target, durable_ns))
    return marks


def _at_or_after_commit():
    # No commit yet: the group starts from the queue's beginning, so any offset is at or after it.
    return ((F.col("queue_offset") >= F.coalesce(F.col("committed"), F.lit(0))) |
            (F.col("queue_offset") >= F.col("session_start")))


def _committed_note():
    return F.when(F.col("reader") == READER_PUSH, F.concat(
        F.lit("; committed offset then "), F.coalesce(F.col("committed").cast("string"), F.lit("none")))).otherwise("")


def _cases(df: DataFrame, anomaly: str) -> DataFrame:
    """``df`` as ANOMALY rows: its columns of those names, the others null."""
    return df.select(*((F.lit(anomaly) if f.name == "anomaly" else
                        F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                       for f in ANOMALY.fields))
