"""ShellBolt: a bolt whose execute runs in a subprocess speaking Storm's multilang protocol
(Storm's ShellBolt.java).

Threads: the executor's thread queues each input for the writer and never waits for it: while
`topology.shellbolt.max.pending` tuples are queued the bolt has no room (`input_room`, asked by
the executor before each batch), so the executor takes only its system batches (the
subprocess's replies among them) and its thread, shared with the worker's other executors, runs
them meanwhile; the writer wakes it once it took some. A writer thread owns the subprocess's
stdin, a reader thread reads its messages and hands each batch to the executor's thread
(collector.call_soon), which alone emits, acks and fails; a monitor thread asks for a heartbeat
every second and ends the bolt when nothing came back for `topology.subprocess.timeout.secs`.
Any failure (an exit, a timeout, a broken message, an ack of an unknown id) is a ShellError
raised on the executor's thread: the worker dies and is restarted, as Storm's does; the
tuples in flight are replayed from their spouts.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from typing import Any

from executor.adapters import Adapter
from executor.components import Bolt
from executor.multilang import protocol as P
from executor.multilang.component import ShellComponent
from executor.multilang.process import ShellError, ShellProcess, StdinClosed

log = logging.getLogger(__name__)

HEARTBEAT_SECS = 1.0
WRITE_BATCH = 256  # messages the writer takes per wake-up


class ShellBolt(ShellComponent, Adapter, Bolt):
    """`ShellBolt(command, script, outputs=...)`: e.g. `ShellBolt("python3", "splitsentence.py",
    outputs=["word"])`; `outputs` is a list of fields (the default stream) or a dict of stream ->
    fields (or {"fields": [...], "direct": True}); or subclass and declare_output_fields."""

    paced = True  # its executor asks input_room before each batch

    def prepare(self, conf, context, collector) -> None:
        self._collector = collector
        self._task = context.this_task_id
        self._inputs: dict[str, Any] = {}
        self._rand = random.Random()
        self._max_pending = int(conf.get("topology.shellbolt.max.pending") or 100)
        self._writes: collections.deque = collections.deque()  # tuples for the writer (deque: thread-safe ends)
        self._write_ready = threading.Event()  # set when there is something for the writer
        self._full = False  # input_room said 0: the writer wakes the executor once it took some
        self._task_ids: collections.deque = collections.deque()  # replies to emits, written first
        self._running = True
        self._dead: ShellError | None = None
        self._dying: str | None = None  # what happened, seen on another thread
        self._heartbeat_due = False
        self.metrics: dict[str, Any] = {}
        self._proc = self._launch(conf, context)
        self._last_heard = time.monotonic()
        self._proc.start_reader(self._on_messages, self._on_end)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=run, name=f"multilang-{role}-{self._task}", daemon=True)
                         for role, run in (("writer", self._write_loop), ("monitor", self._monitor))]
        for t in self._threads:
            t.start()

    # ---- executor thread ----
    def execute(self, tup) -> None:
        self._raise_if_dead()
        msg_id = str(self._rand.getrandbits(63))
        self._inputs[msg_id] = tup
        self._writes.append(P.bolt_tuple(msg_id, tup.source_component, tup.source_stream, tup.source_task,
                                         tup.values))
        self._write_ready.set()

    def input_room(self) -> int:
        """Adapter.input_room (it is paced): tuples it takes before its subprocess catches up (a dying one takes
        any, so that execute raises its error)."""
        room = self._max_pending - len(self._writes)
        if room > 0 or self._dying is not None:
            return max(room, 1)
        self._full = True
        return 0

    def _handle(self, messages: list) -> None:
        self._raise_if_dead()
        inputs, ack = self._inputs, self._collector.ack
        for raw in messages:
            if type(raw) is dict and raw.get("command") == "ack":  # the commonest message, checked briefly
                tup = inputs.pop(raw.get("id"), None)
                if tup is not None:
                    ack(tup)
                    continue
            try:
                msg = P.parse(raw, "bolt")
            except P.ProtocolError as exc:
                raise self._proc.error(f"broke the protocol: {exc}") from None
            if isinstance(msg, P.Emit):
                self._emit(msg)
                continue
            name, body = msg.name, msg.raw
            if name in ("ack", "fail"):
                tup = self._inputs.pop(str(body["id"]), None)
                if tup is None:
                    raise self._proc.error(f"sent {name} of id {body['id']!r}, which is unknown or already "
                                           f"acked/failed: {P.clip(body)}")
                (self._collector.ack if name == "ack" else self._collector.fail)(tup)
            else:  # sync: the answer to a heartbeat; hearing it is all it is for
                self._report(self._proc, name, body)

    def _emit(self, msg: P.Emit) -> None:
        anchors = []
        for a in msg.anchors:
            tup = self._inputs.get(a)
            if tup is None:
                raise self._proc.error(f"emitted anchored onto id {a!r} after it was acked or failed: "
                                       f"{P.clip(msg.values)}")
            anchors.append(tup)
        if msg.task:
            self._collector.emit_direct(msg.task, msg.values, anchors, stream=msg.stream)
        else:
            tasks = self._collector.emit(msg.values, anchors, stream=msg.stream)
            if msg.need_task_ids:
                self._task_ids.append(list(tasks))
                self._heartbeat_wake()

    def _raise_if_dead(self) -> None:
        if self._dead is None and self._dying is not None:
            # Built here, on the executor's thread, after the messages read before the end were
            # handled: the error says what the subprocess last reported.
            self._dead = self._proc.error(self._dying)
        if self._dead is not None:
            raise self._dead

    # ---- other threads ----
    def _on_messages(self, messages: list) -> None:
        self._last_heard = time.monotonic()
        self._collector.call_soon(lambda: self._handle(messages))

    def _on_end(self, what: str) -> None:
        if self._running:
            self._die(what)

    def _die(self, what: str) -> None:
        if self._dying is None:
            self._dying = what
            self._collector.call_soon(self._raise_if_dead)  # wakes an idle executor to die

    def _heartbeat_wake(self) -> None:
        self._write_ready.set()  # the writer looks at the task ids and the heartbeat now

    def _write_loop(self) -> None:
        """Writes what is queued, task ids first, each wake-up's messages in one write (one
        system call, where a write per tuple was the larger part of a tuple's cost)."""
        writes, ready = self._writes, self._write_ready
        try:
            while self._running:
                if not writes:
                    ready.wait(0.2)
                ready.clear()  # before taking: what is queued after this wakes the next wait
                out = []
                while self._task_ids:
                    out.append(self._task_ids.popleft())
                if self._heartbeat_due:
                    self._heartbeat_due = False
                    out.append(P.heartbeat(str(self._rand.getrandbits(63))))
                while writes and len(out) < WRITE_BATCH:
                    out.append(writes.popleft())
                if self._full:  # the executor holds input back: there is room again
                    self._full = False
                    self._collector.call_soon(_nothing)
                if out:
                    self._proc.write_all(out)
        except StdinClosed as exc:
            if self._running:
                self._die(str(exc))

    def _monitor(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECS):
            silent = time.monotonic() - self._last_heard
            if silent > self._timeout:
                self._die(f"did not answer for {silent:.0f}s (topology.subprocess.timeout.secs is "
                          f"{self._timeout:g}): subprocess heartbeat timeout")
                return
            self._heartbeat_due = True
            self._heartbeat_wake()

    def cleanup(self) -> None:
        self._running = False
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        proc: ShellProcess | None = getattr(self, "_proc", None)
        if proc is not None:
            proc.destroy()
        for t in getattr(self, "_threads", ()):
            t.join(2)
        self._remove_pid_dir()
        self._inputs.clear()


def _nothing() -> None:
    """A call that only wakes the executor."""
