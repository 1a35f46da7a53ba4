"""The runners of executor/scheduling.py, driving stand-in executors (step functions) on real
threads: round robin, dead executors dropped, finish on stop, and the hand-over of a shared
thread to an executor whose step blocks."""

from __future__ import annotations

import threading
import time

from testutil import wait_until

from cluster_state.config import default_config
from executor.receive_queue import ReceiveQueue
from executor.scheduling import BUSY, DONE, IDLE, DedicatedRunner, SharedRunner
from executor.wait import BACK_PRESSURE_WAIT, BOLT_WAIT, make_wait_strategy


class StepStub:
    """An executor as a runner sees it: run_step, finish, a queue, wait strategies."""

    def __init__(self, name: str, event: threading.Event | None = None, outcome: int = BUSY):
        self.name = name
        self.queue = ReceiveQueue(10, name, event=event)
        self.idle_wait = make_wait_strategy(default_config(), BOLT_WAIT, self.queue.wait)
        self.bp_wait = make_wait_strategy(default_config(), BACK_PRESSURE_WAIT, time.sleep)
        self.outcome = outcome
        self.steps = 0
        self.threads: set[str] = set()
        self.finished_on: list[str] = []
        self.block = threading.Event()  # set: the next step blocks until release is set
        self.release = threading.Event()

    def run_step(self) -> int:
        self.steps += 1
        self.threads.add(threading.current_thread().name)
        if self.block.is_set():
            self.block.clear()
            self.release.wait(10)
        return self.outcome

    def finish(self) -> None:
        self.finished_on.append(threading.current_thread().name)


def _shared(members, event, stop, blocking_secs=None, spawned=None):
    conf = default_config()
    return SharedRunner("w", members, event, stop, lambda sleeper: make_wait_strategy(conf, BOLT_WAIT, sleeper),
                        make_wait_strategy(conf, BACK_PRESSURE_WAIT, time.sleep), blocking_secs,
                        (spawned if spawned is not None else []).append)


def test_shared_runner_steps_every_member_on_one_thread_and_finishes_them_on_stop():
    event, stop = threading.Event(), threading.Event()
    a, b = StepStub("a", event), StepStub("b", event, outcome=IDLE)
    dead = StepStub("dead", event, outcome=DONE)
    runner = _shared([a, dead, b], event, stop)
    runner.start()
    wait_until(lambda: a.steps > 100 and b.steps > 100, message="both members to be stepped")
    assert dead.steps == 1 and dead.finished_on  # a dead executor is finished at once, never stepped again
    stop.set()
    runner.wake()
    assert runner.join(time.monotonic() + 10) == []
    assert a.threads == b.threads and len(a.threads) == 1
    assert a.finished_on == b.finished_on == list(a.threads)


def test_a_blocking_step_keeps_the_thread_and_the_others_move_to_a_new_one():
    event, stop = threading.Event(), threading.Event()
    slow, other = StepStub("slow", event), StepStub("other", event)
    spawned: list = []
    runner = _shared([slow, other], event, stop, blocking_secs=0.05, spawned=spawned)
    runner.start()
    try:
        wait_until(lambda: other.steps > 10, message="the members to run")
        slow.block.set()
        wait_until(lambda: spawned, message="the watchdog to move the others to a new thread")
        before = other.steps
        wait_until(lambda: other.steps > before + 100, message="the others to run while slow still blocks")
        assert not slow.release.is_set()
        slow.release.set()
        steps = slow.steps
        wait_until(lambda: slow.steps > steps + 10, message="the slow executor to run on its own thread")
        assert len(slow.threads) == 1 and len(other.threads) == 2  # slow kept the original thread
    finally:
        slow.release.set()
        stop.set()
        for r in [runner, *spawned]:
            r.wake()
        deadline = time.monotonic() + 10
        assert [n for r in [runner, *spawned] for n in r.join(deadline)] == []
    assert len(slow.finished_on) == len(other.finished_on) == 1
    assert slow.finished_on[0] in slow.threads and other.finished_on[0] == spawned[0]._thread.name


def test_dedicated_runner_runs_one_executor_and_finishes_it():
    stop = threading.Event()
    ex = StepStub("solo", outcome=IDLE)
    runner = DedicatedRunner(ex, stop)
    runner.start()
    wait_until(lambda: ex.steps > 5, message="the executor to be stepped")
    stop.set()
    runner.wake()
    assert runner.join(time.monotonic() + 10) == []
    assert ex.finished_on == ["executor-solo"]
