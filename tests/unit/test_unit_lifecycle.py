"""executor.lifecycle: Service status and transitions, unwinding, fatal, PeriodicThread, run_service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from testutil import assert_threads_gone, wait_until

from executor.lifecycle import (
    EXIT_FAILED,
    EXIT_OK,
    LifecycleError,
    PeriodicThread,
    Service,
    Status,
    run_service,
)

pytestmark = pytest.mark.timeout(30)
REPO = Path(__file__).resolve().parents[2]


class Recorder(Service):
    """Starts the named resources in order, recording starts and undos; `fail_at` raises there."""

    def __init__(self, resources=("a", "b", "c"), fail_at=None, name="rec"):
        super().__init__(name)
        self.resources = resources
        self.fail_at = fail_at
        self.events: list[str] = []

    def _on_start(self):
        for r in self.resources:
            if r == self.fail_at:
                raise RuntimeError(f"cannot start {r}")
            self.events.append(f"start {r}")
            self.on_stop(lambda r=r: self.events.append(f"stop {r}"), r)


def test_constructor_starts_nothing():
    s = Recorder()
    assert s.status is Status.CREATED and s.events == [] and not s.done


def test_start_and_stop_are_idempotent():
    s = Recorder()
    s.start()
    s.start()
    assert s.status is Status.RUNNING
    assert s.events == ["start a", "start b", "start c"]
    s.stop()
    s.stop()
    assert s.status is Status.STOPPED and s.done and s.failure is None
    assert s.events[3:] == ["stop c", "stop b", "stop a"]
    with pytest.raises(LifecycleError, match="stopped"):
        s.start()


def test_stop_before_start():
    s = Recorder()
    s.stop()
    assert s.status is Status.STOPPED and s.events == []


def test_concurrent_start_and_stop_calls():
    s = Recorder()
    threads = [threading.Thread(target=s.start, name=f"t-start-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.events == ["start a", "start b", "start c"]
    threads = [threading.Thread(target=s.stop, name=f"t-stop-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.events[3:] == ["stop c", "stop b", "stop a"]


def test_failed_start_unwinds_in_reverse_and_reraises():
    s = Recorder(resources=("a", "b", "c", "d"), fail_at="c")
    with pytest.raises(RuntimeError, match="cannot start c"):
        s.start()
    assert s.events == ["start a", "start b", "stop b", "stop a"]
    assert s.status is Status.FAILED and "cannot start c" in s.failure
    with pytest.raises(LifecycleError):
        s.start()


def test_an_undo_that_raises_is_logged_and_the_rest_still_run(caplog):
    s = Recorder()
    s.start()
    s.on_stop(lambda: 1 / 0, "broken")
    s.stop()
    assert s.events[3:] == ["stop c", "stop b", "stop a"]
    assert s.status is Status.STOPPED
    assert any("stopping broken failed" in r.getMessage() for r in caplog.records)


def test_fatal_from_another_thread_stops_and_fails(caplog):
    s = Recorder()
    s.start()
    t = threading.Thread(target=s.fatal, args=("disk on fire", OSError("ENOSPC")), name="t-fatal")
    t.start()
    t.join()
    assert s.wait(5)
    assert s.status is Status.FAILED and s.failure == "disk on fire"
    assert s.events[3:] == ["stop c", "stop b", "stop a"]
    s.fatal("again")  # logged once, no second stop
    assert sum("FATAL" in r.getMessage() for r in caplog.records) == 1
    assert s.failure == "disk on fire"


def test_fatal_during_start_unwinds():
    class Starter(Recorder):
        def _on_start(self):
            super()._on_start()
            self.fatal("background thread died")

    s = Starter()
    with pytest.raises(LifecycleError, match="background thread died"):
        s.start()
    assert s.status is Status.FAILED
    assert s.events == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]


def test_child_fatal_fails_the_parent():
    child = Recorder(name="child")

    class Parent(Recorder):
        def _on_start(self):
            super()._on_start()
            self.start_child(child)

    p = Parent(name="parent")
    p.start()
    child.fatal("lost its socket")
    assert p.wait(5) and p.status is Status.FAILED
    assert "child: lost its socket" in p.failure
    assert child.status is Status.FAILED


def test_when_done_callback():
    s = Recorder()
    seen = []
    s.when_done(lambda svc: seen.append(svc.status))
    s.start()
    s.stop()
    s.when_done(lambda svc: seen.append("late"))
    assert seen == [Status.STOPPED, "late"]


# -- PeriodicThread ------------------------------------------------------------------------------


def test_periodic_thread_runs_until_stopped_and_is_idempotent():
    calls = []
    t = PeriodicThread("t-periodic", 0.01, lambda: calls.append(1))
    t.start()
    t.start()
    wait_until(lambda: len(calls) >= 3, message="three runs")
    t.stop()
    t.stop()
    n = len(calls)
    assert not t.alive and t.runs == n
    assert_threads_gone(("t-periodic",))
    with pytest.raises(LifecycleError):
        t.start()


def test_periodic_thread_wake_runs_now():
    calls = []
    t = PeriodicThread("t-wake", 3600, lambda: calls.append(1), run_at_start=False)
    t.start()
    t.wake()
    wait_until(lambda: calls, message="woken run")
    t.stop()
    assert_threads_gone(("t-wake",))


def test_periodic_thread_error_continues_and_is_logged_with_its_name(caplog):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first run fails")

    t = PeriodicThread("t-flaky", 0.01, flaky)
    t.start()
    wait_until(lambda: len(calls) >= 3, message="runs after the error")
    t.stop()
    assert t.errors == 1
    assert any("t-flaky" in r.getMessage() and r.exc_info for r in caplog.records)


def test_periodic_thread_error_is_fatal_to_its_service():
    class Daemon(Service):
        def _on_start(self):
            self.start_child(PeriodicThread("t-fatal-loop", 0.01, self.tick, fatal=self.fatal))

        ticks = 0

        def tick(self):
            self.ticks += 1
            if self.ticks > 1:  # the first run succeeds, so start() itself completes
                raise RuntimeError("zookeeper gone")

    d = Daemon("daemon")
    try:
        d.start()
    except LifecycleError:
        pass  # the loop may already have failed before start() returned: also a failed daemon
    assert d.wait(5)
    assert d.status is Status.FAILED and "zookeeper gone" in d.failure
    assert_threads_gone(("t-fatal-loop",))


# -- run_service -----------------------------------------------------------------------------------


def test_run_service_returns_nonzero_after_fatal():
    s = Recorder()
    threading.Timer(0.05, s.fatal, args=("boom",)).start()
    assert run_service(s, install_signals=False) == EXIT_FAILED
    assert s.status is Status.FAILED


def test_run_service_returns_zero_after_stop():
    s = Recorder()
    threading.Timer(0.05, s.stop).start()
    assert run_service(s, install_signals=False) == EXIT_OK


def test_run_service_returns_nonzero_on_failed_start():
    assert run_service(Recorder(fail_at="b"), install_signals=False) == EXIT_FAILED


_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from executor.lifecycle import Service, run_service

    class S(Service):
        def _on_start(self):
            self.on_stop(lambda: print("undo ran", flush=True), "marker")
            print("ready", flush=True)

    raise SystemExit(run_service(S("sig")))
""")


@pytest.mark.cluster  # a daemon process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_with_exit_zero(tmp_path, signum):
    script = tmp_path / "svc.py"
    script.write_text(_SCRIPT.format(repo=str(REPO)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signum)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert "undo ran" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
