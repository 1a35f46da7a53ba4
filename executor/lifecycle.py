"""One lifecycle for every long-lived daemon object (Nimbus, the supervisor, the worker, the RPC
server): a status, idempotent thread-safe start()/stop(), unwinding on a failed start, and a
fatal path that stops the whole service loudly instead of leaving the process half alive.

A subclass overrides `_on_start()`; right after it starts each resource it registers the undo
with `self.on_stop(callback, name)`. Nothing connects or starts a thread in a constructor.

    class Supervisor(Service):
        def _on_start(self):
            self.state = connect(...)
            self.on_stop(self.state.close, "cluster state")
            self.start_child(PeriodicThread("supervisor-sync", 10, self.sync, fatal=self.fatal))

stop() runs the undos in reverse order, each guarded (an undo that raises is logged and the
rest still run). stop() is bounded as long as every undo is: the building blocks here
(PeriodicThread, child services) join their threads with a timeout and never wait forever.

`run_service()` is the body of a process main: start, wait for SIGTERM/SIGINT, a fatal error
or a stop, stop, and return the exit code.
"""

from __future__ import annotations

import enum
import logging
import signal
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
_SIGNAL_POLL_SECS = 0.1  # how soon run_service notices a signal
_SLOW_UNDO_SECS = 5.0  # an undo slower than this is named in a warning (a stop should be quick)


