"""SparkSinkBolt: stores a stream in a Parquet table through Spark, acking tuples only once the
batch holding them is committed (docs/topology-guide.md, "The Spark sink").

Usage::

    from executor.sinks.spark import SparkSinkBolt, read_table

    builder.set_bolt("store", SparkSinkBolt("/data/counts", dedupe_fields=["word", "count"])) \\
           .shuffle_grouping("count")
    ...
    read_table("/data/counts").groupBy("word").max("count").show()

Semantics:

- The bolt buffers its input tuples and writes them as one batch when `batch_size` tuples are
  buffered or `flush_interval_secs` after the first of them arrived (checked on tick tuples,
  every `tick_secs`). Every tuple of a batch is acked only after the batch is committed; if the
  write raises, every tuple of it is failed (the spouts replay them) and the error reported.
  Writes run on a background thread per sink task; at most `max_pending_batches` batches wait
  for or are in a write, beyond which the bolt stops consuming (back-pressure). Batches that
  wait while a write runs are committed together by the next write.
- Columns: the input stream's declared fields (or `fields`, a subset, in that order), then
  `storm_written_at` (timestamp of the write), `storm_task_id` (the sink task) and
  `storm_batch_id` (one id per commit; ids sort by commit time).
- Crash safety: Spark writes a batch into `<path>/_staging/...`, one rename makes it
  `<path>/storm_batch_id=<id>/`, and one commit of the table log (`_storm_log/`, _log.py) lists
  it: readers read the files of one log snapshot, never part of a batch, and commits or
  compactions during a read change nothing it returns. Staging leftovers of a killed writer are
  removed by the next sink task that opens the table; a batch renamed but never logged, by a
  vacuum after sink.retention.secs.
- Delivery is at-least-once: a tuple whose batch was committed but whose ack was lost (worker
  killed after the commit, ack timed out) is written again when the spout replays it. With
  `dedupe_fields` set, rows agreeing on those fields are one record: `read_table(path)` keeps
  the first committed of them (earliest storm_written_at, then storm_batch_id). The same in
  Spark SQL, on a table read with `read_table(path, dedupe=False)`::

      SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY <dedupe fields>
                     ORDER BY storm_written_at, storm_batch_id) AS rn FROM t) WHERE rn = 1

  Choose fields that identify a record in your data (e.g. a message id, or word and count for
  running counts). Without dedupe_fields, duplicates from replays stay in the table.
- Exactly-once in a topology with `topology.state.exactly.once: true` (executor/checkpoint/):
  rows are written at each checkpoint's PREPARE, kept invisible, and published at its COMMIT,
  once (_prepared.py); the raw table then holds every row exactly once. Rows show a checkpoint
  interval plus a write after they arrive.
- Types: from `schema` (a Spark DDL string such as "word STRING, count BIGINT") or inferred
  from the first batch written to the table, then recorded in `<path>/_storm_sink.json` and
  enforced: a row whose value does not fit its column is not written, its tuple is failed and
  the error reported (Spark would otherwise store it as null).
- Spark: one SparkSession per worker process, created on first use from the topology config
  (`spark.master`, default `local[1]`, and every other `spark.*` key), shared by the sink tasks
  of the worker and stopped when the last of them cleans up. PySpark is imported only here.
- Bad input fails loudly: `prepare` checks the table (path a directory or creatable, metadata
  readable and of a known version, layout and schema those of the sink) and that Spark starts
  (Java 17+ found), and raises SinkTableError, one line naming the table, so the component dies
  at once instead of failing every tuple of the run. While running, a run of failing writes is
  reported once, in one line.
- Damage is an error, never silently wrong rows: Parquet pages carry checksums (written and
  verified), each batch's manifest records its rows and file sizes, and read_table raises
  TableDamagedError naming a missing, emptied or stray part file; verify_table reads every row
  and compares each batch's count with its manifest (`storm-py sink show` does).
- The path is a local directory (or file:// URL, on storage every writer shares). Every commit
  adds one directory holding one file (per partition value); one sink task per table merges
  small ones in the background (_compact.py, keys sink.compaction.*), as `storm-py sink compact`
  does on demand.

Sizing: a Spark write costs ~0.15-0.3 s however small, so a tuple is acked ~0.3-1 s after it
arrives, and a spout with `topology.max.spout.pending` P can complete at most P tuple trees per
that latency: give the spouts enough pending tuples to fill batches (see
examples/word_count). Under load, batches queue while a write runs and are committed
together, so writes grow with the input rate (up to max_pending_batches * batch_size rows,
which also bounds the sink's memory). Rows travel to Spark as one JSON document per write
(see _schema.py); tables with a column type JSON cannot carry (maps with non-string keys,
structs) are written through createDataFrame instead, slower, and there nested values must
have exactly their declared types.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import time
from typing import Any, Callable, Iterable, Mapping

from executor.components import Bolt
from executor.savepoints import SAVEPOINT_FROM_KEY
from executor.sinks import _layout as L
from executor.sinks import _prepared as P
from executor.sinks import _table as T
from executor.sinks._compact import Policy, RunResult, compact
from executor.sinks._integrity import (
    TableDamagedError,
    check_counts,
    check_files,
    describe_read_error,
    summarize_error,
)
from executor.sinks._log import Snapshot
from executor.sinks._read import entries_frame, table_schema
from executor.sinks._session import SparkStartError, sessions, use_session
from executor.sinks._writer import Batch, BatchWriter, TableWriter, WriteResult
from executor.tuple import is_system_id

log = logging.getLogger(__name__)

FORMATS = L.FORMATS
_UNSEEN = object()

__all__ = ["SparkSinkBolt", "SinkWriteError", "SinkTableError", "TableDamagedError", "SparkStartError",
           "read_table", "verify_table", "describe_read_error", "reader_session", "table_dir", "dedupe_frame", "read_meta", "table_stats",
           "table_snapshot", "compact_table", "table_schema", "use_session", "FORMATS"]


class SinkWriteError(RuntimeError):
    """A batch could not be written; its tuples were failed."""


SinkTableError = L.SinkTableError
table_dir = L.table_dir


def _names(value, what: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"SparkSinkBolt {what} takes a list of field names, not the string {value!r}")
    names = list(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"SparkSinkBolt {what} must be a non-empty list of field names, got {value!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"SparkSinkBolt {what} names a field twice: {names}")
    return names


class SparkSinkBolt(Bolt):
    """Writes its input tuples to a Spark table in batches; acks them once committed.

    path                 the table's local directory (created if missing); None when path_key names it
    path_key             a topology config key that, when set, names the table instead of `path`
                         (read at prepare, so `-c KEY=PATH` at submit reaches every worker)
    fields               the input fields to store, in this order (default: all declared fields)
    format               "parquet" (default), "orc" or "json"
    batch_size           buffered tuples that trigger a write
    flush_interval_secs  seconds after the first buffered tuple that trigger a write anyway
    partition_by         fields to partition the table by (Spark's partitionBy)
    dedupe_fields        fields identifying a record; read_table drops replayed duplicates
    schema               Spark DDL of the stored fields, e.g. "word STRING, count BIGINT"
                         (default: inferred from the first batch written to the table)
    max_pending_batches  batches handed to the writer and not yet acked before the bolt blocks
    tick_secs            how often ticks check the flush interval and hand back acks
                         (default: min(0.1, flush_interval_secs))
    """

    def __init__(self, path: str | os.PathLike | None, fields: Iterable[str] | None = None, format: str = "parquet",
                 batch_size: int = 10_000, flush_interval_secs: float = 1.0,
                 partition_by: Iterable[str] | None = None, dedupe_fields: Iterable[str] | None = None,
                 schema: str | None = None, max_pending_batches: int = 4, tick_secs: float | None = None,
                 path_key: str | None = None):
        # Plain data only: the bolt is deep-copied per task; Spark and threads start in prepare().
        if path is None and not path_key:
            raise ValueError("SparkSinkBolt needs a table path, or path_key naming the config key that holds it")
        self.path_key = path_key
        self.path = None if path is None else os.fspath(path)
        if self.path is not None:
            L.table_dir(self.path)  # rejects remote URLs now, not in the worker
        self.fields = _names(fields, "fields")
        if format not in FORMATS:
            raise ValueError(f"SparkSinkBolt format must be one of {FORMATS}, got {format!r}")
        self.format = format
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"SparkSinkBolt batch_size must be a positive int, got {batch_size!r}")
        self.batch_size = batch_size
        if isinstance(flush_interval_secs, bool) or not isinstance(flush_interval_secs, (int, float)) \
                or flush_interval_secs <= 0:
            raise ValueError(f"SparkSinkBolt flush_interval_secs must be > 0, got {flush_interval_secs!r}")
        self.flush_interval_secs = float(flush_interval_secs)
        self.partition_by = _names(partition_by, "partition_by") or []
        self.dedupe_fields = _names(dedupe_fields, "dedupe_fields")
        if schema is not None and (not isinstance(schema, str) or not schema.strip()):
            raise ValueError(f"SparkSinkBolt schema must be a Spark DDL string, got {schema!r}")
        self.schema = schema
        if isinstance(max_pending_batches, bool) or not isinstance(max_pending_batches, int) \
                or max_pending_batches < 1:
            raise ValueError(f"SparkSinkBolt max_pending_batches must be a positive int, got {max_pending_batches!r}")
        self.max_pending_batches = max_pending_batches
        # Ticks drive time-based flushes and hand back acks while no input arrives.
        self.tick_secs = float(tick_secs) if tick_secs else min(0.1, self.flush_interval_secs)
        if self.tick_secs <= 0:
            raise ValueError(f"SparkSinkBolt tick_secs must be > 0, got {tick_secs!r}")
        if self.fields is not None:
            self._check_columns(self.fields)

    def _check_columns(self, columns: list[str]) -> None:
        clash = [c for c in columns if c in L.AUDIT_COLUMNS]
        if clash:
            raise ValueError(f"SparkSinkBolt for {self.path or self.path_key}: fields {clash} clash with the audit columns "
                             f"{list(L.AUDIT_COLUMNS)}; rename them upstream or select others with fields=")
        for what, names in (("partition_by", self.partition_by), ("dedupe_fields", self.dedupe_fields or [])):
            missing = [n for n in names if n not in columns]
            if missing:
                raise ValueError(f"SparkSinkBolt for {self.path or self.path_key}: {what} names {missing}, "
                                 f"which are not among the columns {columns}")

    def get_component_configuration(self) -> dict[str, Any]:
        # Its own thread: execute waits for the writer when max_pending_batches are in flight,
        # which on a worker's shared executor thread would stall every other executor.
        return {"topology.tick.tuple.freq.secs": self.tick_secs, "topology.executor.thread.mode": "dedicated"}

    # ---- lifecycle ----
    def _input_columns(self, context) -> list[str] | None:
        """The declared fields of the input streams, when they all agree."""
        topology = getattr(context, "topology", None)
        spec = topology.components.get(context.this_component_id) if topology is not None else None
        if spec is None or not spec.inputs:
            return None
        # (system streams, such as the checkpoint stream its executor handles, carry no rows)
        declared = {tuple(topology.stream_fields(s.source, s.stream)) for s in spec.inputs if not is_system_id(s.stream)}
        if len(declared) > 1:
            raise ValueError(f"SparkSinkBolt {context.this_component_id!r}: its inputs declare different fields "
                             f"{sorted(declared)}; pass fields=[...] to choose the columns")
        return list(declared.pop())

    def prepare(self, conf, context, collector) -> None:
        if self.path_key and conf.get(self.path_key) not in (None, ""):
            self.path = os.fspath(conf[self.path_key])
            L.table_dir(self.path)
        elif self.path is None:
            raise ValueError(f"SparkSinkBolt {context.this_component_id!r}: no table: set {self.path_key} in the "
                             f"topology config (-c {self.path_key}=PATH)")
        self._collector = collector
        self._task = context.this_task_id
        self._columns = self.fields or self._input_columns(context)
        if self._columns is None:
            raise ValueError(f"SparkSinkBolt {context.this_component_id!r} has no input stream; "
                             f"pass fields=[...]")
        self._check_columns(self._columns)
        self._mapping: dict[tuple[str, str], Any] = {}
        self._rows: list = []
        self._tuples: list = []
        self._first_at = 0.0
        self._in_flight = 0
        # Stats, written by this task's executor thread only.
        self.rows_acked = 0
        self.rows_failed = 0
        self.batches_committed = 0
        self.writes_failed = 0
        self._failing = 0
        self.blocked_secs = 0.0  # time this executor waited for the writer: the sink's back-pressure
        self._table = self._table_writer(conf)
        self._check_table(self._table)
        # Exactly-once topologies: rows are written at each checkpoint's PREPARE and published at
        # its COMMIT (prepare_output below; executor/sinks/_prepared.py), not by size or time.
        self._two_phase = bool(conf.get("topology.state.exactly.once"))
        self._txn_dir = None
        if self._two_phase:
            self._txn_dir = self._claim_prepared(conf, context)
        self._staged: list[tuple[str, Any]] = []  # two-phase: batches staged since the last PREPARE
        self._writer = BatchWriter(f"spark-sink-{context.this_component_id}-{self._task}",
                                   lambda rows: self._commit(self._table, rows), on_stop=self._table.close)
        self._results = self._writer.results
        self._writer.start()

    def _claim_prepared(self, conf, context):
        """This task's directory of prepared txids; the first task of a new instance of the
        topology adopts what earlier ones left (executor/sinks/_prepared.py)."""
        table = L.table_dir(self.path)
        storm_id, topology = str(context.storm_id), str(conf.get("topology.name") or context.storm_id)
        tdir = P.task_dir(table, storm_id, self._task)
        P.claim(tdir, topology, context.this_component_id, storm_id)
        if context.this_task_index == 0:
            start = conf.get(SAVEPOINT_FROM_KEY) or {}
            P.adopt(table, topology, context.this_component_id, storm_id, start.get("txid"), self._table.committed)
        return tdir

    def _check_table(self, table: TableWriter) -> None:
        """Fail prepare (the component dies, loudly) when the table cannot be written or Spark
        cannot start: a run that can store nothing must not run on failing every tuple."""
        try:
            table.prepare()
        except (L.SinkTableError, SparkStartError) as exc:
            table.close()
            table_path = L.table_dir(self.path)
            why = str(exc).removeprefix(f"table {table_path}: ")
            raise SinkTableError(f"Spark sink for table {table_path}: {why}") from None
        except Exception as exc:  # a py4j error, or a bug: still one line, with the trace in the log
            table.close()
            log.debug("Spark sink %s: prepare failed", self.path, exc_info=True)
            raise SinkTableError(f"Spark sink for table {L.table_dir(self.path)}: "
                                 f"{summarize_error(exc)}") from None

    def _table_writer(self, conf) -> TableWriter:
        return TableWriter(L.table_dir(self.path), self._columns, self.format, self.partition_by,
                           self.dedupe_fields, self.schema, self._task, dict(conf), sessions)

    def cleanup(self) -> None:
        writer = getattr(self, "_writer", None)
        if writer is None:
            return
        # Wait for a write in progress (so it leaves no staging behind and the session is not
        # stopped under it); unwritten and unacked tuples are replayed after their timeout.
        writer.stop()

    # ---- hot path ----
    def execute(self, tup) -> None:
        if not self._results.empty():
            self._drain()
        if self._two_phase:
            self._hold(tup)
            return
        if tup.is_tick():
            if self._rows and time.monotonic() - self._first_at >= self.flush_interval_secs:
                self._submit("interval")
            return
        row = self._row(tup)
        if row is None:
            return
        rows = self._rows
        if not rows:
            self._first_at = time.monotonic()
        rows.append(row)
        self._tuples.append(tup)
        if len(rows) >= self.batch_size:
            self._submit("size")

    def _hold(self, tup) -> None:
        """Two-phase: keep the row until the checkpoint; a full batch is staged at once (memory
        stays bounded by batch_size rows), still invisible until the COMMIT."""
        if tup.is_tick():
            return
        row = self._row(tup)
        if row is None:
            return
        self._rows.append(row)
        self._tuples.append(tup)
        if len(self._rows) >= self.batch_size:
            self._stage_held()

    def _row(self, tup):
        """The row a tuple's values make (the sink's columns), or None when its stream lacks one
        (the tuple is failed and the error reported)."""
        key = (tup.source_component, tup.source_stream)
        index = self._mapping.get(key, _UNSEEN)
        if index is _UNSEEN:
            index = self._mapping[key] = self._index_for(tup)
        if index is None:
            return tup.values
        if index is False:
            self._reject(tup, f"stream {key[1]!r} of {key[0]!r} declares {tup.fields.to_list() if tup.fields else []}, "
                              f"which lacks some of the sink's columns {self._columns}")
            return None
        values = tup.values
        return [values[i] for i in index]

    def _stage_held(self) -> None:
        rows, tuples = self._rows, self._tuples
        self._rows, self._tuples = [], []
        batch_id, staged, _manifest, rejected = self._table.stage(rows)
        if batch_id is not None:
            self._staged.append((batch_id, staged))
        self._settle(tuples, rejected)  # a rejected row's fail rolls the topology back (the error says why)

    # ---- exactly-once (executor/checkpoint/api.py, CheckpointedOutput) ----
    def prepare_output(self, txid: int) -> bool:
        """PREPARE: the rows received before the barrier, written and kept under the txid."""
        try:
            if self._rows:
                self._stage_held()
            P.prepare(self._txn_dir, txid, self._staged)
            self._staged = []
            return True
        except Exception as exc:
            self._output_failed("preparing", txid, exc)
            return False

    def commit_output(self, txid: int) -> bool:
        """COMMIT: every prepared txid up to this one made visible, once."""
        table = L.table_dir(self.path)
        try:
            rows = P.publish(table, self._txn_dir, txid, self._table.committed)
        except Exception as exc:
            self._output_failed("publishing", txid, exc)
            return False
        if rows:
            self.batches_committed += 1
        self._failing = 0
        return True

    def rollback_output(self, txid: int) -> None:
        """ROLLBACK: what was received or prepared since the last commit is discarded."""
        self._rows, self._tuples = [], []
        for _batch_id, staged in self._staged:
            shutil.rmtree(staged, ignore_errors=True)
        self._staged = []
        P.discard(self._txn_dir, txid)

    def _output_failed(self, what: str, txid: int, exc: BaseException) -> None:
        self.writes_failed += 1
        self._failing += 1
        log.debug("Spark sink %s: %s txid %d failed", self.path, what, txid, exc_info=exc)
        if self._failing == 1:  # one report per run of failures, as for writes
            self._collector.report_error(SinkWriteError(
                f"Spark sink for table {L.table_dir(self.path)}: {what} checkpoint {txid} failed, the topology "
                f"rolls back to the last one; further failures in a row are not reported: {summarize_error(exc)}"))

    def _index_for(self, tup):
        """None when the tuple's values are the row as they are; else the indexes to pick; False
        when the stream lacks a column."""
        names = tup.fields.to_list() if tup.fields is not None else []
        if names == self._columns:
            return None
        if not all(c in names for c in self._columns):
            return False
        return [names.index(c) for c in self._columns]

    def _reject(self, tup, why: str) -> None:
        self.rows_failed += 1
        self._collector.fail(tup)
        self._collector.report_error(SinkWriteError(f"Spark sink {self.path}: {why}"))

    def _submit(self, reason: str) -> None:
        batch = Batch(self._rows, self._tuples, reason)
        self._rows, self._tuples = [], []
        if self._in_flight >= self.max_pending_batches:
            self._wait_for_room()
        self._writer.submit(batch)
        self._in_flight += 1

    def _wait_for_room(self) -> None:
        """Block this executor until the writer finishes a write: the back-pressure that bounds the
        sink's memory. Results are handled meanwhile, as acks must come from this thread."""
        t0 = time.monotonic()
        while self._in_flight >= self.max_pending_batches:
            try:
                res = self._results.get(timeout=1.0)
            except queue.Empty:
                if not self._writer.is_alive():
                    raise SinkWriteError(f"Spark sink {self.path}: the writer thread died") from None
                continue
            self._resolve(res)
        self.blocked_secs += time.monotonic() - t0

    def _drain(self) -> None:
        while True:
            try:
                res = self._results.get_nowait()
            except queue.Empty:
                return
            self._resolve(res)

    def _resolve(self, res: WriteResult) -> None:
        self._in_flight -= res.batches
        collector = self._collector
        if res.error is not None:
            self.writes_failed += 1
            self.rows_failed += len(res.tuples)
            exc = res.error
            for t in res.tuples:
                collector.fail(t)
            # One report (and the whole, often Java, trace in the log at debug) per run of
            # failures: a failing write is retried by every replay, which would flood both.
            self._failing += 1
            if self._failing == 1:
                summary = summarize_error(exc)
                log.debug("Spark sink %s: write failed", self.path, exc_info=exc)
                collector.report_error(SinkWriteError(
                    f"Spark sink for table {L.table_dir(self.path)}: writing {len(res.tuples)} rows failed, "
                    f"their tuples are failed (replayed); further failures in a row are not reported: "
                    f"{summary}"))
            return
        if self._failing:
            log.warning("Spark sink %s: writes succeed again after %d failed in a row", self.path, self._failing)
        self._failing = 0
        if res.batch_id is not None:
            self.batches_committed += 1
        self._settle(res.tuples, res.rejected)

    def _settle(self, tuples: list, rejected: dict[int, str]) -> None:
        """The tuples of a written batch: acked, but those whose rows the table schema rejected,
        which are failed and reported (one line)."""
        collector = self._collector
        if not rejected:
            for t in tuples:
                collector.ack(t)
            self.rows_acked += len(tuples)
            return
        for i, t in enumerate(tuples):
            if i in rejected:
                collector.fail(t)
            else:
                collector.ack(t)
        self.rows_failed += len(rejected)
        self.rows_acked += len(tuples) - len(rejected)
        first = rejected[min(rejected)]
        collector.report_error(SinkWriteError(
            f"Spark sink {self.path}: {len(rejected)} rows do not fit the table schema and were failed; "
            f"first: {first}"))

    def _commit(self, table: TableWriter, rows: list) -> tuple[str | None, dict[int, str]]:
        """Write one batch (on the writer thread). A seam for tests that instrument commits."""
        return table.write(rows)


