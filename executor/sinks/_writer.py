"""The sink's write path: a background thread per sink task, and the table writer it drives.

A Spark write costs ~0.2 s however small the batch, so it must not run on the bolt's executor
thread: the executor would stop consuming for that long. The bolt hands whole batches to a
BatchWriter thread and keeps buffering; the writer commits them and puts the outcome on a
queue that the bolt drains on its own thread (the output collector is not thread-safe, so acks
and fails are only ever issued there). Batches that queue up while a write runs are committed
together by the next write (group commit), which spreads Spark's fixed cost under load.
"""

from __future__ import annotations

import datetime
import json
import logging
import queue
import shutil
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks import _table as T
from executor.sinks._compact import Compactor, Policy
from executor.sinks._integrity import PARQUET_CHECKSUMS, summarize_error, write_manifest
from executor.sinks._schema import conform, encode_batch, infer_schema, json_columns, json_query

log = logging.getLogger(__name__)


@dataclass
class Batch:
    rows: list
    tuples: list
    reason: str  # "size" or "interval": what triggered it


@dataclass
class WriteResult:
    """The outcome of one write: every tuple of `tuples` is to be acked unless `error` is set
    (then all are failed) or its index is in `rejected` (then it is failed, with that reason)."""

    tuples: list
    batches: int
    batch_id: str | None = None
    rejected: dict[int, str] = field(default_factory=dict)
    error: BaseException | None = None
    seconds: float = 0.0


