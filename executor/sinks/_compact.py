"""Compaction: many small committed batches merged into larger files, atomically.

One run, under the table's compaction lease (an flock on `_storm_log/compaction.lock`: one
compaction per table at a time, across processes and hosts sharing the storage; the kernel
drops it when its holder dies, so a killed compaction blocks nobody):
1. read a snapshot and `plan` (pure) which small entries to merge, oldest first, up to the
   target size;
2. Spark reads exactly those files and writes them into a private staging directory (the batch
   id becomes a data column, the user's partitioning is kept), checking the row count;
3. rename it to `_storm_compacted/storm_compaction=<id>` (invisible: no commit lists it);
4. one log commit adds it and removes its inputs; if another commit removed an input meanwhile,
   the run gives up and deletes its output.
Killed before 4, the run leaves a staging directory (removed by the next writer, its lock being
dead) or an unlisted directory (removed by a vacuum after the retention period); killed after 4,
it is done. Readers see each row exactly once at every step: they read only what a commit lists.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from cluster_state.config import default_config
from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks import _table as T
from executor.sinks._integrity import PARQUET_CHECKSUMS, data_files
from executor.sinks._read import entries_frame

log = logging.getLogger(__name__)

LEASE_FILE = "compaction.lock"


@dataclass(frozen=True)
class Policy:
    """When and how much to compact (config keys sink.compaction.*, sink.retention.secs)."""
    enabled: bool
    min_entries: int          # compact once this many small entries are committed
    target_bytes: int         # merge up to this much into one output
    max_entries: int          # at most this many inputs per run (bounds one run's time)
    retention_secs: float     # superseded files are deleted this long after

    @staticmethod
    def from_conf(conf: Mapping[str, Any]) -> "Policy":
        """The policy of a config; keys it lacks come from the packaged defaults (defaults.yaml,
        the one place they are set)."""
        c = {**default_config(), **conf}
        return Policy(enabled=bool(c["sink.compaction.enabled"]), min_entries=int(c["sink.compaction.min.batches"]),
                      target_bytes=int(float(c["sink.compaction.target.mb"]) * 2**20),
                      max_entries=int(c["sink.compaction.max.batches"]), retention_secs=float(c["sink.retention.secs"]))


def plan(snapshot: G.Snapshot, policy: Policy, force: bool = False) -> list[G.Entry]:
    """The entries one run merges: small ones (under half the target), oldest first, as many as
    fit the target size and max_entries; none when fewer than min_entries are small (unless
    `force`, then any two or more)."""
    small = sorted((e for e in snapshot.entries.values() if e.size < policy.target_bytes / 2),
                   key=lambda e: (min(e.batches, default=""), e.path))
    if len(small) < (2 if force else max(2, policy.min_entries)):
        return []
    chosen, total = [], 0
    for entry in small:
        if len(chosen) >= policy.max_entries or (chosen and total + entry.size > policy.target_bytes):
            break
        chosen.append(entry)
        total += entry.size
    return chosen if len(chosen) >= 2 else []


class Lease:
    """The table's compaction lease: a non-blocking flock, released on close or death."""

    def __init__(self, table: Path):
        self.path = G.log_dir(table) / LEASE_FILE
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = L.try_lock(self.path, create=True)
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@dataclass
class RunResult:
    status: str                  # "compacted", "nothing", "busy" (another holds the lease), "conflict"
    inputs: int = 0
    rows: int = 0
    version: int | None = None
    deleted: list[str] = dataclasses.field(default_factory=list)


def compact_once(spark, table: Path, meta: dict[str, Any], policy: Policy, force: bool = False,
                 pause: Callable[[str], None] = lambda step: None) -> RunResult:
    """One compaction run (see the module doc); `pause(step)` is called between the steps (the
    tests kill the process there)."""
    with Lease(table) as lease:
        if not lease.acquire():
            return RunResult("busy")
        L.clean_staging(table)  # what a killed writer or compaction left half-written
        T.ensure_log(table)
        result = _merge(spark, table, meta, policy, force, pause)
        result.deleted = T.vacuum(table, policy.retention_secs)
        return result


