"""Helpers shared by every test directory (tests/ is on sys.path via tests/conftest.py): polling,
running the `storm-py` CLI as a process, stopping a daemon process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
# The environment of a CLI or daemon process started by a test: the checkout importable.
CLI_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}

# Storm's idle-wait keys for the paced topologies that run for minutes while tests look at them
# (the UI's figures, counts under faults) and for the supervisor tests' workers: an idle worker's
# executor thread wakes 100 times a second instead of 1,000 (~9% of a core each -> ~1%). Input
# still ends a wait at once; only a paced spout's next call can come 10 ms late. The default 1 ms
# wait is what every other test runs.
QUIET_IDLE = {"topology.bolt.wait.progressive.level3.sleep.millis": 10,
              "topology.spout.wait.progressive.level3.sleep.millis": 10}
QUIET_IDLE_ARGS = tuple(f"{k}={v}" for k, v in QUIET_IDLE.items())


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the caller binds it soon after)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, message: Any = "condition",
               interval: float = 0.01, tolerate: tuple[type[BaseException], ...] = ()) -> Any:
    """Poll `predicate` until it returns something truthy (returned) or fail after `timeout`.

    `tolerate`: exceptions the predicate may raise while a fault the test caused lasts (a
    ZooKeeper that is restarting): they count as "not yet", and the last one is named if the
    deadline passes."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
        except tolerate as exc:
            value, last = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            also = f" (last error: {type(last).__name__}: {last})" if last is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {text}{also}")
        time.sleep(interval)  # poll interval, bounded by the deadline above


def assert_threads_gone(prefixes: tuple[str, ...], timeout: float = 10.0) -> None:
    """Wait until no thread whose name starts with one of `prefixes` is alive."""
    left: list[str] = []

    def gone() -> bool:
        left[:] = [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]
        return not left

    wait_until(gone, timeout=timeout, message=lambda: f"threads to stop; left behind: {left}")


def storm_py(*args: str, conf_dir: Path | None = None, cwd: Path | str = ROOT, env_extra: dict | None = None,
             timeout: float = 60, check: int | None = None) -> subprocess.CompletedProcess:
    """`python -m daemons.cli ARGS [--conf-dir DIR]` (from the checkout unless `cwd` says where,
    never reading the user's $STORM_CONF_DIR); asserts the exit code when `check` is given."""
    cmd = [sys.executable, "-m", "daemons.cli", *args]
    if conf_dir is not None:
        cmd += ["--conf-dir", str(conf_dir)]
    env = {k: v for k, v in CLI_ENV.items() if k != "STORM_CONF_DIR"}
    env.update(env_extra or {})
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
                         stdin=subprocess.DEVNULL)
    if check is not None:
        assert out.returncode == check, (args, out.returncode, out.stdout, out.stderr)
    return out


def error_lines(out: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]


def one_error_line(out: subprocess.CompletedProcess, *names: str, code: int | None = None) -> str:
    """A failed CLI run (with exit `code` if given) printed exactly one `error:` line (returned)
    naming every one of `names`, and no traceback."""
    assert out.returncode != 0 if code is None else out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = error_lines(out)
    assert len(lines) == 1, out.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def stop_process(proc: subprocess.Popen, timeout: float, what: Any, sig: int = signal.SIGTERM) -> int:
    """Send `sig` to `proc` if it still runs and return its exit code; one still running after
    `timeout` seconds is killed and the test fails with `what` (a string or a callable)."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        text = what() if callable(what) else what
        raise AssertionError(f"{text} did not exit within {timeout:g}s of {signal.Signals(sig).name}") from None
    return proc.returncode
