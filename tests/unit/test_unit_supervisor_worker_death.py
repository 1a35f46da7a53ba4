"""Why a worker died (daemons/supervisor/worker_death.py, pure): the bounded log tail, the error
line, exit code versus signal, the deaths a supervisor keeps; and the launcher's side (the log
read from its end, the exit status it reaped, both launchers having the supervisor's methods)."""

from __future__ import annotations

import sys
import time

import pytest
from testutil import wait_until

from cluster_state import local_layout
from cluster_state.records import LocalAssignment, SupervisorInfo, WorkerDeath
from daemons.supervisor.launcher import ProcessLauncher, log_size, read_log_tail
from daemons.supervisor.worker_death import (
    MAX_DEATHS,
    MAX_TAIL_CHARS,
    MAX_TAIL_LINES,
    TAIL_READ_BYTES,
    death_from,
    error_line,
    keep_deaths,
    tail_lines,
)
from daemons.supervisor.worker_state import WorkerRecord

TRACEBACK = """\
2024-05-01 10:00:00,000 INFO executor.worker_process [MainThread] worker w1 running executors [[1, 1]]
2024-05-01 10:00:01,000 ERROR executor.bolt [executor] bolt pass[2] failed in prepare
Traceback (most recent call last):
  File "/x/bolt.py", line 10, in prepare
    raise ValueError("bad config")
ValueError: bad config

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/worker.py", line 3, in run
executor.errors.ComponentError: pass[2] died in prepare: bad config
2024-05-01 10:00:01,500 ERROR executor.lifecycle [MainThread] worker: fatal: executor pass[2] died
error: worker w1 of t-1 on port 6700: executor pass[2] died (log: /x/worker.log)
"""


# --- tail_lines --------------------------------------------------------------------------------

def test_tail_keeps_the_last_lines_without_the_final_newline():
    assert tail_lines(b"a\nb\nc\n", 2, 100) == "b\nc"
    assert tail_lines("a\r\nb\r\n\n\n", 5, 100) == "a\nb"  # CRLF and trailing blank lines
    assert tail_lines(b"", 5, 100) == "" and tail_lines("\n\n", 5, 100) == ""
    assert tail_lines("x\ny", 0, 100) == "" and tail_lines("x\ny", 5, 0) == ""


def test_tail_of_a_megabyte_is_cut_to_the_limits_at_a_line_start():
    lines = [f"line {i:07d} " + "x" * (i % 300) for i in range(20000)]
    data = ("\n".join(lines) + "\n").encode()
    assert len(data) > 1_000_000
    tail = tail_lines(data)
    assert len(tail) <= MAX_TAIL_CHARS and len(tail.split("\n")) <= MAX_TAIL_LINES
    assert tail.split("\n")[-1] == lines[-1]
    assert all(line in lines for line in tail.split("\n"))  # whole lines only
    assert lines[-1] in tail and len(tail) > MAX_TAIL_CHARS // 2
    short = tail_lines("\n".join(f"l{i}" for i in range(1000)))
    assert short.split("\n") == [f"l{i}" for i in range(1000 - MAX_TAIL_LINES, 1000)]


def test_tail_characters_bound_drops_whole_lines():
    assert tail_lines("aaaa\nbbbb\ncccc", 10, 9) == "bbbb\ncccc"
    assert tail_lines("aaaa\nbbbb\ncccc", 10, 8) == "cccc"


def test_one_line_longer_than_the_limit_keeps_its_beginning():
    tail = tail_lines("ok\n" + "ValueError: " + "v" * 10000 + "\n", 40, 100)
    assert len(tail) == 100 and tail.startswith("ValueError: vvv") and tail.endswith("…")


