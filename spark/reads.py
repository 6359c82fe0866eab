"""Reads as the checker wants them (schemas.READS), from the DataSource's message table.

Pure DataFrame code. The delivery index is the row's position in its Spark partition
(``monotonically_increasing_id`` grows in row order within a partition, and a
partition is one queue read in pull order), so the order the reader saw is kept.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketbox.spark.schemas import READER_DATASOURCE, READS


def datasource_reads(messages: DataFrame) -> DataFrame:
    parts = F.split(F.col("body").cast("string"), r"\|", 3)
    seq = F.when(F.size(parts) == 3, F.expr("try_cast(split(cast(body as string), '[|]', 3)[1] as bigint)"))
    key = F.when(seq.isNotNull(), parts.getItem(0))
    out = messages.select(
        F.lit(READER_DATASOURCE).alias("reader"),
        F.concat_ws(":", "broker", F.col("queue_id").cast("string")).alias("consumer"),
        F.monotonically_increasing_id().alias("delivery_index"),
        "msg_id", key.alias("key"), seq.alias("seq"),
        F.crc32("body").alias("body_crc"),
        "broker", "queue_id", "queue_offset",
        F.unix_millis("born_timestamp").alias("born_ms"),
        F.unix_millis("store_timestamp").alias("store_ms"),
        (F.unix_micros(F.current_timestamp()) * 1000).alias("delivered_ns"))
    return out.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in READS.fields])
