"""Damaged sink tables for tests: a small known table and ways to break it as disks and people do.

Tables are written uncompressed so that a test can change one stored value in place (a snappy
page would mostly fail to decompress instead, hiding the silent-corruption case).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks._integrity import MANIFEST

# Shaped like the word-count example's table, so that top_words.py can read it too.
COLUMNS = ["run", "word", "count"]
SCHEMA = "run STRING, word STRING, count BIGINT"
BATCHES = [[["r1", f"VALUE-{i:05d}", i] for i in range(0, 60)], [["r1", f"VALUE-{i:05d}", i] for i in range(60, 100)]]
ROWS = sorted(tuple(r) for b in BATCHES for r in b)


def quiet_session(warehouse: Path):
    """A local SparkSession for tests (or the one this process has); (session, created)."""
    from pyspark.sql import SparkSession

    from executor.sinks._session import _existing_session

    found = _existing_session()
    if found is not None:
        return found, False
    session = (SparkSession.builder.master("local[1]").appName("storm-py-bad-sink-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.log.level", "FATAL")
               .config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate())
    return session, True


def write_table(spark, path: Path) -> Path:
    """Write BATCHES as two committed batches of one uncompressed Parquet table at `path`."""
    from executor.sinks._session import SparkSessionHolder
    from executor.sinks._writer import TableWriter

    holder = SparkSessionHolder()
    holder.use(spark)
    codec = spark.conf.get("spark.sql.parquet.compression.codec")
    spark.conf.set("spark.sql.parquet.compression.codec", "none")
    tw = TableWriter(path, COLUMNS, "parquet", [], None, SCHEMA, 3, {}, holder)
    try:
        tw.prepare()
        for rows in BATCHES:
            tw.write([list(r) for r in rows])
    finally:
        tw.close()
        spark.conf.set("spark.sql.parquet.compression.codec", codec)
    return path


def copy_table(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def batch_dirs(table: Path) -> list[Path]:
    return [table / L.batch_dir_name(b) for b in L.committed_batches(table)]


def part_file(table: Path, batch: int = 0) -> Path:
    """The data file of a committed batch."""
    (part,) = [p for p in batch_dirs(table)[batch].iterdir() if p.name.startswith("part-")]
    return part


def crc_file(part: Path) -> Path:
    return part.with_name(f".{part.name}.crc")


def alter_value(part: Path, old: bytes, new: bytes) -> None:
    """Change a stored value in place (same length), as a bit flip in a data page would."""
    data = part.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1, f"{old!r} not once in {part}"
    part.write_bytes(data.replace(old, new))


def edit_meta(table: Path, change) -> None:
    path = table / L.META_FILE
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def edit_manifest(batch_dir: Path, change) -> None:
    """Change what the sink recorded when it committed the batch (`change` gets {"rows",
    "files"}): its manifest and its entry in the table log, as a damaged record would be."""
    path = batch_dir / MANIFEST
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    for commit in sorted(G.log_dir(batch_dir.parent).glob("*.json")):
        record = json.loads(commit.read_text())
        for entry in record.get("add", []):
            if entry["path"] == batch_dir.name:
                (batch_id,) = entry["batches"]
                entry["batches"][batch_id], entry["files"] = doc["rows"], doc["files"]
                commit.write_text(json.dumps(record))


def is_root() -> bool:
    return os.geteuid() == 0
