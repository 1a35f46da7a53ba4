"""Old worker logs go (daemons/logviewer/cleanup.py): by age, then by total size, never a running
worker's; one round on real files."""

from __future__ import annotations

import os
from pathlib import Path

from cluster_state.local_state import LS_WORKER_HEARTBEAT, LocalState
from cluster_state.records import WorkerHeartbeat
from daemons.logviewer.cleanup import LogDir, clean, to_delete

DAY = 86400.0
NOW = 100 * DAY


def d(name, port, age_days, size):
    return LogDir(Path(name) / str(port), name, port, NOW - age_days * DAY, size)


def test_old_logs_of_workers_not_running_go_first_then_the_oldest_while_over_size():
    old, old_running = d("a", 6700, 10, 5), d("b", 6700, 10, 5)
    recent1, recent2, recent3 = d("c", 6700, 3, 50), d("c", 6701, 1, 50), d("e", 6700, 0.1, 50)
    dirs = [old, old_running, recent1, recent2, recent3]
    running = {("b", 6700), ("e", 6700)}
    assert to_delete(dirs, running, NOW, 7 * DAY, 10_000) == [old]
    # 155 bytes left, 110 allowed: the oldest idle ones go until it fits; a running worker's never
    assert to_delete(dirs, running, NOW, 7 * DAY, 110) == [old, recent1]
    assert to_delete(dirs, running, NOW, 7 * DAY, 0) == [old, recent1, recent2]


def test_a_round_on_real_files(tmp_path):
    conf = {"storm.local.dir": str(tmp_path / "local"), "storm.log.dir": str(tmp_path / "logs"),
            "logviewer.cleanup.age.mins": 60, "logviewer.max.sum.worker.logs.size.mb": 1}
    logs = tmp_path / "logs"
    now = 1_000_000_000.0
    for storm_id, port, age in (("gone-1-1", 6700, 2 * 3600), ("live-1-1", 6701, 2 * 3600), ("new-1-1", 6702, 60)):
        f = logs / "workers-artifacts" / storm_id / str(port) / "worker.log"
        f.parent.mkdir(parents=True)
        f.write_text("line\n" * 10)
        os.utime(f, (now - age, now - age))
    # a running worker: its local heartbeat under storm.local.dir/workers/{id}/heartbeats
    beats = tmp_path / "local" / "workers" / "w1" / "heartbeats"
    beats.mkdir(parents=True)
    LocalState(beats).put(LS_WORKER_HEARTBEAT, WorkerHeartbeat("live-1-1", ((1, 1),), 6701, int(now), 1))
    deleted = clean(conf, logs, now=now)
    assert deleted == [logs / "workers-artifacts" / "gone-1-1" / "6700"]
    assert not (logs / "workers-artifacts" / "gone-1-1").exists()  # its topology dir too, once empty
    assert (logs / "workers-artifacts" / "live-1-1" / "6701" / "worker.log").is_file()
    assert (logs / "workers-artifacts" / "new-1-1" / "6702" / "worker.log").is_file()