# ---- reading ----

def reader_session(conf: Mapping[str, Any] | None = None):
    """This process's SparkSession, or a new quiet one from `conf`'s spark.* keys (local, or a
    client of `spark.remote`'s server); the caller may stop it."""
    from executor.sinks._session import _build_session, _existing_session, quiet_reader_settings

    # Quiet: a failed read raises in Python; Spark's own ERROR log would print the trace again.
    return _existing_session() or _build_session(quiet_reader_settings(conf or {}))


def dedupe_frame(df, keys: Iterable[str]):
    """Keep one row per value of `keys`: the first committed (earliest write, then batch id)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(*keys).orderBy(F.col(L.WRITTEN_AT_COLUMN), F.col(L.BATCH_COLUMN))
    return df.withColumn("__storm_rn", F.row_number().over(w)).where(F.col("__storm_rn") == 1).drop("__storm_rn")


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the sink table at `path`; FileNotFoundError when there is none."""
    table = L.table_dir(path)
    meta = L.read_meta(table)
    if meta is None:
        raise FileNotFoundError(f"no storm-py sink table at {table} (no {L.META_FILE}; nothing committed yet?)")
    return meta


def table_snapshot(path: str | os.PathLike) -> Snapshot:
    """The committed state of the table at `path` at this instant: what read_table reads."""
    return T.snapshot(L.table_dir(path))


