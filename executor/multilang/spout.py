"""ShellSpout: a spout whose next_tuple/ack/fail run in a subprocess speaking Storm's multilang
protocol (Storm's ShellSpout.java).

Synchronous, like Storm's: each call writes one command and reads what the subprocess sends
(emits, logs, errors, metrics) until its `sync`, on the executor's thread, which alone owns the
subprocess's pipes (no reader thread: a hand-off between threads per `next` cost more than the
round trip itself). No `sync` within
`topology.subprocess.timeout.secs`, an exit or a broken message is a ShellError: the worker
dies and is restarted; tuples not acked are replayed by the new spout as it chooses (a
reliable spout's own bookkeeping, as in Storm).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from executor.adapters import SpoutAdapter
from executor.components import Spout
from executor.multilang import protocol as P
from executor.multilang.component import ShellComponent
from executor.multilang.process import ShellProcess, StdinClosed, StdoutEnded

log = logging.getLogger(__name__)


class ShellSpout(ShellComponent, SpoutAdapter, Spout):
    """`ShellSpout(command, script, outputs=...)`, as ShellBolt."""

    def open(self, conf, context, collector) -> None:
        self._collector = collector
        self._running = True
        self.metrics: dict[str, Any] = {}
        self._proc = self._launch(conf, context)
        self._batch: collections.deque = collections.deque()

    # Storm's ShellSpout.querySubprocess
    def _query(self, command: str, msg_id: Any = "") -> None:
        proc = self._proc
        self._write(P.spout_command(command, msg_id))
        deadline = time.monotonic() + self._timeout
        while True:
            while not self._batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise proc.error(f"did not answer {command!r} with sync within {self._timeout:g}s "
                                     f"(topology.subprocess.timeout.secs): subprocess heartbeat timeout")
                try:
                    self._batch.extend(proc.read_messages(remaining))
                except StdoutEnded as exc:
                    raise proc.error(str(exc)) from None
            raw = self._batch.popleft()
            try:
                msg = P.parse(raw, "spout")
            except P.ProtocolError as exc:
                raise proc.error(f"broke the protocol: {exc}") from None
            if isinstance(msg, P.Emit):
                self._emit(msg)
                continue
            name, body = msg.name, msg.raw
            if name == "sync":
                return
            if not self._report(proc, name, body):  # ack/fail are a bolt's
                raise proc.error(f"sent {name!r}, which a spout cannot: {P.clip(body)}")

    def _emit(self, msg: P.Emit) -> None:
        if msg.task:
            self._collector.emit_direct(msg.task, msg.values, stream=msg.stream, msg_id=msg.msg_id)
            return
        tasks = self._collector.emit(msg.values, stream=msg.stream, msg_id=msg.msg_id)
        if msg.need_task_ids:
            self._write(list(tasks))

    def _write(self, message) -> None:
        try:
            self._proc.write(message)
        except StdinClosed as exc:
            raise self._proc.error(str(exc)) from None

    def next_tuple(self) -> None:
        self._query("next")

    def ack(self, msg_id) -> None:
        self._query("ack", msg_id)

    def fail(self, msg_id) -> None:
        self._query("fail", msg_id)

    def activate(self) -> None:
        self._query("activate")

    def deactivate(self) -> None:
        self._query("deactivate")

    def close(self) -> None:
        self._running = False
        proc: ShellProcess | None = getattr(self, "_proc", None)
        if proc is not None:
            proc.destroy()
        self._remove_pid_dir()
