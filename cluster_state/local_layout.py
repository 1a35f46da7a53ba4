"""Where daemons keep things on local disk (Storm's layout under `storm.local.dir`), in one place.

    <storm.local.dir>/nimbus/stormdist/{id}/            code Nimbus stores (package + conf)
    <storm.local.dir>/nimbus/inbox/                      uploads in progress
    <storm.local.dir>/supervisor/localstate/             the supervisor's LocalState (id, workers)
    <storm.local.dir>/supervisor/stormdist/{id}/         code a supervisor downloaded
    <storm.local.dir>/supervisor/tmp/{uuid}/             downloads in progress
    <storm.local.dir>/workers/{worker-id}/heartbeats/    a worker's LocalState heartbeat
    <storm.local.dir>/workers/{worker-id}/pids/{pid}     one empty file per process of the worker
    <storm.log.dir>/nimbus.log, supervisor.log           daemon logs (storm.log.dir: <local dir>/logs)
    <storm.log.dir>/workers-artifacts/{id}/{port}/worker.log
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

_UNSAFE = re.compile(r"[/\\\x00]")


def _safe(part: str, what: str) -> str:
    """A path component from an id: refuses separators, NUL and dot-only names (ids reach paths;
    topology names may hold spaces and non-ASCII letters, which paths can take)."""
    if not isinstance(part, str) or not part or _UNSAFE.search(part) or set(part) == {"."}:
        raise ValueError(f"{what} {part!r} cannot be used in a path")
    return part


def hostname(conf: Mapping[str, Any]) -> str:
    """The name this machine's daemons and workers advertise: storm.local.hostname, else the OS's."""
    import socket

    return str(conf.get("storm.local.hostname") or socket.gethostname())


def local_dir(conf: Mapping[str, Any]) -> Path:
    return Path(os.path.abspath(str(conf["storm.local.dir"])))


def log_dir(conf: Mapping[str, Any]) -> Path:
    value = conf.get("storm.log.dir")
    return Path(os.path.abspath(str(value))) if value else local_dir(conf) / "logs"


def nimbus_dir(conf: Mapping[str, Any]) -> Path:
    return local_dir(conf) / "nimbus"


def supervisor_dir(conf: Mapping[str, Any]) -> Path:
    return local_dir(conf) / "supervisor"


def supervisor_localstate(conf: Mapping[str, Any]) -> Path:
    return supervisor_dir(conf) / "localstate"


def supervisor_stormdist(conf: Mapping[str, Any], storm_id: str | None = None) -> Path:
    base = supervisor_dir(conf) / "stormdist"
    return base if storm_id is None else base / _safe(storm_id, "topology id")


def supervisor_tmp(conf: Mapping[str, Any]) -> Path:
    return supervisor_dir(conf) / "tmp"


def worker_root(conf: Mapping[str, Any], worker_id: str | None = None) -> Path:
    base = local_dir(conf) / "workers"
    return base if worker_id is None else base / _safe(worker_id, "worker id")


def worker_heartbeats(conf: Mapping[str, Any], worker_id: str) -> Path:
    return worker_root(conf, worker_id) / "heartbeats"


def worker_pids(conf: Mapping[str, Any], worker_id: str) -> Path:
    return worker_root(conf, worker_id) / "pids"


def worker_log(conf: Mapping[str, Any], storm_id: str, port: int) -> Path:
    return log_dir(conf) / "workers-artifacts" / _safe(storm_id, "topology id") / str(int(port)) / "worker.log"


def daemon_log(conf: Mapping[str, Any], daemon: str) -> Path:
    return log_dir(conf) / f"{_safe(daemon, 'daemon name')}.log"
