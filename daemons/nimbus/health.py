"""What `storm-py list` and the REST API say about a topology's health (pure).

A topology that can never run (a component raising in `prepare`, a module missing where the
workers run, no supervisor at all) used to show ACTIVE with its assigned workers while they
crash-looped: the cause was only in worker.log. These decide, from what Nimbus reads anyway
(the supervisors' recent worker deaths, the deaths' error lines, the components' reported
errors, the executors' heartbeats), the figures an operator sees first: the workers alive,
the restarts in the last minutes and the newest problem with where it happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cluster_state.records import is_memory_kill
from daemons.answers.cluster import TopologyProblem
from daemons.nimbus.liveness import Seen, is_fresh

# A worker's ImportError for a module the topology imports: installed where it was submitted,
# not in the Python the supervisor runs workers with.
_MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
# The list's last column: the whole line (a runaway message aside), so the cause is never cut.
MAX_ERROR_CHARS = 1000
# executor/errors.py ComponentError's line: the user's own error is the cause, the wrapper where
_COMPONENT_ERROR = re.compile(r"^(?:[\w.]+\.)?ComponentError: component '[^']*' task (?P<task>\d+) "
                              r"raised in (?P<where>[^:]+): (?P<cause>.+)$")


@dataclass(frozen=True)
class Problem:
    """One thing that went wrong: when, where and what (the line an operator acts on)."""

    time_secs: int
    text: str
    component: str | None = None
    host: str | None = None
    port: int | None = None
    # a worker's death that left no error line: only how it ended says anything
    bare: bool = False

    def to_answer(self) -> TopologyProblem:
        """As cluster_info's answer carries it (a topology's `last_error`)."""
        return TopologyProblem(time_secs=self.time_secs, error=self.text, component=self.component,
                               host=self.host, port=self.port)


def explain(error_line: str) -> str:
    """The error line, with what it means when it is a known cause (a module not installed);
    a component's error with the user's own error first (the component is said beside it)."""
    wrapped = _COMPONENT_ERROR.match(error_line.strip())
    if wrapped:
        error_line = f"{wrapped['cause']} (task {wrapped['task']}, in {wrapped['where']})"
    found = _MISSING_MODULE.search(error_line)
    if found:
        return (f"module {found.group(1)!r} is not installed in the workers' Python on this host "
                f"(the topology imports it): {error_line.strip()}")
    return error_line.strip()


# Worker restarts in the list's window (RESTARTS(5m)) from which a topology is said to crash-loop.
CRASH_LOOP_RESTARTS = 3


def death_text(error_line: str, reason: str, exit_code: int | None = None, signal: str | None = None) -> str:
    """What a worker's death says: its error line (explained), else how the process ended (a
    worker that died without a traceback leaves only that) and the slot's reason."""
    if is_memory_kill(reason) or signal == "SIGKILL":
        # Killed from outside (the supervisor for its memory, an operator, the OOM killer): that is
        # the cause, whatever the log ends with (it may be the Spark JVM's errors as that child
        # died after the worker).
        head = reason if is_memory_kill(reason) or signal in reason else f"{signal}: {reason}"
        return head + (f" (its log's last error: {explain(error_line)})" if error_line else "")
    if error_line:
        return explain(error_line)
    if exit_code is not None and "exit code" not in reason:
        return f"exit code {exit_code}: {reason}"
    if signal and signal not in reason:
        return f"{signal}: {reason}"
    return reason


def newest_problem(component_errors: Mapping[str, Iterable[tuple[int, str, str | None, int | None]]],
                   deaths: Iterable[tuple[int, str, str, int | None, str, int | None, str | None]]) -> Problem | None:
    """The newest of the components' reported errors (time, error, host, port) and the
    workers' deaths (time, error line, reason, port, host, exit code, signal); a death's error
    line, or else its reason, says what happened (death_text)."""
    found: list[Problem] = []
    for comp, errors in component_errors.items():
        for time_secs, error, host, port in errors:
            first = error.strip().splitlines()[-1] if error.strip() else error
            found.append(Problem(time_secs, explain(first), comp, host, port))
    for time_secs, error_line, reason, port, host, exit_code, signal in deaths:
        found.append(Problem(time_secs, death_text(error_line, reason, exit_code, signal), None, host, port,
                             bare=not error_line and not is_memory_kill(reason)))
    if not found:
        return None
    return max(found, key=lambda p: (p.time_secs, p.component or ""))


# How far back a crash loop's cause is looked for: the RESTARTS(5m) window.
CRASH_LOOP_WINDOW_SECS = 300


def crash_loop_problem(problem: Problem | None, restarts: int, live_workers: int,
                       cause: Problem | None = None) -> Problem | None:
    """Workers that keep dying without a traceback say so first: prefixed with how often they
    restarted (such a death's line alone reads like a one-off; a traceback says what is wrong by
    itself, and the RESTARTS column says how often), with `cause` (the newest problem that says
    something: an error, a death's error line) when there is one within the loop's window, so
    that the cause stays the headline while the loop lasts instead of alternating with the bare
    deaths between its reports."""
    if problem is None or restarts < CRASH_LOOP_RESTARTS or not problem.bare:
        return problem
    lead = "workers keep dying" if live_workers == 0 else "a worker keeps dying"
    if cause is not None and not cause.bare and problem.time_secs - cause.time_secs <= CRASH_LOOP_WINDOW_SECS:
        return Problem(problem.time_secs, f"{lead} ({restarts} restarts in 5m): {cause.text}", cause.component,
                       cause.host, cause.port)
    return Problem(problem.time_secs, f"{lead} ({restarts} restarts in 5m), {problem.text}", problem.component,
                   problem.host, problem.port, bare=True)


def no_slots_problem(unassigned: int, supervisors: int, zk_root: str, now: int) -> Problem | None:
    """Executors without a slot: say why when no supervisor is registered at all."""
    if unassigned <= 0:
        return None
    if supervisors == 0:
        return Problem(now, f"no supervisor offers slots: none is registered under ZooKeeper root {zk_root!r} "
                            "(a supervisor using another storm.zookeeper.root or ZooKeeper does not count)")
    return Problem(now, f"{unassigned} executor(s) have no slot: the supervisors' slots are all in use")


def short(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """One line, at most `limit` characters (the list's last column)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 3] + "..."


def live_workers(executor_slots: Mapping[Any, tuple[str, int]], seen: Mapping[Any, Seen],
                 last_death: Mapping[tuple[str, int], int], now: float, timeout_secs: float) -> int:
    """Slots whose worker is alive: an executor's heartbeat advanced within the timeout and was
    written after the slot's last worker death (a crash-looping worker heartbeats between its
    deaths). Both times are the worker's host's clock: the heartbeat's own and its supervisor's."""
    live = set()
    for ex, slot in executor_slots.items():
        s = seen.get(ex)
        if is_fresh(s, now, timeout_secs) and s.reported > last_death.get(slot, float("-inf")):
            live.add(slot)
    return len(live)
