"""One supervisor per `storm.local.dir`: two started on one directory would share its
LocalState, hence one supervisor id, and fight over its workers. The supervisor holds an
exclusive flock on `<storm.local.dir>/supervisor/supervisor.lock` while it runs (the kernel
drops it when the process dies, so a crash never leaves the directory locked)."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from executor.errors import ClearError

LOCK_NAME = "supervisor.lock"


class LocalDirInUseError(ClearError):
    """Another running supervisor holds this storm.local.dir; the message names both."""


def lock_local_dir(supervisor_dir: Path, local_dir: Path) -> int:
    """Lock the supervisor's dir (creating it) and record our pid; returns the fd to close on
    stop. LocalDirInUseError when another process holds it."""
    supervisor_dir.mkdir(parents=True, exist_ok=True)
    path = supervisor_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise LocalDirInUseError(
                f"storm.local.dir {local_dir} is in use by another supervisor"
                + (f" (pid {holder})" if holder.isdigit() else "")
                + "; give each supervisor its own storm.local.dir") from None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    return fd