def test_tail_decodes_with_replacement_and_drops_a_partial_first_line():
    data = "é".encode()[1:] + "rest of a line\nwhole line é\nlast\n".encode()
    assert tail_lines(data, starts_mid_line=True) == "whole line é\nlast"
    assert tail_lines(data).startswith("\ufffdrest of a line")
    assert tail_lines(b"no newline at all", starts_mid_line=True) == "no newline at all"
    assert tail_lines(b"\xff\xfe bad\n") == "\ufffd\ufffd bad"


# --- error_line ----------------------------------------------------------------------------------

def test_error_line_picks_the_last_exception_line():
    assert error_line(TRACEBACK) == "executor.errors.ComponentError: pass[2] died in prepare: bad config"
    assert error_line("Traceback (most recent call last):\n  ...\nValueError: bad\n") == "ValueError: bad"
    assert error_line("x\nKeyboardInterrupt\n") == "KeyboardInterrupt"
    assert error_line("json.decoder.JSONDecodeError: Expecting value: line 1\n") == \
        "json.decoder.JSONDecodeError: Expecting value: line 1"
    assert error_line("zmq.error.ZMQError: Address already in use\nbye") == "zmq.error.ZMQError: Address already in use"


def test_error_line_falls_back_to_the_last_error_level_line():
    log = ("2024 INFO a [t] starting\n2024 ERROR a [t] first problem\n2024 CRITICAL b [t] worse problem\n"
           "2024 INFO a [t] ErrorCount: 3 ERRORS fine\n")
    assert error_line(log) == "2024 CRITICAL b [t] worse problem"
    # Neither an exception line nor an error level: nothing.
    assert error_line("2024 INFO a [t] all good\nNote: fine\n  ValueError: indented is not a traceback end\n"
                      "error: lowercase is not an exception\n") == ""
    assert error_line("") == ""


# --- death_from ------------------------------------------------------------------------------------

def test_exit_code_versus_signal():
    exited = death_from("t-1", 6700, 100, "worker w on port 6700 exited", 3, TRACEBACK)
    assert (exited.exit_code, exited.signal) == (3, None)
    assert exited.error_line.startswith("executor.errors.ComponentError") and exited.log_tail == TRACEBACK
    killed = death_from("t-1", 6700, 100, "exited", -9, "")
    assert (killed.exit_code, killed.signal, killed.error_line) == (None, "SIGKILL", "")
    assert death_from("t-1", 6700, 100, "exited", -15, "").signal == "SIGTERM"
    assert death_from("t-1", 6700, 100, "exited", -200, "").signal == "signal 200"
    unknown = death_from("t-1", 6700, 100, "timed out: last heartbeat 40s ago", None, "")
    assert (unknown.exit_code, unknown.signal) == (None, None)
    assert death_from("t-1", 6700, 100, "exited", 0, "").exit_code == 0


def test_worker_death_record_validates_its_fields():
    with pytest.raises(TypeError):
        WorkerDeath("t-1", "6700", 1, "r")
    with pytest.raises(TypeError):
        WorkerDeath("t-1", 6700, 1, "r", exit_code=True)
    with pytest.raises(TypeError):
        WorkerDeath("t-1", 6700, 1, "r", signal=9)
    with pytest.raises(TypeError):
        WorkerDeath("t-1", 6700, 1, "r", log_tail=None)
    with pytest.raises(TypeError):
        SupervisorInfo(1, "h", "s", [], [], None, 0, worker_deaths=[("t-1", 6700)])
    with pytest.raises(TypeError):
        SupervisorInfo(1, "h", "s", [], [], None, 0, worker_deaths="t-1")
    death = WorkerDeath("t-1", 6700, 1, "r")
    assert SupervisorInfo(1, "h", "s", [], [], None, 0, worker_deaths=[death]).worker_deaths == (death,)


# --- keep_deaths ----------------------------------------------------------------------------------

def _death(storm_id, port, t):
    return WorkerDeath(storm_id, port, t, f"worker on port {port} exited at {t}")