def read_table(path: str | os.PathLike, dedupe: bool = True, spark=None, snapshot: Snapshot | None = None):
    """The committed rows of the sink table at `path` as a DataFrame: exactly the batches of one
    snapshot (`snapshot`, default the newest), so commits and compactions while it is read
    change nothing it returns.

    With dedupe (the default) and a table written with dedupe_fields, rows repeated by replays
    are dropped, keeping the first committed. `spark` defaults to this process's session (one
    is started with spark.master local[1] if there is none; the caller may stop it). To query it
    in SQL: `read_table(path).createOrReplaceTempView("t")`. (A plain `spark.read.parquet(path)`
    is wrong: it lists every directory, including batches a compaction superseded and not yet
    deleted, and misses compacted files.)

    Damage found without reading the data (a committed part file missing, emptied, resized or
    added) raises TableDamagedError naming the file; a changed byte inside a part file fails
    the query reading it (Parquet page checksums, Hadoop .crc files): describe_read_error
    turns that error into one line naming the file, and verify_table compares the rows of
    every batch with what its commit recorded.
    """
    meta = read_meta(path)
    table = L.table_dir(path)
    snap = snapshot if snapshot is not None else T.snapshot(table)
    check_files(table, snap.entries.values())
    spark = spark or reader_session()
    df = entries_frame(spark, table, meta, snap.entries.values())
    keys = meta.get("dedupe_fields")
    if dedupe and keys:
        df = dedupe_frame(df, keys)
    return df


