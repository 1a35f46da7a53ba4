"""Old worker logs go (Storm's logviewer cleanup, `LogCleaner.java`): every
`logviewer.cleanup.interval.secs`, the log dirs (`workers-artifacts/{id}/{port}/`) of workers
not running on this host whose newest file is older than `logviewer.cleanup.age.mins` are
deleted, then the oldest others until all worker logs together fit in
`logviewer.max.sum.worker.logs.size.mb`. A running worker's logs are never deleted (each is
bounded by its own size-capped rotation). The decision is pure (`to_delete`)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogDir:
    path: Path
    storm_id: str
    port: int
    newest_mtime: float
    size: int


def to_delete(dirs: Iterable[LogDir], running: set[tuple[str, int]], now: float, max_age_secs: float,
              max_total_bytes: int) -> list[LogDir]:
    """The log dirs to delete: those of workers not running here older than the age limit, then
    the oldest other non-running ones while the total is over the size limit."""
    dirs = list(dirs)
    idle = [d for d in dirs if (d.storm_id, d.port) not in running]
    old = [d for d in idle if now - d.newest_mtime > max_age_secs]
    total = sum(d.size for d in dirs) - sum(d.size for d in old)
    extra = []
    for d in sorted((d for d in idle if d not in old), key=lambda d: (d.newest_mtime, str(d.path))):
        if total <= max_total_bytes:
            break
        extra.append(d)
        total -= d.size
    return old + extra


def scan(log_root: Path) -> list[LogDir]:
    """The worker log dirs under `log_root`/workers-artifacts, with their size and newest mtime."""
    found = []
    artifacts = log_root / "workers-artifacts"
    for topo in _dirs(artifacts):
        for port_dir in _dirs(topo):
            if not port_dir.name.isdigit():
                continue
            size, newest = 0, 0.0
            for root, _subdirs, files in os.walk(port_dir):
                for name in files:
                    try:
                        st = os.lstat(os.path.join(root, name))
                    except OSError:
                        continue
                    size += st.st_size
                    newest = max(newest, st.st_mtime)
            found.append(LogDir(port_dir, topo.name, int(port_dir.name), newest or _mtime(port_dir), size))
    return found


def running_workers(conf: Mapping[str, Any]) -> set[tuple[str, int]]:
    """(topology, port) of the workers with a local heartbeat on this host (a supervisor's)."""
    from cluster_state.worker_beats import read_worker_heartbeat, worker_dir_ids

    running = set()
    for worker_id in worker_dir_ids(conf):
        beat = read_worker_heartbeat(conf, worker_id)
        if beat is not None:
            running.add((beat.storm_id, beat.port))
    return running


def clean(conf: Mapping[str, Any], log_root: Path, now: float | None = None) -> list[Path]:
    """One cleanup round; returns the dirs deleted."""
    now = time.time() if now is None else now
    max_age = float(conf["logviewer.cleanup.age.mins"]) * 60
    max_total = int(float(conf["logviewer.max.sum.worker.logs.size.mb"]) * 1024 * 1024)
    doomed = to_delete(scan(log_root), running_workers(conf), now, max_age, max_total)
    for d in doomed:
        log.info("deleting the logs of worker %s:%s (%d bytes, last written %.0f min ago)", d.storm_id, d.port,
                 d.size, (now - d.newest_mtime) / 60)
        shutil.rmtree(d.path, ignore_errors=True)
        try:
            d.path.parent.rmdir()  # the topology's dir, once its last port is gone
        except OSError:
            pass
    return [d.path for d in doomed]


def _dirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