class BatchWriter:
    """A named thread that commits the batches submitted to it, one write at a time."""

    def __init__(self, name: str, write: Callable[[list], tuple[str | None, dict[int, str]]],
                 on_start: Callable[[], None] = lambda: None, on_stop: Callable[[], None] = lambda: None):
        self.name = name
        self._write = write
        self._on_start = on_start
        self._on_stop = on_stop
        self.results: queue.SimpleQueue[WriteResult] = queue.SimpleQueue()
        self._jobs: deque[Batch] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.write_seconds: deque[float] = deque(maxlen=1000)
        self.busy_secs = 0.0  # total time spent writing (read by benchmarks; written by this thread)
        self.rows_written = 0

    def start(self) -> None:
        with self._cv:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, batch: Batch) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError(f"{self.name} is stopped")
            self._jobs.append(batch)
            self._cv.notify()

    def stop(self, timeout: float = 10.0) -> bool:
        """Let a running write finish, drop batches not yet started (their tuples are replayed
        by the spouts' timeouts), run on_stop; True when the thread ended within timeout."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
            t = self._thread
        if t is None or t is threading.current_thread():
            return True
        t.join(timeout)
        if t.is_alive():
            log.warning("%s: still writing after %.1fs; leaving it to finish on its own", self.name, timeout)
            return False
        return True

    def _run(self) -> None:
        try:
            self._on_start()
        except Exception:
            # Not fatal: the first write retries whatever failed (and fails its batch if it fails again).
            log.warning("%s: warm-up failed", self.name, exc_info=True)
        try:
            while True:
                with self._cv:
                    while not self._jobs and not self._stopping:
                        self._cv.wait()
                    if self._stopping:
                        if self._jobs:
                            log.info("%s: stopping with %d unwritten batches (%d rows); their tuples "
                                     "will be replayed", self.name, len(self._jobs),
                                     sum(len(b.rows) for b in self._jobs))
                            self._jobs.clear()
                        return
                    jobs = list(self._jobs)
                    self._jobs.clear()
                self.results.put(self._write_jobs(jobs))
        finally:
            try:
                self._on_stop()
            except Exception:
                log.exception("%s: shutting down the table writer failed", self.name)

    def _write_jobs(self, jobs: list[Batch]) -> WriteResult:
        if len(jobs) == 1:
            rows, tuples = jobs[0].rows, jobs[0].tuples
        else:
            rows = [r for b in jobs for r in b.rows]
            tuples = [t for b in jobs for t in b.tuples]
        res = WriteResult(tuples, len(jobs))
        t0 = time.monotonic()
        try:
            res.batch_id, res.rejected = self._write(rows)
        except Exception as exc:  # any write failure fails the batch; the spouts replay it
            res.error = exc
        res.seconds = time.monotonic() - t0
        self.write_seconds.append(res.seconds)
        self.busy_secs += res.seconds
        self.rows_written += len(rows)
        return res


class TableWriter:
    """Writes batches of rows into one sink table for one sink task (runs on its BatchWriter)."""

    def __init__(self, table: Path, columns: list[str], format: str, partition_by: list[str],
                 dedupe_fields: list[str] | None, schema_ddl: str | None, task_id: int,
                 conf: dict[str, Any], holder):
        self.table = table
        self.columns = columns
        self.format = format
        self.partition_by = partition_by
        self.dedupe_fields = dedupe_fields
        self.schema_ddl = schema_ddl
        self.task_id = task_id
        self.conf = conf
        self.holder = holder
        self.owner = L.new_owner(task_id)
        self.ids = L.BatchIds(self.owner)
        self.staging = L.Staging(table, self.owner)
        self.schema = None  # the user columns' StructType, fixed by the table metadata
        self._holding = False  # a reference on the holder's session
        self._opened = False
        self._schema_checked = False
        self._json_columns: str | None = None
        self.phase_secs: dict[str, float] = {}  # where write time goes (read by benchmarks)
        self.compactor = Compactor(f"spark-sink-compact-{self.owner}", table, lambda: L.read_meta(table),
                                   self.session, Policy.from_conf(conf))

    # ---- lifecycle ----
    def check(self) -> None:
        """The checks that change nothing on disk: the path, the metadata, the layout."""
        L.check_table_path(self.table)
        meta = L.read_meta(self.table)
        if meta is not None:
            self._adopt(meta)

    def open(self) -> None:
        if self._opened:
            return
        self.check()
        try:
            self.table.mkdir(parents=True, exist_ok=True)
            L.clean_staging(self.table)
            self.staging.open()
        except OSError as exc:
            raise L.SinkTableError(f"table {self.table}: cannot set up its staging directory: {exc}") from None
        try:
            T.ensure_log(self.table)
        except (OSError, G.LogError) as exc:
            raise L.SinkTableError(f"table {self.table}: cannot set up its log {G.log_dir(self.table)}: {exc}") from None
        self._opened = True
        self.compactor.start()

    def session(self):
        if not self._holding:
            spark = self.holder.acquire(self.conf)
            self._holding = True
            return spark
        return self.holder.current()

    def prepare(self) -> None:
        """Check that the table is usable and start Spark, before any tuple is taken: raises
        SinkTableError or SparkStartError (one line) when it is not, so the sink dies at once
        instead of failing every batch of the run. Nothing is created before Spark is up."""
        self.check()
        spark = self.session()
        self.open()
        if self.schema is not None or self.schema_ddl:
            self._ensure_schema(spark, [])  # the declared schema against the table's

    def close(self) -> None:
        self.compactor.stop()  # before the session it uses is released
        self.staging.close()
        if self._holding:
            self._holding = False
            self.holder.release()

    # ---- schema ----
    def _meta(self, schema) -> dict[str, Any]:
        return {"version": L.META_VERSION, "format": self.format, "columns": self.columns,
                "partition_by": self.partition_by, "dedupe_fields": self.dedupe_fields,
                "schema": schema.json(), "created": datetime.datetime.now(datetime.timezone.utc).isoformat()}

    def _adopt(self, meta: dict[str, Any]) -> None:
        from pyspark.sql.types import StructType

        L.check_meta(meta, table=self.table, columns=self.columns, format=self.format,
                     partition_by=self.partition_by, dedupe_fields=self.dedupe_fields)
        try:
            self.schema = StructType.fromJson(json.loads(meta["schema"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise L.SinkTableError(f"table {self.table}: metadata {self.table / L.META_FILE} holds a schema "
                                   f"this code cannot read ({type(exc).__name__}: {exc})") from None

    def _ensure_schema(self, spark, rows: list) -> None:
        if self._schema_checked:
            return
        wanted = None
        if self.schema_ddl:
            try:
                wanted = spark.createDataFrame([], self.schema_ddl).schema
            except Exception as exc:  # PySpark's parse errors share no base class with py4j's
                raise L.SinkTableError(f"schema {self.schema_ddl!r} is not a Spark DDL schema: "
                                       f"{summarize_error(exc)}") from None
            if wanted.fieldNames() != self.columns:
                raise L.SinkTableError(f"schema {self.schema_ddl!r} names columns {wanted.fieldNames()}, "
                                       f"but the sink writes {self.columns}")
        if self.schema is None:
            schema = wanted
            if schema is None:
                schema = infer_schema(self.columns, rows)
                log.info("Spark sink %s: inferred schema %s from the first batch", self.table,
                         schema.simpleString())
            # First writer wins: tasks racing to create the table all adopt the one schema.
            self._adopt(L.create_meta(self.table, self._meta(schema)))
        if wanted is not None and self.schema.simpleString() != wanted.simpleString():
            raise L.SinkTableError(f"sink table {self.table} has schema {self.schema.simpleString()}, "
                                   f"not {wanted.simpleString()}")
        self._json_columns = json_columns(self.schema)
        self._schema_checked = True

    def _phase(self, name: str, start: float, end: float) -> float:
        """Add end - start to the time spent in a phase of writing (for benchmarks); returns end."""
        self.phase_secs[name] = self.phase_secs.get(name, 0.0) + end - start
        return end

    # ---- the write ----
    def stage(self, rows: list) -> tuple[str | None, Path | None, dict[str, Any], dict[int, str]]:
        """Write one batch into this task's staging directory, with its manifest: complete on
        disk, visible to nobody. (batch id, its directory, its manifest, the rows rejected for
        their types); no id when no row fits."""
        clock = time.monotonic
        t0 = clock()
        self.open()
        spark = self.session()
        self._ensure_schema(spark, rows)
        good, rejected = conform(self.schema, rows)
        if not good:
            return None, None, {}, rejected
        batch_id = self.ids.next()
        written_at = datetime.datetime.now(datetime.timezone.utc)
        staged = self.staging.batch_dir(batch_id)
        source = staged.with_name(batch_id + ".json")
        try:
            if self._json_columns is not None:
                source.write_text(encode_batch(good, written_at.isoformat()), encoding="ascii")
            t1 = self._phase("prepare", t0, clock())
            try:
                self._spark_write(spark, good, source, staged, written_at)
            except Exception:
                self.holder.renew(spark)  # a Spark Connect session connects again for the next batch
                raise
            manifest = write_manifest(staged, len(good))
            self._phase("spark_write", t1, clock())
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        finally:
            source.unlink(missing_ok=True)
        return batch_id, staged, manifest, rejected

    def write(self, rows: list) -> tuple[str | None, dict[int, str]]:
        """Stage, then commit, one batch; return its id and the rows rejected for their types."""
        batch_id, staged, manifest, rejected = self.stage(rows)
        if batch_id is None:
            return None, rejected
        t1 = time.monotonic()
        try:
            # Renamed in whole, then listed by one log commit: readers see it from that commit on;
            # killed in between, it is an unlisted directory a vacuum removes.
            final = L.commit_batch(staged, self.table, batch_id)
            version = G.commit(self.table, "append",
                               [G.Entry(final.name, "batch", {batch_id: manifest["rows"]}, manifest["files"])])
            self._phase("commit", t1, time.monotonic())
            self.committed(version)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        return batch_id, rejected

    def committed(self, version: int) -> None:
        """After a commit of the table log: its upkeep (old log files, compaction)."""
        if version % G.CHECKPOINT_EVERY == 0:
            self._clean_log()
        self.compactor.wake()

    def _clean_log(self) -> None:
        """Log files a checkpoint made unnecessary go after the retention period, compaction or
        not (a table written for days keeps a short log)."""
        try:
            G.clean_log(self.table, time.time(), self.compactor.policy.retention_secs)
        except OSError as exc:
            log.warning("Spark sink %s: old log files not removed: %s", self.table, exc)

    def _spark_write(self, spark, rows: list, source: Path, staged: Path, written_at) -> None:
        """Have Spark write `rows` (or the JSON file `source` holding them) into `staged`, as one
        file per batch (per partition value): batches are small and many tiny files are not."""
        uri = L.spark_uri(staged)
        options = L.format_options(self.format)
        task = f"CAST({int(self.task_id)} AS INT) AS {L.TASK_COLUMN}"
        if self._json_columns is not None:
            query = json_query(self._json_columns, L.spark_uri(source),  # (it coalesces)
                               [f"CAST(j.t AS TIMESTAMP) AS {L.WRITTEN_AT_COLUMN}", task])
            df = spark.sql(query)
        else:
            stamp = written_at.strftime("%Y-%m-%d %H:%M:%S.%f")
            df = spark.createDataFrame(rows, self.schema, verifySchema=False).selectExpr(
                "*", f"TIMESTAMP'{stamp}+00:00' AS {L.WRITTEN_AT_COLUMN}", task).coalesce(1)
        writer = df.write.format(self.format).mode("error").options(**options, **PARQUET_CHECKSUMS)
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        writer.save(uri)
