"""Which process a pid is: when it started, on a clock that setting the system clock does not move.

A pid can be reused, so whoever keeps one (the supervisor for its workers, a test for the
processes it found) keeps its start too, and takes the pid for the same process only if the
start matches. psutil's `create_time()` is the wrong mark for that: it is the process's start
in clock ticks since boot plus the boot time, and the boot time it reads (`btime` in
/proc/stat) is the wall clock minus the uptime, so it moves by however far the clock is
stepped (NTP correcting a VM's clock, a resumed VM, `date -s`). Two looks at one process then
disagree: the supervisor took its running workers for reused pids, and the test suite killed
its own Spark JVM as a leaked process (tests/DURATIONS.md, r22). The ticks since boot never
move; the boot's id tells them from the same ticks in another boot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import psutil

_PROC = "/proc"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcessStart:
    """A process's start: `boot` names the boot ("" where the kernel has no boot id, with
    `secs` then psutil's wall-clock create time) and `secs` is seconds since that boot."""

    boot: str
    secs: float

    def to_text(self) -> str:
        return f"{self.boot}@{self.secs!r}"

    @classmethod
    def from_text(cls, text: str) -> ProcessStart:
        """Raises ValueError when `text` is not what to_text() writes."""
        boot, sep, secs = text.rpartition("@")
        if not sep:
            raise ValueError(f"not a process start: {text!r}")
        return cls(boot, float(secs))


def same_process(recorded: ProcessStart, now: ProcessStart) -> bool:
    """Whether two looks at a pid saw one process. Exact on the boot clock; with no boot id
    (not Linux) psutil's create times are compared within a second, the best it offers."""
    if recorded.boot != now.boot:
        return False
    return recorded.secs == now.secs if recorded.boot else abs(recorded.secs - now.secs) <= 1.0


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        with open(f"{_PROC}/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _ticks_since_boot(pid: int) -> int:
    """Field 22 of /proc/PID/stat. The command name (field 2) may hold spaces and parentheses,
    so the fields are counted from its closing parenthesis."""
    with open(f"{_PROC}/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def process_start(pid: int) -> ProcessStart | None:
    """When `pid` started, or None when there is no such process. May raise psutil.AccessDenied
    (not on Linux, where /proc/PID/stat is readable by all)."""
    boot = _boot_id()
    if boot:
        try:
            return ProcessStart(boot, _ticks_since_boot(pid) / _TICKS)
        except (FileNotFoundError, ProcessLookupError):
            return None
        except (OSError, ValueError, IndexError):
            pass  # an unexpected /proc: psutil's way below
    try:
        return ProcessStart("", psutil.Process(pid).create_time())
    except psutil.NoSuchProcess:
        return None
