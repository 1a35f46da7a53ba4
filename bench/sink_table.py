"""The Spark table over days: read time of a table of many small committed batches, before and
after compaction, against a fresh table holding the same rows in one batch. One JSON line per
measurement, then a summary line with the ratios.

The table is generated quickly, as N sink commits would leave it: one Spark job writes N batch
directories `storm_batch_id=<id>/` (`--rows` rows each, with the sink's audit columns and a
manifest), and N log commits list them (as N sink tasks' appends would, with the checkpoints the
log writes every 50 commits). Then:
  read_many      read_table(...).count() on the N batches          (median of --reads)
  show_many      `storm-py sink show PATH --limit 0` (a fresh JVM, verify + count)
  compact        storm-py's compaction until nothing is left to merge (sink.compaction.* defaults)
  read_compacted read_table(...).count() after compaction
  show_compacted `storm-py sink show` after compaction
  read_fresh     read_table(...).count() on a fresh table holding the same rows in one batch
  show_fresh     `storm-py sink show` on it (most of a show is the JVM's start and warm-up)
Target (issue 19): read_compacted / read_fresh <= 2.

usage: python bench/sink_table.py [--batches 100000] [--rows 1] [--reads 3] [--many-reads 1] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from executor.sinks import _layout as L  # noqa: E402
from executor.sinks import _log as G  # noqa: E402
from executor.sinks._integrity import MANIFEST, data_files  # noqa: E402

SCHEMA = "id BIGINT, v STRING"


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def spark_session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[1]").appName("storm-py-bench-sink-table")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1").config("spark.log.level", "ERROR")
            .config("spark.driver.memory", "2g").getOrCreate())


def write_meta(table: Path, spark) -> None:
    schema = spark.createDataFrame([], SCHEMA).schema
    L.create_meta(table, {"version": L.META_VERSION, "format": "parquet", "columns": ["id", "v"], "partition_by": [],
                          "dedupe_fields": None, "schema": schema.json(), "created": "bench"})


def generate(spark, table: Path, batches: int, rows: int) -> float:
    """N committed batches of `rows` rows, as N sink commits would leave them; seconds taken."""
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    table.mkdir(parents=True)
    write_meta(table, spark)
    staging = table / "_generate"
    ids = [f"20260101T000000000Z-bench-{i:07d}" for i in range(batches)]
    df = spark.range(batches * rows).select(
        F.col("id"), F.concat(F.lit("v"), F.col("id").cast("string")).alias("v"),
        F.current_timestamp().alias(L.WRITTEN_AT_COLUMN), F.lit(1).cast("int").alias(L.TASK_COLUMN),
        F.format_string("20260101T000000000Z-bench-%07d", (F.col("id") / rows).cast("long")).alias(L.BATCH_COLUMN))
    df.repartition(F.col(L.BATCH_COLUMN)).write.partitionBy(L.BATCH_COLUMN).parquet(L.spark_uri(staging))
    G.log_dir(table).mkdir()
    G.commit(table, "create")
    for i, batch_id in enumerate(ids):
        name = L.batch_dir_name(batch_id)
        os.rename(staging / name, table / name)
        files = data_files(table / name)
        (table / name / MANIFEST).write_text(json.dumps({"rows": rows, "files": files}))
        # What G.commit writes, without listing the log for each of N commits (the sink lists
        # a log that its checkpoints and the retention keep short).
        version = i + 1
        doc = {"log": G.LOG_VERSION, "op": "append", "time": time.time(), "remove": [],
               "add": [G.Entry(name, "batch", {batch_id: rows}, files).to_json()]}
        (G.log_dir(table) / G.commit_name(version)).write_text(json.dumps(doc))
        if version % G.CHECKPOINT_EVERY == 0 and version > batches - 10 * G.CHECKPOINT_EVERY:
            G.write_checkpoint(table, G.read_snapshot(table))
    shutil.rmtree(staging)
    G.write_checkpoint(table, G.read_snapshot(table))
    return time.monotonic() - t0


def timed_reads(spark, table: Path, reads: int) -> tuple[float, int]:
    from executor.sinks.spark import read_table

    secs, count = [], 0
    for _ in range(reads):
        t0 = time.monotonic()
        count = read_table(table, spark=spark, dedupe=False).count()
        secs.append(time.monotonic() - t0)
    return statistics.median(secs), count


def timed_show(table: Path) -> float:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "daemons.cli", "sink", "show", str(table), "--limit", "0"],
                         cwd=REPO, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"sink show failed: {out.stderr[-2000:]}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=1, help="rows per batch")
    ap.add_argument("--reads", type=int, default=3, help="reads per measurement (median)")
    ap.add_argument("--many-reads", type=int, default=1, help="reads of the uncompacted table (slow)")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="storm-py-bench-table-"))
    common = {"bench": "sink_table", "batches": args.batches, "rows_per_batch": args.rows,
              "python": platform.python_version(), "cpus": os.cpu_count()}
    from executor.sinks.spark import compact_table, table_stats

    spark = spark_session()
    try:
        many = base / "many"
        emit({**common, "phase": "generate", "secs": round(generate(spark, many, args.batches, args.rows), 2)})
        stats = table_stats(many)
        read_many, count = timed_reads(spark, many, args.many_reads)
        emit({**common, "phase": "read_many", "secs": round(read_many, 3), "rows": count, "files": stats["files"]})
        show_many = timed_show(many)
        emit({**common, "phase": "show_many", "secs": round(show_many, 2)})
        t0 = time.monotonic()
        runs = compact_table(many, spark=spark)
        compact_secs = time.monotonic() - t0
        stats = table_stats(many)
        emit({**common, "phase": "compact", "secs": round(compact_secs, 2),
              "runs": sum(r.status == "compacted" for r in runs), "files": stats["files"]})
        read_compacted, count2 = timed_reads(spark, many, args.reads)
        assert count2 == count, (count, count2)
        emit({**common, "phase": "read_compacted", "secs": round(read_compacted, 3), "rows": count2,
              "files": stats["files"]})
        show_compacted = timed_show(many)
        emit({**common, "phase": "show_compacted", "secs": round(show_compacted, 2)})
        fresh = base / "fresh"
        generate(spark, fresh, 1, args.batches * args.rows)
        read_fresh, count3 = timed_reads(spark, fresh, args.reads)
        assert count3 == count, (count, count3)
        emit({**common, "phase": "read_fresh", "secs": round(read_fresh, 3), "rows": count3})
        show_fresh = timed_show(fresh)
        emit({**common, "phase": "show_fresh", "secs": round(show_fresh, 2)})
        emit({**common, "phase": "summary", "read_many_over_fresh": round(read_many / read_fresh, 2),
              "read_compacted_over_fresh": round(read_compacted / read_fresh, 2),
              "show_many_over_fresh": round(show_many / show_fresh, 2),
              "show_compacted_over_fresh": round(show_compacted / show_fresh, 2),
              "target": "read_compacted_over_fresh <= 2"})
    finally:
        spark.stop()
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
