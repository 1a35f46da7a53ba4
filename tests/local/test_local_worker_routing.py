"""Workers follow an assignment change: an executor moved to a third worker, no restart."""

from __future__ import annotations

import threading

import pytest
from local_helpers import Shared, poll

from cluster_state.config import default_config
from executor.api import Bolt, Spout, TopologyBuilder
from executor.base import TopologyStatus
from executor.layout import compute_layout
from executor.transport import InProcessHub
from executor.worker import Worker, WorkerEvents, WorkerSpec

pytestmark = pytest.mark.timeout(60)


class Counter(Spout):
    def __init__(self, shared):
        self.shared = shared

    def declare_output_fields(self, d):
        d.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.n = 0

    def next_tuple(self):
        if self.n < self.shared.limit:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)

    def ack(self, msg_id):
        with self.shared.lock:
            self.shared.acked.add(msg_id)

    def fail(self, msg_id):
        self.shared.failed.append(msg_id)


class Where(Bolt):
    def __init__(self, shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.port = context.this_worker_port

    def execute(self, tup):
        with self.shared.lock:
            self.shared.seen.append((self.port, tup.values[0]))
        self.collector.ack(tup)


def test_a_moved_executor_is_followed_without_restarting_the_sender():
    shared = Shared()
    shared.limit = 10**9
    shared.acked = set()
    shared.failed = []
    b = TopologyBuilder()
    b.set_spout("counter", Counter(shared))
    b.set_bolt("where", Where(shared)).shuffle_grouping("counter")
    topo = b.create_topology()
    conf = {**default_config(), "topology.acker.executors": 1, "topology.message.timeout.secs": 5}
    layout = compute_layout(topo, conf, 2)
    spout_ex, bolt_ex, acker_ex = layout.executors["counter"][0], layout.executors["where"][0], \
        layout.executors["__acker"][0]
    a, b_addr, c = ("w", 1), ("w", 2), ("w", 3)
    hub = InProcessHub()
    status = TopologyStatus(True)
    died = []
    events = WorkerEvents(lambda *e: None, lambda w, err: died.append(err))

    def task_address(bolt_at):
        out = {t: a for t in range(spout_ex[0], spout_ex[1] + 1)}
        out.update({t: a for t in range(acker_ex[0], acker_ex[1] + 1)})
        out.update({t: bolt_at for t in range(bolt_ex[0], bolt_ex[1] + 1)})
        return out

    def worker(addr, executors, bolt_at):
        spec = WorkerSpec("t-1-1", conf, layout, tuple(executors), addr, task_address(bolt_at), port=addr[1])
        return Worker(spec, topo, hub.transport(), status, events)

    wa = worker(a, [spout_ex, acker_ex], b_addr)
    wb = worker(b_addr, [bolt_ex], b_addr)
    wc = worker(c, [bolt_ex], c)
    started = []
    try:
        for w in (wb, wa):
            w.start()
            started.append(w)
        poll(lambda: any(p == 2 for p, _ in shared.seen), message="tuples reaching worker 2")
        wc.start()
        started.append(wc)
        assert wa.update_routing(task_address(c)) is True
        assert wa.update_routing(task_address(c)) is False  # unchanged: nothing to do
        wb.stop()
        mark = len(shared.seen)
        poll(lambda: any(p == 3 for p, _ in shared.seen[mark:]), message="tuples reaching worker 3")
        shared.limit = 0  # stop emitting; everything in flight must still be acked or failed
        acked = len(shared.acked)
        poll(lambda: len(shared.acked) > acked, message="acks from worker 3")
        assert died == []
        assert [t.name for t in threading.enumerate() if t.name.endswith(str(b_addr))] == []
    finally:
        for w in reversed(started):
            w.stop()