class Status(str, enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


_DONE = (Status.STOPPED, Status.FAILED)


class LifecycleError(RuntimeError):
    """start() on a service that already stopped or failed (a service runs once)."""


class Service:
    """Base of every daemon object; see the module docstring for the contract."""

    def __init__(self, name: str):
        self.name = name
        self._status = Status.CREATED
        self._failure: str | None = None
        self._failure_exc: BaseException | None = None
        self._undos: list[tuple[str, Callable[[], Any]]] = []
        self._done_callbacks: list[Callable[[Service], Any]] = []
        self._running_callbacks: list[Callable[[Service], Any]] = []
        self.ran = False  # reached RUNNING at least once
        self._done = threading.Event()
        self._state_lock = threading.Lock()        # short sections: status, failure, callbacks
        self._transition_lock = threading.Lock()   # held through a whole start() or stop()
        self._fatal_hook: Callable[[str, BaseException | None], None] | None = None

    # -- what other threads read -------------------------------------------------------------

    @property
    def status(self) -> Status:
        return self._status

    @property
    def failure(self) -> str | None:
        """Why the service failed (a fatal reason or the start error), else None."""
        return self._failure

    @property
    def failure_exc(self) -> BaseException | None:
        return self._failure_exc

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the service is stopped or failed; False if `timeout` passed first."""
        return self._done.wait(timeout)

    def when_done(self, callback: Callable[[Service], Any]) -> None:
        """Call `callback(service)` once the service is stopped or failed (now if it already is)."""
        with self._state_lock:
            if not self._done.is_set():
                self._done_callbacks.append(callback)
                return
        callback(self)

    def when_running(self, callback: Callable[[Service], Any]) -> None:
        """Call `callback(service)` once start() has succeeded (e.g. to announce where it runs)."""
        self._running_callbacks.append(callback)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self._status.value}>"

    # -- for subclasses ------------------------------------------------------------------------

    def _on_start(self) -> None:
        """Start the resources, registering each one's undo with on_stop() right after it."""

    def on_stop(self, callback: Callable[[], Any], name: str) -> None:
        """Register the undo of something just started; undos run in reverse order."""
        self._undos.append((name, callback))

    def start_child(self, child: Any) -> Any:
        """Start `child` (anything with start()/stop()) and register its stop; a child Service's
        fatal error is this service's fatal error."""
        if isinstance(child, Service):
            child._fatal_hook = lambda reason, exc: self.fatal(f"{child.name}: {reason}", exc)
        name = getattr(child, "name", type(child).__name__)
        child.start()
        self.on_stop(child.stop, str(name))
        return child

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start once; a second call returns at once. A failed start unwinds what had started
        (in reverse order), leaves the status FAILED and re-raises."""
        with self._transition_lock:
            with self._state_lock:
                if self._status in (Status.RUNNING, Status.STOPPING):
                    return
                if self._status in _DONE:
                    raise LifecycleError(f"{self.name} is {self._status.value}; it cannot start again")
                self._status = Status.STARTING
            log.debug("%s: starting", self.name)
            try:
                self._on_start()
            except BaseException as exc:
                self._record_failure(f"failed to start: {exc}", exc)
                log.error("%s: failed to start: %s", self.name, exc)
                self._unwind()
                raise
            with self._state_lock:
                failed = self._failure is not None  # fatal() during start: unwind now
                if not failed:
                    self._status = Status.RUNNING
            if failed:
                self._unwind()
                raise LifecycleError(f"{self.name} failed while starting: {self._failure}") \
                    from self._failure_exc
            self.ran = True
            log.info("%s: running", self.name)
            for callback in self._running_callbacks:
                callback(self)

    def stop(self) -> None:
        """Stop once (later calls return at once; a call during another thread's stop waits for
        it). Safe from any thread, including one of the service's own threads."""
        with self._transition_lock:
            with self._state_lock:
                if self._status in _DONE or self._status is Status.STOPPING:
                    return
                if self._status is Status.CREATED:  # never started: nothing to undo
                    self._status = Status.STOPPED
                    self._finish_locked()
                    return
                self._status = Status.STOPPING
            self._unwind()

    def fatal(self, reason: str, exc: BaseException | None = None) -> None:
        """An unrecoverable error (any thread): log it loudly once, stop the service and leave
        it FAILED, so the process main exits non-zero. Never blocks on another thread's stop."""
        with self._state_lock:
            first = self._failure is None
            if first:
                self._failure, self._failure_exc = reason, exc
        if first:
            log.critical("%s: FATAL: %s; stopping", self.name, reason, exc_info=exc)
            if self._fatal_hook is not None:
                self._fatal_hook(reason, exc)
        while True:
            # A start in progress sees the failure and unwinds; a stop in progress ends FAILED.
            if self._transition_lock.acquire(timeout=0.05):
                try:
                    self._stop_after_fatal()
                finally:
                    self._transition_lock.release()
                return
            with self._state_lock:
                if self._status is not Status.RUNNING:
                    return

    def _stop_after_fatal(self) -> None:
        with self._state_lock:
            if self._status is not Status.RUNNING:
                if self._status is Status.CREATED:
                    self._status = Status.FAILED
                    self._finish_locked()
                return
            self._status = Status.STOPPING
        self._unwind()

    # -- internals -------------------------------------------------------------------------------

    def _record_failure(self, reason: str, exc: BaseException | None) -> None:
        with self._state_lock:
            if self._failure is None:
                self._failure, self._failure_exc = reason, exc

    def _unwind(self) -> None:
        """Run the undos in reverse, each guarded, then settle the final status."""
        while self._undos:
            name, undo = self._undos.pop()
            began = time.monotonic()
            try:
                undo()
            except Exception:
                log.exception("%s: stopping %s failed (going on with the rest)", self.name, name)
            took = time.monotonic() - began
            if took > _SLOW_UNDO_SECS:
                log.warning("%s: stopping %s took %.1fs", self.name, name, took)
        with self._state_lock:
            self._status = Status.FAILED if self._failure is not None else Status.STOPPED
            self._finish_locked()
        log.info("%s: %s", self.name, self._status.value)

    def _finish_locked(self) -> None:
        self._done.set()
        callbacks, self._done_callbacks = self._done_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("%s: done callback failed", self.name)


class PeriodicThread:
    """A named thread that runs `fn()` every `interval_secs` (measured from the start of each
    run; an overrun runs again at once) until stopped. `wake()` runs it now.

    An exception in `fn` is logged with the thread's name; then the loop goes on, or, when a
    `fatal(reason, exc)` callback is given (e.g. Service.fatal), that is called and the loop ends.
    """

    def __init__(self, name: str, interval_secs: float | Callable[[], float], fn: Callable[[], Any], *,
                 fatal: Callable[[str, BaseException | None], Any] | None = None,
                 run_at_start: bool = True, join_timeout_secs: float = 10.0):
        self.name = name
        self._interval = interval_secs
        self._fn = fn
        self._fatal = fatal
        self._run_at_start = run_at_start
        self._join_timeout = join_timeout_secs
        self._wake = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.errors = 0

    def start(self) -> None:
        with self._lock:
            if self._stopping:
                raise LifecycleError(f"{self.name} was stopped; it cannot start again")
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is None or thread is threading.current_thread():
            return
        thread.join(self._join_timeout)
        if thread.is_alive():
            log.warning("%s: did not stop within %gs (its function is still running)",
                        self.name, self._join_timeout)

    def wake(self) -> None:
        """Run the function as soon as the current run (if any) ends."""
        self._wake.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _next_interval(self) -> float:
        value = self._interval() if callable(self._interval) else self._interval
        return max(0.0, float(value))

    def _run(self) -> None:
        if not self._run_at_start:
            self._wake.wait(self._next_interval())
            self._wake.clear()
        while not self._stopping:
            began = time.monotonic()
            try:
                self._fn()
                self.runs += 1
            except Exception as exc:
                self.errors += 1
                if self._fatal is not None:
                    log.error("%s: failed: %s", self.name, exc, exc_info=True)
                    self._fatal(f"{self.name} failed: {exc}", exc)
                    return
                log.exception("%s: failed (will run again)", self.name)
            wait = self._next_interval() - (time.monotonic() - began)
            if wait > 0 and not self._stopping:
                self._wake.wait(wait)
            self._wake.clear()


def run_service(service: Service, *, install_signals: bool = True) -> int:
    """A process main's body: start `service`, wait until SIGTERM/SIGINT, a fatal error or a
    stop, stop it, and return the exit code (EXIT_OK after a clean stop, EXIT_FAILED after a
    failed start or a fatal error). Signal handlers only record the signal."""
    wake = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        # Only a list append: Event.set() takes a lock the interrupted main thread may hold.
        received.append(signal.Signals(signum).name)

    previous: dict[int, Any] = {}
    if install_signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, on_signal)
        else:
            log.warning("%s: run_service outside the main thread: signal handlers not installed",
                        service.name)
    try:
        try:
            service.start()
        except Exception as exc:
            log.error("%s: cannot start: %s", service.name, exc)
            return EXIT_FAILED
        service.when_done(lambda _s: wake.set())
        while not received and not wake.is_set():
            wake.wait(_SIGNAL_POLL_SECS)
        if received:
            log.info("%s: received %s, stopping", service.name, received[0])
        service.stop()
        return EXIT_FAILED if service.status is Status.FAILED else EXIT_OK
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
