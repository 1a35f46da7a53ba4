"""A worker's local heartbeat, on the disk of the host it runs on (Storm's LocalState
`worker-heartbeat` under `workers/{id}/heartbeats/`): written by the worker every
worker.heartbeat.frequency.secs, read by its supervisor (to keep or kill it) and by the
logviewer (whose logs belong to a running worker)."""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping

from . import local_layout
from .errors import ClusterStateError
from .local_state import LS_WORKER_HEARTBEAT, LocalState
from .records import WorkerHeartbeat

log = logging.getLogger(__name__)


def write_worker_heartbeat(conf: Mapping[str, Any], worker_id: str, heartbeat: WorkerHeartbeat) -> None:
    # Not durable: a heartbeat is worthless after a crash, and must never wait on the disk.
    LocalState(local_layout.worker_heartbeats(conf, worker_id), durable=False).put(LS_WORKER_HEARTBEAT, heartbeat)


def read_worker_heartbeat(conf: Mapping[str, Any], worker_id: str) -> WorkerHeartbeat | None:
    """The worker's local heartbeat (None when it has none, or it cannot be read)."""
    directory = local_layout.worker_heartbeats(conf, worker_id)
    try:
        # create=False: a cleaned-up worker's directory must stay gone, even when its
        # supervisor removes it while this reads.
        value = LocalState(directory, create=False).get(LS_WORKER_HEARTBEAT)
    except ClusterStateError as exc:
        log.warning("cannot read the heartbeat of worker %s: %s", worker_id, exc)
        return None
    if value is not None and not isinstance(value, WorkerHeartbeat):
        log.warning("worker %s: heartbeat is a %s, not a WorkerHeartbeat; ignored", worker_id, type(value).__name__)
        return None
    return value


def worker_dir_ids(conf: Mapping[str, Any]) -> list[str]:
    """The worker ids with a directory under `workers/` on this host."""
    try:
        return sorted(e.name for e in os.scandir(local_layout.worker_root(conf)) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []
