"""One executor's output (Storm's ExecutorTransfer plus the collectors' shared half): the only
owner of its per-destination buffers, pendingEmits, the acks merged per tuple tree, batching,
the large-tuple byte accounting, the per-stream emit counters (every emit counts itself here)
and the emit listener.

Collectors (executor/bolt.py, executor/spout.py) and the checkpoint code call it and nothing
else; the executor flushes it once per step and asks it whether it is back-pressured.

Buffers are one list of (task, payload) entries per destination slot (a local executor's queue
or a remote worker's transfer queue); a full buffer is published at once, the rest at flush().
A queue that refuses a batch leaves it in pendingEmits, and so does every batch after it
(order is kept across destinations, as Storm's pendingEmits keeps it).
"""

from __future__ import annotations

import os
from collections import deque
from random import getrandbits
from typing import Any, Callable

from executor.errors import EmitError
from executor.receive_queue import BarrierBatch
from executor.serialization import (
    ACKER_ACK,
    ACKER_FAIL,
    ACKER_INIT,
    LARGE_VALUE,
    SCALAR_TYPES,
    batch_bytes,
    measure_values,
)
from executor.tuple import Tuple

_LARGE_FLUSH = 1 << 20  # buffered bytes of large tuples that trigger a flush
_MASK = (1 << 64) - 1  # names, not literals: typed in outbox.pxd, the arithmetic stays in C
_GAMMA, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_edge_state = 0  # splitmix64's state for edge ids (an unsigned 64-bit integer when compiled)


def seed_edges(seed: int | None = None) -> None:
    """Edge ids seeded from the OS, and again in a forked child (as `random` reseeds its own):
    two processes drawing the same edges could close a tree's ledger early. A seed makes them
    repeat (the pure and the compiled core compared, tests/core_twin_driver.py)."""
    global _edge_state
    _edge_state = int.from_bytes(os.urandom(8), "little") if seed is None else seed & _MASK


def _edge_id():
    """A new edge id, 64 random bits (Storm's MessageId.generateId): splitmix64 (Steele, Lea and
    Flood, 2014), in C integers when compiled, where a call to random.getrandbits cost as much
    as the rest of an anchored emit (bench/core_path.py --acked under callgrind)."""
    global _edge_state
    _edge_state = (_edge_state + _GAMMA) & _MASK
    z = _edge_state
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK
    return z ^ (z >> 31)


seed_edges()
os.register_at_fork(after_in_child=seed_edges)

EmitListener = Callable[[str, int, str, list], None]


class Outbox:
    __slots__ = ("component_id", "_slot_queues", "_task_slot", "_bufs", "_batch_size", "pending_emits",
                 "_pending_acks", "_acker_tasks", "_n_ackers", "has_ackers", "_local_acker", "_root_bits",
                 "_listener", "_max_tuple_bytes", "_large_bytes", "_report_error", "_new_routes",
                 "_untracked_fail", "_sealing", "_tasks")

    def __init__(self, component_id: str, slot_queues: list, task_slot: dict[int, int], *, batch_size: int,
                 max_tuple_bytes: int, acker_tasks: list[int], local_tasks: frozenset[int] | set[int],
                 first_task: int, listener: EmitListener | None,
                 report_error: Callable[[int, BaseException], None], tasks: tuple = ()):
        self.component_id = component_id
        self._tasks = tuple(tasks) or None  # its executor's, named to the queues it publishes to
        self._slot_queues = list(slot_queues)
        self._task_slot = task_slot
        self._bufs: list[list] = [[] for _ in self._slot_queues]
        self._batch_size = max(1, int(batch_size))
        self._max_tuple_bytes = int(max_tuple_bytes)
        self.pending_emits: deque = deque()  # (queue, batch, nbytes) refused so far, in order
        # Acks of this step, XOR-merged per root (the acker XORs them anyway): a bolt acking
        # several tuples of one tree in a batch sends the acker one message, not one per tuple.
        self._pending_acks: dict[int, int] = {}
        self._acker_tasks = list(acker_tasks)
        self._n_ackers = len(self._acker_tasks)
        self.has_ackers = self._n_ackers > 0
        # The acker a spout's roots go to when one runs in this worker (spread over them).
        local = [i for i, t in enumerate(self._acker_tasks) if t in local_tasks]
        self._local_acker = local[first_task % len(local)] if local else None
        self._root_bits = 64 - max(1, self._n_ackers).bit_length()  # root < 2**64
        self._listener = listener
        # Bytes of large tuples buffered since the last full flush: while non-zero, batches are
        # measured for the queues' byte bound, and buffers are flushed every _LARGE_FLUSH bytes.
        self._large_bytes = 0
        self._report_error = report_error
        self._new_routes: tuple | None = None
        # Exactly-once (barrier-only) topologies: what a fail of a tuple outside every tuple tree
        # means (executor/checkpoint/barrier_mode.py); None: nothing, as in Storm.
        self._untracked_fail: Callable[[Tuple], None] | None = None
        self._sealing = False  # between begin_barriers and end_barriers

    # ---- validation: the emit prologue of every collector ----
    def route(self, routes: dict, task: int, stream: str, values, direct: bool = False):
        """The StreamOut `values` go out by on `stream`, once they are fit to: raises EmitError
        (and reports it) for an undeclared stream, a wrong arity or grouping kind, a value msgpack
        cannot carry or a tuple over topology.max.tuple.size.bytes."""
        out = routes.get(stream)
        if out is None or out.direct != direct or len(values) != out.n:
            self._emit_error(routes, task, stream, values, out, direct)
        if direct:
            self._check(task, stream, values, out, direct)
            return out
        for v in values:  # the common small str/scalar values pass with one len() or set lookup
            t = type(v)
            if t is str or t is bytes:
                if len(v) < LARGE_VALUE:
                    continue
            elif t in SCALAR_TYPES:
                continue
            self._check(task, stream, values, out, direct)
            break
        return out

    def _emit_error(self, routes, task, stream, values, out, direct: bool):
        declared = sorted(routes)
        if out is None:
            msg = f"stream {stream!r} is not declared (declared: {declared})"
        elif out.direct and not direct:
            msg = f"stream {stream!r} is declared direct; use emit_direct"
        elif direct and not out.direct:
            msg = f"stream {stream!r} is not declared direct; use emit"
        elif not isinstance(values, (list, tuple)) or len(values) != out.n:
            msg = (f"emitted {len(values) if hasattr(values, '__len__') else '?'} values {values!r} "
                   f"but stream {stream!r} declares {out.n} fields {out.fields.to_list()}")
        else:
            msg = measure_values(values)[0] or "invalid values"
        self._raise(task, EmitError(f"component {self.component_id!r} task {task}, stream {stream!r}: {msg}"))

    def _check(self, task, stream, values, out, direct: bool) -> None:
        """The slow check, for tuples with a large, int or container value."""
        problem, nbytes = measure_values(values)
        if problem is not None:
            self._emit_error({stream: out}, task, stream, values, out, direct)
        if nbytes > self._max_tuple_bytes:
            self._raise(task, EmitError(
                f"component {self.component_id!r} task {task}, stream {stream!r}: tuple of about {nbytes} bytes "
                f"exceeds topology.max.tuple.size.bytes ({self._max_tuple_bytes}); emit smaller tuples "
                f"(e.g. a path or key instead of the data) or raise the limit"))
        if nbytes >= LARGE_VALUE:
            if self._large_bytes + nbytes > _LARGE_FLUSH:
                self.flush()  # before this tuple joins the buffers: bounds what they hold
            self._large_bytes += nbytes

    def bad_anchor(self, task: int, stream: str, anchor) -> None:
        self._raise(task, EmitError(f"component {self.component_id!r} task {task}, stream {stream!r}: anchors "
                                    f"must be input tuples, got {type(anchor).__name__} {anchor!r}"))

    def _raise(self, task: int, exc: EmitError) -> None:
        self._report_error(task, exc)
        raise exc

    # ---- emits (hot) ----
    def _counted(self, task: int, out, values, targets) -> None:
        counts = out.counts
        counts[0] += 1
        counts[1] += len(targets)
        if self._listener is not None:
            self._listener(self.component_id, task, out.stream, values)

    def emit(self, task: int, out, values, targets: list[int]) -> list[int]:
        """An untracked tuple: one Tuple object shared by every target."""
        self._counted(task, out, values, targets)  # a C call in the compiled core: not inlined
        self._place(targets, Tuple(values, task, out.stream, self.component_id, out.fields, None))
        return targets

    def _place(self, targets, tup) -> None:
        """One untracked tuple into its targets' buffers (a buffer is flushed once full)."""
        bufs = self._bufs
        task_slot = self._task_slot
        bs = self._batch_size
        for t in targets:
            i = task_slot[t]
            buf = bufs[i]
            buf.append((t, tup))
            if len(buf) >= bs:
                self._flush_slot(i)

    def emit_many(self, task: int, routes: dict, stream: str, many) -> None:
        """Untracked tuples, one per values list of `many` (a bolt's emit_many): what emit does
        for each, checked as emit checks it, with no call from Python per tuple."""
        comp = self.component_id
        listener = self._listener
        out = None
        n = 0
        sent = 0
        try:
            for values in many:
                if type(values) is not list and type(values) is not tuple:
                    self._raise(task, EmitError(
                        f"component {comp!r} task {task}, stream {stream!r}: emit_many takes a list of value "
                        f"lists (one per tuple, e.g. [[w] for w in words]), got {type(values).__name__} {values!r}"))
                out = self.route(routes, task, stream, values, False)
                targets = out.targets(values)
                n += 1
                sent += len(targets)
                if listener is not None:
                    listener(comp, task, stream, values)
                self._place(targets, Tuple(values, task, stream, comp, out.fields, None))
        finally:
            if out is not None:
                counts = out.counts
                counts[0] += n
                counts[1] += sent

    def emit_anchored(self, task: int, out, values, targets: list[int], anchors) -> list[int]:
        """A bolt's emit anchored to input tuples (one Tuple or an iterable of them): one new
        edge per target and anchored root (Storm's BoltOutputCollectorImpl.boltEmit)."""
        if anchors is None or not self.has_ackers:
            return self.emit(task, out, values, targets)
        stream = out.stream
        if type(anchors) is Tuple:
            anchors = (anchors,)
        else:
            for x in anchors:  # untyped: `a` below is a Tuple in the compiled core
                if type(x) is not Tuple:
                    self.bad_anchor(task, stream, x)
        self._counted(task, out, values, targets)
        bufs = self._bufs
        task_slot = self._task_slot
        bs = self._batch_size
        fields = out.fields
        comp = self.component_id
        for t in targets:
            a2i = None
            for a in anchors:
                roots = a.anchors_to_ids
                if roots:
                    eid = _edge_id()
                    a.ack_val ^= eid  # updateAckVal: the new edge rides along with the anchor's ack
                    if a2i is None:
                        a2i = {}
                    for r in roots:
                        a2i[r] = a2i.get(r, 0) ^ eid
            i = task_slot[t]
            buf = bufs[i]
            buf.append((t, Tuple(values, task, stream, comp, fields, a2i)))
            if len(buf) >= bs:
                self._flush_slot(i)
        return targets

    def emit_rooted(self, task: int, out, values, targets: list[int], root: int) -> int:
        """One tuple per target in the existing tree `root` (a stateful spout passing a checkpoint
        step on, executor/checkpoint/spout_side.py), counted; the XOR of the new edges (what the
        acker must be told)."""
        self._counted(task, out, values, targets)
        return self._rooted(task, out, values, targets, root)

    def _rooted(self, task: int, out, values, targets: list[int], root: int) -> int:
        """emit_rooted's tuples, each with an edge of its own, uncounted (emit_tracked counts)."""
        bufs = self._bufs
        task_slot = self._task_slot
        bs = self._batch_size
        stream = out.stream
        fields = out.fields
        comp = self.component_id
        xor = 0
        for t in targets:
            eid = _edge_id()
            xor ^= eid
            i = task_slot[t]
            buf = bufs[i]
            buf.append((t, Tuple(values, task, stream, comp, fields, {root: eid})))
            if len(buf) >= bs:
                self._flush_slot(i)
        return xor

    def emit_tracked(self, task: int, out, values, targets: list[int]) -> int:
        """A spout's tracked emit: a new tuple tree, its tuples and the acker's init; its root.
        Every party picks a root's acker as acker_tasks[root % n]: a root drawn as a multiple of
        n plus the index of an acker in this worker keeps init and ack-to-spout local."""
        self._counted(task, out, values, targets)
        n = self._n_ackers
        local = self._local_acker
        root = getrandbits(self._root_bits) * n + local if local is not None else getrandbits(64)
        xor = self._rooted(task, out, values, targets, root)
        self.send(self._acker_tasks[root % n], (ACKER_INIT, root, xor, task))
        return root

    def send(self, target: int, payload: Any) -> None:
        """One entry (a Tuple or a control tuple) to a task."""
        i = self._task_slot[target]
        buf = self._bufs[i]
        buf.append((target, payload))
        if len(buf) >= self._batch_size:
            self._flush_slot(i)

    # ---- acker traffic ----
    def ack(self, tup: Tuple) -> None:
        """The acker's part of acking an input tuple: merged per root until the step flushes."""
        a2i = tup.anchors_to_ids
        if a2i:
            av = tup.ack_val
            pending = self._pending_acks
            for root, eid in a2i.items():
                pending[root] = pending.get(root, 0) ^ eid ^ av

    def fail(self, tup: Tuple) -> None:
        a2i = tup.anchors_to_ids
        if a2i:
            if self._pending_acks:  # the acker sees this step's acks before the fail, as they came
                self._send_pending_acks()
            for root in a2i:
                self.to_acker(root, (ACKER_FAIL, root))
        elif self._untracked_fail is not None:
            self._untracked_fail(tup)

    def on_untracked_fail(self, fn: Callable[[Tuple], None] | None) -> None:
        """Call fn(tup) when a tuple outside every tuple tree is failed (exactly-once topologies:
        the checkpoint must not commit without it)."""
        self._untracked_fail = fn

    def to_acker(self, root: int, payload: tuple) -> None:
        """A control message about tree `root`, to the acker that owns it."""
        self.send(self._acker_tasks[root % self._n_ackers], payload)

    def ack_value(self, root: int, value: int) -> None:
        """An ack of tree `root` carrying `value` (edge ^ new edges), sent as it is."""
        self.to_acker(root, (ACKER_ACK, root, value))

    def _send_pending_acks(self) -> None:
        pending, self._pending_acks = self._pending_acks, {}
        acker_tasks = self._acker_tasks
        n = self._n_ackers
        send = self.send
        for root, value in pending.items():
            send(acker_tasks[root % n], (ACKER_ACK, root, value))

    # ---- batching and back-pressure ----
    def _flush_slot(self, i: int) -> None:
        buf = self._bufs[i]
        self._bufs[i] = []
        if self._sealing:
            buf = BarrierBatch(buf)
        q = self._slot_queues[i]
        nbytes = batch_bytes(buf) if self._large_bytes else 0
        if self.pending_emits or not q.try_publish(buf, nbytes, self._tasks):
            self.pending_emits.append((q, buf, nbytes))

    def flush(self) -> None:
        """What is buffered (acks first) goes to its queues, or joins pendingEmits."""
        if self._pending_acks:
            self._send_pending_acks()
        bufs = self._bufs
        for i in range(len(bufs)):
            if bufs[i]:
                self._flush_slot(i)
        self._large_bytes = 0

    def begin_barriers(self) -> None:
        """What is emitted from now to end_barriers (checkpoint tuples) goes in BarrierBatch
        batches of its own; what was emitted before goes out first, in plain ones (the order
        per destination is kept)."""
        self.flush()
        self._sealing = True

    def end_barriers(self) -> None:
        bufs = self._bufs
        try:
            for i in range(len(bufs)):
                if bufs[i]:
                    self._flush_slot(i)
        finally:
            self._sealing = False

    def try_flush_pending(self) -> bool:
        """Publish pendingEmits in order, stopping at the first refusal; True when empty."""
        pe = self.pending_emits
        while pe:
            q, b, nbytes = pe[0]
            if not q.try_publish(b, nbytes, self._tasks):
                return False
            pe.popleft()
        return True

    def has_backlog(self) -> bool:
        return bool(self.pending_emits or self._pending_acks) or any(self._bufs)

    # ---- routing changes (handed over by the worker, applied on the executor's thread) ----
    def set_routes(self, slot_queues: list, task_slot: dict[int, int]) -> None:
        self._new_routes = (list(slot_queues), dict(task_slot))

    def apply_routes(self) -> bool:
        """Take routes handed over by set_routes, if any: what is buffered goes out by the old map
        first (pendingEmits keep their queues). Whether there were new ones."""
        routes = self._new_routes
        if routes is None:
            return False
        self._new_routes = None
        self.flush()
        self._slot_queues, self._task_slot = routes
        self._bufs = [[] for _ in self._slot_queues]
        return True
