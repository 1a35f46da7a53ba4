"""One multilang subprocess (Storm's ShellProcess.java): launched in the topology's code dir with
the worker's Python first on PATH, the handshake, a reader thread turning its stdout into
messages, a thread keeping its stderr's tail, and how it ended.

Whoever owns the process writes to its stdin from one thread (a ShellBolt's writer thread, a
ShellSpout's executor thread).
"""

from __future__ import annotations

import collections
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from executor.errors import ClearError
from executor.multilang import protocol as P

log = logging.getLogger(__name__)

STDERR_LINES = 40


class ShellError(ClearError):
    """A multilang subprocess exited, stopped answering or broke the protocol. The message names
    the component, the task, the command (with its script), what happened and the stderr tail."""


class StdoutEnded(Exception):
    """The subprocess's stdout ended or broke the protocol; the text says which."""


class StdinClosed(Exception):
    """Writing to the subprocess failed; the text says how (ShellProcess.error makes it whole)."""


def code_dir(package_root: str | os.PathLike | None) -> str:
    """Where the subprocess runs: the package's `resources/` dir if there is one (Storm's
    layout for multilang scripts), else the package's root, else the current dir."""
    if package_root is None:
        return os.getcwd()
    root = Path(package_root)
    return str(root / "resources") if (root / "resources").is_dir() else str(root)


def child_env(extra: Mapping[str, str] | None, python_path: Sequence[str] = ()) -> dict[str, str]:
    """The worker's environment with its Python's bin dir first on PATH (`python`, and
    console scripts such as `streamparse_run`, are the worker's), `python_path` first on
    PYTHONPATH, and `extra` on top."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


class ShellProcess:
    def __init__(self, command: Sequence[str], component: str, task: int, framing: P.Framing, cwd: str,
                 env: Mapping[str, str]):
        self.command = list(command)
        self.where = f"component {component!r} task {task}"  # for messages
        self.framing = framing
        self.cwd = cwd
        self.env = dict(env)
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._threads: list[threading.Thread] = []
        self._pending: list[Any] = []           # messages read with the handshake's reply
        self.last_error: str | None = None      # the last `error` message it sent
        # its stderr and `log` messages go to the worker log under the component's name
        self.log = logging.getLogger(f"multilang.{component}")

    # ---- start ----
    def launch(self, handshake: Mapping[str, Any], timeout: float) -> int:
        """Start the process, send the handshake and wait (up to `timeout` s) for its pid."""
        try:
            self._proc = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                          start_new_session=False)
        except OSError as exc:
            raise ShellError(f"{self.where}: cannot start {self.describe_command()} in {self.cwd}: "
                             f"{exc.strerror or exc}") from None
        self._start_thread(self._drain_stderr, "stderr")
        try:
            self.write(handshake)
        except StdinClosed as exc:
            raise self.error(f"{exc} before the handshake") from None
        deadline = time.monotonic() + timeout
        early: list[Any] = []  # logs (even emits) before the pid reply: handled after it
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.error(f"sent no pid within {timeout:g}s of the handshake")
            try:
                messages = self.read_messages(remaining)
            except StdoutEnded as exc:
                raise self.error(f"{exc} during the handshake") from None
            for i, msg in enumerate(messages):
                if isinstance(msg, dict) and "pid" in msg and "command" not in msg:
                    self.pid = int(msg["pid"])
                    self._pending = early + messages[i + 1:]
                    return self.pid
                early.append(msg)

    def read_messages(self, timeout: float) -> list[Any]:
        """The messages one read brings within `timeout` seconds (none: []) on the caller's
        thread; the messages that came with the handshake's reply first. StdoutEnded when the
        process closed its stdout or broke the protocol."""
        if self._pending:
            pending, self._pending = self._pending, []
            return pending
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        ready, _w, _x = select.select([fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        data = os.read(fd, 1 << 16)
        if not data:
            raise StdoutEnded("exited" if self.wait(2.0) is not None else "closed its stdout")
        try:
            return self.framing.feed(data)
        except P.ProtocolError as exc:
            raise StdoutEnded(f"broke the protocol: {exc}") from None

    def start_reader(self, on_messages: Callable[[list[Any]], None], on_end: Callable[[str], None]) -> None:
        """Read messages on a thread of their own: `on_messages(batch)` per read (the messages
        that came with the handshake first), `on_end(what happened)` once, at EOF or a
        protocol error."""
        pending, self._pending = self._pending, []

        def run() -> None:
            if pending:
                on_messages(pending)
            assert self._proc is not None and self._proc.stdout is not None
            fd = self._proc.stdout.fileno()
            while True:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError as exc:
                    on_end(f"its stdout failed: {exc.strerror or exc}")
                    return
                if not data:
                    on_end("exited" if self.wait(2.0) is not None else "closed its stdout")
                    return
                try:
                    messages = self.framing.feed(data)
                except P.ProtocolError as exc:
                    on_end(f"broke the protocol: {exc}")
                    return
                if messages:
                    on_messages(messages)

        self._start_thread(run, "reader")

    def _start_thread(self, target, role: str) -> None:
        t = threading.Thread(target=target, name=f"multilang-{role}-{self.where.split(' ', 1)[1]}", daemon=True)
        t.start()
        self._threads.append(t)

    def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in iter(self._proc.stderr.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self._stderr.append(line)
            self.log.info("%s", line)

    # ---- talk ----
    def write(self, message: Any) -> None:
        self.write_all((message,))

    def write_all(self, messages) -> None:
        """Write the messages in order, with as few system calls as the pipe allows."""
        assert self._proc is not None and self._proc.stdin is not None
        encode = self.framing.encode
        data = b"".join([encode(m) for m in messages])
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._proc.stdin.fileno(), view)
                view = view[n:]
        except OSError as exc:
            raise StdinClosed(f"stopped reading its stdin ({exc.strerror or exc})") from None

    # ---- end ----
    def wait(self, timeout: float) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def exit_status(self) -> str:
        code = None if self._proc is None else self._proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)

    def describe_command(self) -> str:
        return " ".join(self.command)

    def error(self, what: str) -> ShellError:
        """`what` happened to this process, as one error: component and task, command, pid, how
        it ended, and the last lines of its stderr."""
        time.sleep(0.05)  # let the stderr thread take the last lines a dying process wrote
        tail = [line for line in self.stderr_tail() if line.strip()][-8:]
        stderr = ("; its stderr ended with:\n  " + "\n  ".join(tail)) if tail else "; its stderr was empty"
        sent = ""
        if self.last_error:
            lines = [line for line in self.last_error.splitlines() if line.strip()]
            sent = "; the last error it sent: " + " | ".join(lines[:1] + lines[-2:] if len(lines) > 3 else lines)
        pid = f"pid {self.pid}, " if self.pid else ""
        return ShellError(f"{self.where}: subprocess `{self.describe_command()}` ({pid}{self.exit_status()}) "
                          f"{what}{sent}{stderr}")

    def destroy(self, grace: float = 1.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.close()  # a component reading stdin ends at EOF (pystorm exits)
            except OSError:
                pass
            if grace <= 0 or self.wait(grace) is None:
                proc.terminate()
                if self.wait(grace) is None:
                    proc.kill()
                    self.wait(5)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(2)
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except (OSError, AttributeError):
                pass
