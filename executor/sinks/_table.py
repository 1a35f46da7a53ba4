"""A sink table's committed state: its log (executor/sinks/_log.py) over its directories
(executor/sinks/_layout.py). No Spark here.

- `ensure_log`: a table written before the log existed gets one, its batches imported by one
  commit (version 0); a new table starts with an empty version 0.
- `snapshot`: what a reader reads (the log's newest state; for a table without a log, the batch
  directories listed at one instant).
- `vacuum`: deletes what no snapshot can need any more: directories a commit removed more than
  the retention period ago, directories no commit ever added (a writer or a compaction killed
  between its rename and its commit) once older than the retention period, and log files a
  checkpoint made unnecessary.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks._integrity import data_files, read_manifest

log = logging.getLogger(__name__)

COMPACTED_DIR = "_storm_compacted"
COMPACTION_COLUMN = "storm_compaction"


def compacted_path(compaction_id: str) -> str:
    return f"{COMPACTED_DIR}/{COMPACTION_COLUMN}={compaction_id}"


def batch_entry(table: Path, batch_id: str) -> G.Entry:
    """The log entry of a committed batch directory, from its manifest (or, for a batch written
    before manifests, from its files with unknown rows: -1)."""
    path = L.batch_dir_name(batch_id)
    manifest = read_manifest(table / path)
    if manifest is None:
        return G.Entry(path, "batch", {batch_id: -1}, data_files(table / path))
    return G.Entry(path, "batch", {batch_id: int(manifest["rows"])}, dict(manifest["files"]))


def _legacy_snapshot(table: Path) -> G.Snapshot:
    return G.Snapshot(-1, {e.path: e for e in (batch_entry(table, b) for b in L.committed_batches(table))})


def ensure_log(table: Path) -> None:
    """Give the table its log (idempotent; writers racing agree on one version 0)."""
    if G.latest_version(table) >= 0:
        return
    entries = list(_legacy_snapshot(table).entries.values())

    def nobody_first(snap: G.Snapshot) -> None:
        if snap.version >= 0:
            raise G.Conflict("another writer created the log")

    try:
        G.commit(table, "import" if entries else "create", entries, check=nobody_first)
    except G.Conflict:
        return
    if entries:
        log.info("table %s: its %d batches are now in the table log %s", table, len(entries), G.log_dir(table))


def snapshot(table: Path, tombstones: bool = False) -> G.Snapshot:
    """The committed state a reader reads, at one instant (`tombstones`: all of them, for
    vacuum; a reader needs only the entries)."""
    if G.exists(table):
        try:
            snap = G.read_snapshot(table, tombstones=tombstones)
        except G.LogError as exc:
            raise L.SinkTableError(str(exc)) from None
        if snap.version >= 0:
            return snap
    return _legacy_snapshot(table)


def _orphans(table: Path, snap: G.Snapshot) -> list[str]:
    known = set(snap.entries) | set(snap.tombstones)
    found = [L.batch_dir_name(b) for b in L.committed_batches(table)]
    try:
        found += [f"{COMPACTED_DIR}/{n}" for n in os.listdir(table / COMPACTED_DIR)]
    except FileNotFoundError:
        pass
    return [p for p in found if p not in known]


def vacuum(table: Path, retention_secs: float, now: float | None = None) -> list[str]:
    """Delete what no snapshot can need (see the module doc); return the paths deleted."""
    now = time.time() if now is None else now
    snap = snapshot(table, tombstones=True)
    if snap.version < 0:
        return []
    doomed = G.removable(snap, now, retention_secs)
    for path in _orphans(table, snap):
        try:
            if now - (table / path).stat().st_mtime >= retention_secs:
                doomed.append(path)
        except FileNotFoundError:
            pass
    deleted = []
    for path in doomed:
        target = table / path
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
            deleted.append(path)
    removed_logs = G.clean_log(table, now, retention_secs)
    if deleted or removed_logs:
        log.info("table %s: vacuum deleted %d superseded directories and %d log files", table, len(deleted),
                 removed_logs)
    return deleted