def verify_table(path: str | os.PathLike, spark=None, snapshot: Snapshot | None = None) -> int:
    """Read every row of the table at `path` once (one snapshot) and check each batch's row
    count against its commit record; return the number of rows. Raises TableDamagedError naming
    the damaged batch or file (Spark's errors are turned into one line)."""
    from pyspark.sql import functions as F

    table = L.table_dir(path)
    snap = snapshot if snapshot is not None else T.snapshot(table)
    df = read_table(path, dedupe=False, spark=spark, snapshot=snap)
    # A hash of every column makes Spark read (and checksum) every page; a bare count would
    # read only the footers and the batch directory names.
    # (as strings: hash rejects map columns)
    every = F.max(F.hash(*[F.col(c).cast("string") for c in df.columns if c != L.BATCH_COLUMN]))
    try:
        counts = {r[0]: r[1] for r in df.groupBy(L.BATCH_COLUMN).agg(F.count(F.lit(1)), every).collect()}
    except Exception as exc:  # py4j and PySpark errors share no base class
        raise TableDamagedError(describe_read_error(exc, table)) from None
    check_counts(table, counts, snap.entries.values())
    return sum(counts.values())


def table_stats(path: str | os.PathLike, snapshot: Snapshot | None = None) -> dict[str, Any]:
    """What is committed and on disk, without Spark: batches, the directories and files a read
    opens, the log version, staging leftovers."""
    table = L.table_dir(path)
    snap = snapshot if snapshot is not None else T.snapshot(table)
    staging = table / L.STAGING_DIR
    try:
        staged = sorted(os.listdir(staging))
    except FileNotFoundError:
        staged = []
    return {"batches": sorted(snap.batch_rows), "version": snap.version,
            "batch_dirs": len(snap.by_kind("batch")), "compacted_dirs": len(snap.by_kind("compacted")),
            "files": sum(len(e.files) for e in snap.entries.values()), "staging": staged}


def compact_table(path: str | os.PathLike, spark=None, conf: dict[str, Any] | None = None,
                  on_run: Callable[[int, RunResult], None] | None = None) -> list[RunResult]:
    """Compact the table at `path` now (storm-py sink compact): merge its small entries (any two
    or more: sink.compaction.min.batches is the background compaction's trigger) until nothing
    is left to merge, then delete what no snapshot can need (after sink.retention.secs).
    `on_run(n, result)` is told of each run as it ends (a progress line)."""
    meta = read_meta(path)
    spark = spark or reader_session()
    return compact(spark, L.table_dir(path), meta, Policy.from_conf(conf or {}), on_run=on_run)

