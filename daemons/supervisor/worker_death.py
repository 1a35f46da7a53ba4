"""Why a worker died, as the supervisor publishes it (pure): the tail of its log, the most telling
line of that tail, its exit status, and which deaths a supervisor keeps (SupervisorInfo.worker_deaths).

The daemon gathers the facts when the slot reports a worker's failure (slot.ReportError with
death=True): the exit status its launcher reaped, the end of workers-artifacts/{id}/{port}/worker.log
read at that moment (a relaunched worker appends to the same file); everything else is here.
"""

from __future__ import annotations

import re
import signal
from typing import Iterable

from cluster_state.records import WorkerDeath

MAX_TAIL_LINES = 40
MAX_TAIL_CHARS = 6000
# How many bytes of the log's end hold MAX_TAIL_CHARS characters, whatever their UTF-8 width
# (4 bytes at most each), plus the newline before them.
TAIL_READ_BYTES = 4 * (MAX_TAIL_CHARS + 1)
MAX_DEATHS = 16  # per supervisor: SupervisorInfo lives in one ZooKeeper node

# The last line of a Python traceback: `SomeError: message`, `some.module.SomeError: message`,
# a bare `SomeError`, or `KeyboardInterrupt` (unindented; the name ends like an exception's).
_EXCEPTION_LINE = re.compile(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault|Warning)"
    r"|StopIteration|StopAsyncIteration)(?::(?:\s.*)?)?")
_ERROR_LEVEL = re.compile(r"\b(?:ERROR|CRITICAL)\b")


def tail_lines(data: bytes | str, max_lines: int = MAX_TAIL_LINES, max_chars: int = MAX_TAIL_CHARS, *,
               starts_mid_line: bool = False) -> str:
    """The last lines of `data` (bytes decoded as UTF-8, undecodable bytes replaced): at most
    `max_lines` lines and `max_chars` characters, cut at a line start, without the final newline.
    With starts_mid_line (`data` is the end of a longer file, read from an arbitrary byte) the
    partial first line is left out. A last line longer than max_chars on its own is the one case
    not cut at a line start: its beginning is kept, ending in "…"."""
    if max_lines <= 0 or max_chars <= 0:
        return ""
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", errors="replace")
    if starts_mid_line and "\n" in text:
        text = text[text.index("\n") + 1:]
    lines = [line.rstrip("\r") for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    lines = lines[-max_lines:]
    size = sum(len(line) for line in lines) + max(0, len(lines) - 1)
    start = 0
    while start < len(lines) - 1 and size > max_chars:
        size -= len(lines[start]) + 1
        start += 1
    lines = lines[start:]
    if lines and size > max_chars:  # one line alone is too long
        return lines[0][:max_chars - 1] + "…"
    return "\n".join(lines)


def error_line(tail: str) -> str:
    """The most telling line of a log tail: the last Python exception line (`ValueError: ...`,
    `pkg.mod.SomeError: ...`, `KeyboardInterrupt`), else the last line logged at ERROR or
    CRITICAL, else ""."""
    lines = tail.splitlines()
    for line in reversed(lines):
        if _EXCEPTION_LINE.fullmatch(line.rstrip()):
            return line.rstrip()
    for line in reversed(lines):
        if _ERROR_LEVEL.search(line):
            return line.strip()
    return ""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def death_from(storm_id: str, port: int, time_secs: int, reason: str, returncode: int | None,
               tail: str) -> WorkerDeath:
    """The record of one death. `returncode` as Popen reports it (None: unknown or still
    running; negative: killed by that signal): exit_code is the process's own exit status, None
    when a signal ended it (then `signal` names it) or when it is unknown."""
    exit_code, sig = None, None
    if returncode is not None:
        if returncode < 0:
            sig = signal_name(-returncode)
        else:
            exit_code = returncode
    return WorkerDeath(storm_id=storm_id, port=port, time_secs=time_secs, reason=reason, exit_code=exit_code,
                       signal=sig, error_line=error_line(tail), log_tail=tail)


def keep_deaths(deaths: Iterable[WorkerDeath], new: WorkerDeath | None, in_use: Iterable[str],
                limit: int = MAX_DEATHS) -> tuple[WorkerDeath, ...]:
    """The deaths a supervisor publishes after `new` (None: only forget): the latest one per
    (topology, port), topologies no longer in use (and not new's) forgotten, the `limit` newest,
    newest first (slot.count_restart keeps its restart counts the same way)."""
    keep = set(in_use) | ({new.storm_id} if new is not None else set())
    out = [] if new is None else [new]
    seen = {(d.storm_id, d.port) for d in out}
    for death in sorted(deaths, key=lambda d: d.time_secs, reverse=True):
        key = (death.storm_id, death.port)
        if death.storm_id in keep and key not in seen:
            seen.add(key)
            out.append(death)
    out.sort(key=lambda d: d.time_secs, reverse=True)  # stable: `new` first among equal times
    return tuple(out[:max(0, limit)])