def test_keep_deaths_latest_per_slot_newest_first():
    deaths = keep_deaths((), _death("a-1", 6700, 10), in_use=())
    deaths = keep_deaths(deaths, _death("a-1", 6701, 11), in_use={"a-1"})
    deaths = keep_deaths(deaths, _death("a-1", 6700, 12), in_use={"a-1"})
    assert [(d.port, d.time_secs) for d in deaths] == [(6700, 12), (6701, 11)]
    # Same second: the new one wins its slot and comes first.
    same = keep_deaths(deaths, _death("a-1", 6701, 12), in_use={"a-1"})
    assert [(d.port, d.time_secs) for d in same] == [(6701, 12), (6700, 12)]


def test_keep_deaths_forgets_topologies_no_longer_in_use():
    deaths = keep_deaths((), _death("a-1", 6700, 10), in_use={"a-1"})
    deaths = keep_deaths(deaths, _death("b-2", 6701, 11), in_use={"a-1"})
    assert {d.storm_id for d in deaths} == {"a-1", "b-2"}
    assert [d.storm_id for d in keep_deaths(deaths, None, in_use={"b-2"})] == ["b-2"]
    assert keep_deaths(deaths, None, in_use=()) == ()


def test_keep_deaths_is_bounded_to_the_newest():
    deaths: tuple = ()
    for i in range(3 * MAX_DEATHS):
        deaths = keep_deaths(deaths, _death("a-1", 7000 + i, i), in_use={"a-1"})
    assert len(deaths) == MAX_DEATHS
    assert [d.time_secs for d in deaths] == list(range(3 * MAX_DEATHS - 1, 2 * MAX_DEATHS - 1, -1))
    assert len(keep_deaths(deaths, None, {"a-1"}, limit=3)) == 3


# --- the launcher's side ---------------------------------------------------------------------------

def test_read_log_tail_reads_from_the_end_and_from_the_workers_start(tmp_path):
    path = tmp_path / "worker.log"
    assert read_log_tail(path, 100) == (b"", False) and log_size(path) == 0
    path.write_bytes(b"old run\nValueError: old\n")
    start = log_size(path)
    with open(path, "ab") as f:
        f.write(b"new run\n" + b"x" * 50 + b"\nlast\n")
    data, mid = read_log_tail(path, TAIL_READ_BYTES, start)
    assert (data, mid) == (b"new run\n" + b"x" * 50 + b"\nlast\n", False)  # nothing of the old run
    data, mid = read_log_tail(path, 20, start)
    assert mid and data.endswith(b"\nlast\n") and len(data) == 20
    assert tail_lines(data, starts_mid_line=mid) == "last"
    data, mid = read_log_tail(path, 1000, start=10**6)  # rotated since: the whole (new) file
    assert data == path.read_bytes() and not mid


def _exits_3(storm_id, supervisor_id, port, worker_id, conf_file):
    return [sys.executable, "-c", "import sys; print('ValueError: printed by the worker'); sys.exit(3)"]


@pytest.mark.cluster  # starts a process
def test_process_launcher_remembers_the_reaped_exit_status_until_forget(tmp_path):
    conf = {"storm.local.dir": str(tmp_path)}
    pl = ProcessLauncher(conf, _exits_3)
    la = LocalAssignment("t-1", [(1, 1)])
    pid, start = pl.launch("sup", "w1", 6700, la)
    record = WorkerRecord("w1", 6700, la, time.time()).with_pid(pid, start)
    assert pl.exit_status("w1") is None
    wait_until(lambda: not pl.alive(record), 30, "the worker to exit")  # alive() reaps it
    assert pl.exit_status("w1") == 3
    data, mid = read_log_tail(local_layout.worker_log(conf, "t-1", 6700), TAIL_READ_BYTES)
    tail = tail_lines(data, starts_mid_line=mid)
    assert error_line(tail) == "ValueError: printed by the worker"
    pl.forget("w1")
    assert pl.exit_status("w1") is None
