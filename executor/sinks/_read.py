"""Reading exactly a snapshot's files with Spark (read_table's and the compaction's input).

A batch directory `storm_batch_id=X/[col=v/]part-*` gives the batch id (and the user's
partition columns) through Spark's partition discovery from the table's root. A compacted
directory `_storm_compacted/storm_compaction=C/[col=v/]part-*` holds the batch id as a data
column (it merges many batches), its partitions discovered from `_storm_compacted`. Both are
read file by file, exactly the files the snapshot lists, and unioned by column name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks._integrity import PARQUET_CHECKSUMS
from executor.sinks._table import COMPACTED_DIR, COMPACTION_COLUMN


def table_schema(meta: dict[str, Any]):
    """The StructType of a table as read: data columns, audit columns, then partition columns."""
    from pyspark.sql import types as T

    user = T.StructType.fromJson(json.loads(meta["schema"]))
    parts = meta.get("partition_by") or []
    fields = [f for f in user.fields if f.name not in parts]
    fields += [T.StructField(L.WRITTEN_AT_COLUMN, T.TimestampType(), True),
               T.StructField(L.TASK_COLUMN, T.IntegerType(), True),
               T.StructField(L.BATCH_COLUMN, T.StringType(), True)]
    fields += [user[p] for p in parts]
    return T.StructType(fields)


def _reader(spark, meta: dict[str, Any]):
    reader = spark.read.format(meta["format"]).options(**L.format_options(meta["format"]))
    if meta["format"] == "parquet":
        reader = reader.options(**PARQUET_CHECKSUMS)
    return reader


def _files(table: Path, entries: Iterable[G.Entry]) -> list[str]:
    return [L.spark_uri(table / e.path / name) for e in entries for name in sorted(e.files)]


def entries_frame(spark, table: Path, meta: dict[str, Any], entries: Iterable[G.Entry]):
    """The rows of these entries (batch and compacted directories) as one DataFrame."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = table_schema(meta)
    entries = list(entries)
    frames = []
    batch_files = _files(table, (e for e in entries if e.kind == "batch"))
    if batch_files:
        frames.append(_reader(spark, meta).schema(schema).option("basePath", L.spark_uri(table)).load(batch_files))
    compacted_files = _files(table, (e for e in entries if e.kind == "compacted"))
    if compacted_files:
        with_id = T.StructType(schema.fields + [T.StructField(COMPACTION_COLUMN, T.StringType(), True)])
        df = _reader(spark, meta).schema(with_id).option("basePath", L.spark_uri(table / COMPACTED_DIR)) \
            .load(compacted_files)
        frames.append(df.select(*[F.col(f.name) for f in schema.fields]))
    if not frames:
        return spark.createDataFrame([], schema)
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out