def _merge(spark, table: Path, meta: dict[str, Any], policy: Policy, force: bool,
           pause: Callable[[str], None]) -> RunResult:
    snap = G.read_snapshot(table, tombstones=False)
    chosen = plan(snap, policy, force)
    if not chosen:
        return RunResult("nothing")
    rows = sum(e.rows for e in chosen)
    compaction_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}"
    staging = L.Staging(table, f"compact-p{os.getpid()}-{secrets.token_hex(3)}")
    staging.open()
    final = table / T.compacted_path(compaction_id)
    try:
        staged = staging.batch_dir(compaction_id)
        df = entries_frame(spark, table, meta, chosen)
        batches = {b: n for e in chosen for b, n in e.batches.items()}
        pause("read")
        writer = df.coalesce(1).write.format(meta["format"]).mode("error") \
            .options(**L.format_options(meta["format"]), **PARQUET_CHECKSUMS)
        if meta.get("partition_by"):
            writer = writer.partitionBy(*meta["partition_by"])
        writer.save(L.spark_uri(staged))
        # The output is checked against the inputs' commit records (reading it is cheap: a few
        # large files, where the inputs were many small ones).
        written = spark.read.format(meta["format"]).options(**L.format_options(meta["format"])) \
            .load(L.spark_uri(staged))
        counted_batches = {r[0]: r[1] for r in written.groupBy(L.BATCH_COLUMN).count().collect()}
        if any(n < 0 for n in batches.values()):
            batches = counted_batches  # batches committed before manifests: counted here, once
            rows = sum(batches.values())
        counted = sum(counted_batches.values())
        if counted_batches != batches:
            raise L.SinkTableError(f"table {table}: compaction wrote {counted} rows from {len(chosen)} entries "
                                   f"whose commits recorded {rows}; nothing was committed; run "
                                   f"storm-py sink show {table} to find the damaged batch")
        pause("written")
        entry = G.Entry(T.compacted_path(compaction_id), "compacted", batches, data_files(staged))
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staged, final)
        pause("renamed")
        wanted = {e.path for e in chosen}

        def inputs_still_there(now: G.Snapshot) -> None:
            gone = wanted - set(now.entries)
            if gone:
                raise G.Conflict(f"{len(gone)} input(s) were removed by another commit")

        try:
            version = G.commit(table, "compact", [entry], sorted(wanted), check=inputs_still_there)
        except G.Conflict as exc:
            log.warning("table %s: compaction %s gave up: %s", table, compaction_id, exc)
            shutil.rmtree(final, ignore_errors=True)
            return RunResult("conflict", len(chosen), counted)
        pause("committed")
        try:  # readers then start from the compacted state, not replay the inputs' entries
            G.write_checkpoint(table, G.read_snapshot(table))
        except (OSError, G.LogError) as exc:
            log.warning("table %s: no checkpoint after compaction %s: %s", table, compaction_id, exc)
        log.info("table %s: compacted %d entries (%d rows) into %s (log version %d)", table, len(chosen), counted,
                 entry.path, version)
        return RunResult("compacted", len(chosen), counted, version)
    finally:
        staging.close()


def compact(spark, table: Path, meta: dict[str, Any], policy: Policy, max_runs: int = 10_000,
            on_run: Callable[[int, RunResult], None] | None = None) -> list[RunResult]:
    """Runs until no two small entries are left (storm-py sink compact): the outputs of the
    first runs, each up to max_entries inputs, are merged by the next ones."""
    results = []
    for n in range(1, max_runs + 1):
        result = compact_once(spark, table, meta, policy, force=True)
        results.append(result)
        if on_run is not None:
            on_run(n, result)
        if result.status != "compacted":
            break
    return results


class Compactor:
    """The sink's background compaction: a thread that, when woken after commits, runs a
    compaction if the policy's trigger is met and the lease is free. It never delays a write:
    Spark runs the two jobs side by side."""

    def __init__(self, name: str, table: Path, meta: Callable[[], dict[str, Any] | None], spark: Callable[[], Any],
                 policy: Policy):
        self.table, self.policy = table, policy
        self._meta, self._spark = meta, spark
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.runs: list[RunResult] = []

    def start(self) -> None:
        if self.policy.enabled:
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 20.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            meta = self._meta()
            if meta is None:
                continue
            try:
                if not plan(G.read_snapshot(self.table, tombstones=False), self.policy):
                    continue
                self.runs.append(compact_once(self._spark(), self.table, meta, self.policy))
            except Exception as exc:  # never the sink's problem: its commits stay readable
                log.warning("table %s: background compaction failed: %s", self.table, exc)
                self._stop.wait(10.0)
