"""The checkpoint protocol's pure parts: the checkpoint spout's transaction states (Storm's
CheckPointState), the barrier count, and barrier alignment in exactly-once mode."""

from types import SimpleNamespace

import pytest

from executor.checkpoint.forwarder import CheckpointForwarder
from executor.checkpoint.protocol import (
    ALIGNMENT_BOUNDS_MS,
    CHECKPOINT_COMPONENT,
    CHECKPOINT_STREAM,
    COMMIT,
    COMMITTED,
    COMMITTING,
    INITSTATE,
    PREPARE,
    PREPARING,
    ROLLBACK,
    Barrier,
    TxState,
    alignment_buckets,
    percentile_bound,
)
from executor.structure import Grouping, Subscription
from executor.tuple import Fields, Tuple

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("state, recovering, action, after", [
    (TxState(-1, COMMITTED), True, INITSTATE, TxState(-1, COMMITTED)),
    (TxState(-1, COMMITTED), False, PREPARE, TxState(0, PREPARING)),
    (TxState(0, PREPARING), False, PREPARE, TxState(0, COMMITTING)),
    (TxState(0, PREPARING), True, ROLLBACK, TxState(-1, COMMITTED)),
    (TxState(0, COMMITTING), False, COMMIT, TxState(0, COMMITTED)),
    (TxState(0, COMMITTING), True, COMMIT, TxState(0, COMMITTED)),
])
def test_transaction_states_follow_storms_table(state, recovering, action, after):
    assert state.next_action(recovering) == action
    assert state.next_state(recovering) == after


def test_transaction_state_round_trips_and_refuses_garbage():
    assert TxState.from_wire(TxState(3, COMMITTING).to_wire()) == TxState(3, COMMITTING)
    with pytest.raises(ValueError, match="not a checkpoint transaction state"):
        TxState.from_wire(["3", "DONE"])


def test_barrier_acts_once_every_input_task_sent_its_copy():
    b = Barrier(3)
    assert not b.arrive(PREPARE, 1)
    assert not b.arrive(PREPARE, 1)
    assert not b.arrive(COMMIT, 0)
    assert b.arrive(PREPARE, 1)
    assert not b.arrive(PREPARE, 1)  # counting starts over for a repeat
    b.clear()
    assert not b.arrive(COMMIT, 0) and not b.arrive(COMMIT, 0) and b.arrive(COMMIT, 0)


class _Collector:
    def __init__(self):
        self.events = []

    def ack(self, tup):
        self.events.append(("ack", tup.source_task, list(tup.values)))

    def fail(self, tup):
        self.events.append(("fail", tup.source_task, list(tup.values)))

    def emit(self, values, anchors=None, stream="default"):
        self.events.append(("emit", stream, list(values)))
        return []

    def begin_barriers(self):
        pass

    def end_barriers(self):
        pass

    def report_error(self, exc):
        self.events.append(("error", str(exc)))


class _Inner:
    def __init__(self, log):
        self.log = log

    def prepare(self, conf, context, collector):
        pass

    def execute(self, tup):
        self.log.append(("execute", tup.source_task, tup.values[0]))


def _context(input_tasks=(1, 2)):
    comp = SimpleNamespace(inputs=(Subscription("up", "default", Grouping("shuffle")),
                                   Subscription("up", CHECKPOINT_STREAM, Grouping("all"))))
    return SimpleNamespace(topology=SimpleNamespace(components={"me": comp}), this_component_id="me",
                           this_task_id=9, this_task_index=0, component_tasks=lambda c: list(input_tasks))


def _data(task, v):
    return (9, Tuple([v], task, "default", "up", Fields(["v"]), None))


def _cp(task, action, txid):
    return (9, Tuple([txid, action], task, CHECKPOINT_STREAM, "up", Fields(["txid", "action"]), None))


def _as_executed(fw):
    """As the bolt executor runs it (executor/bolt.py): each batch, then what it kept for later
    (drain) before the next batch."""
    run = fw.execute_batch

    def execute_batch(batch):
        run(batch)
        while fw.drain(1000):
            pass

    fw.execute_batch = execute_batch
    return fw


def _forwarder(exactly_once, inner=None, restored=True):
    """`restored`: the INITSTATE of a topology's start has passed (what an exactly-once task
    needs before a PREPARE)."""
    collector = _Collector()
    fw = _as_executed(CheckpointForwarder(inner or _Inner(collector.events)))
    fw.prepare({"topology.state.exactly.once": exactly_once}, _context(), collector)
    if restored:  # a topology's start: a ROLLBACK, then the INITSTATE
        fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0), _cp(1, INITSTATE, -1), _cp(2, INITSTATE, -1)])
        collector.events.clear()
    return fw, collector


def test_a_task_started_afresh_fails_prepares_until_a_rollback_reached_it():
    # exactly-once: its worker died, so tuples in flight to it may be lost (executor/checkpoint/barrier_mode.py)
    fw, c = _forwarder(True, restored=False)
    fw.execute_batch([_cp(1, PREPARE, 3), _cp(2, PREPARE, 3)])
    assert [e[0] for e in c.events] == ["ack", "fail"]  # the first copy waits, the barrier's step fails
    c.events.clear()
    fw.execute_batch([_cp(1, ROLLBACK, 3), _cp(2, ROLLBACK, 3), _cp(1, PREPARE, 3), _cp(2, PREPARE, 3)])
    assert [e for e in c.events if e[0] in ("emit", "fail")] == [("emit", CHECKPOINT_STREAM, [3, ROLLBACK]),
                                                                  ("emit", CHECKPOINT_STREAM, [3, PREPARE])]
    # an INITSTATE alone is not enough: it rewinds no spout, and what was sent to the task's
    # previous run after the recovery's ROLLBACK may have died with it
    fw, c = _forwarder(True, restored=False)
    fw.execute_batch([_cp(1, INITSTATE, -1), _cp(2, INITSTATE, -1), _cp(1, PREPARE, 4), _cp(2, PREPARE, 4)])
    assert [e for e in c.events if e[0] in ("emit", "fail")] == [("emit", CHECKPOINT_STREAM, [-1, INITSTATE]),
                                                                  ("fail", 2, [4, PREPARE])]
    # Storm's own (at-least-once) mode passes a PREPARE on at once, as Storm's forwarder does
    fw, c = _forwarder(False, restored=False)
    fw.execute_batch([_cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert ("emit", CHECKPOINT_STREAM, [0, PREPARE]) in c.events


def test_a_gap_fails_the_next_prepare_of_the_workers_bolts_until_a_rollback():
    from executor.checkpoint.barrier_mode import WorkerLosses
    from executor.transport.sequenced import LinkGap

    losses = WorkerLosses("w1")
    c = _Collector()
    fw = _as_executed(CheckpointForwarder(_Inner(c.events), losses))
    fw.prepare({"topology.state.exactly.once": True}, _context(), c)
    fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0), _cp(1, INITSTATE, -1), _cp(2, INITSTATE, -1)])
    losses.gap(LinkGap(1, 3, 5))
    c.events.clear()
    fw.execute_batch([_cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert c.events[-1] == ("fail", 2, [0, PREPARE])
    fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0), _cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert c.events[-2:] == [("emit", CHECKPOINT_STREAM, [0, PREPARE]), ("ack", 2, [0, PREPARE])]
    # a tuple failed in the worker since (whenever the rollback it asks for arrives): the same
    losses.failed()
    fw.execute_batch([_cp(1, PREPARE, 1), _cp(2, PREPARE, 1)])
    assert c.events[-1] == ("fail", 2, [1, PREPARE])


class _Holding(_Inner):
    """A bolt whose output leaves the topology: it holds what it gets, prepares it at a PREPARE,
    publishes it at a COMMIT (as the Spark sink's rows)."""

    def __init__(self, log, ok=True):
        super().__init__(log)
        self.held, self.prepared, self.ok = [], {}, ok

    def execute(self, tup):
        self.held.append(tup.values[0])

    def prepare_output(self, txid):
        self.log.append(("prepared", txid, list(self.held)))
        self.prepared[txid], self.held = self.held, []
        return self.ok

    def commit_output(self, txid):
        for t in sorted(t for t in self.prepared if t <= txid):
            self.log.append(("published", t, self.prepared.pop(t)))
        return True

    def rollback_output(self, txid):
        self.log.append(("discarded", sorted(self.prepared), list(self.held)))
        self.prepared, self.held = {}, []


def test_an_output_is_prepared_at_the_barrier_published_at_commit_and_discarded_at_rollback():
    events = []
    fw, c = _forwarder(True, _Holding(events))
    events.clear()  # the start's ROLLBACK discarded nothing
    fw.execute_batch([_data(1, "a"), _data(2, "b"), _cp(1, PREPARE, 0), _cp(2, PREPARE, 0), _data(1, "c")])
    assert events == [("prepared", 0, ["a", "b"])]  # "c" came after the barrier: the next checkpoint's
    assert ("emit", CHECKPOINT_STREAM, [0, PREPARE]) in c.events
    fw.execute_batch([_cp(1, COMMIT, 0), _cp(2, COMMIT, 0)])
    assert events[-1] == ("published", 0, ["a", "b"])
    fw.execute_batch([_data(2, "d"), _cp(1, PREPARE, 1), _cp(2, PREPARE, 1), _cp(1, ROLLBACK, 1), _cp(2, ROLLBACK, 1)])
    assert events[-1] == ("discarded", [1], [])
    events.clear()
    fw, c = _forwarder(True, _Holding(events, ok=False))
    events.clear()
    fw.execute_batch([_data(1, "a"), _cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert events == [("prepared", 0, ["a"])]
    assert [e for e in c.events if e[0] in ("emit", "fail")] == [("fail", 2, [0, PREPARE])]
    # Storm's own mode: the bolt is only forwarded through
    events.clear()
    fw, c = _forwarder(False, _Holding(events))
    fw.execute_batch([_data(1, "a"), _cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert events == []


def test_aligned_barrier_holds_an_input_until_every_input_sent_it():
    fw, c = _forwarder(True)
    fw.execute_batch([_data(1, "a"), _cp(1, PREPARE, 0), _data(1, "b-after"), _data(2, "c")])
    fw.execute_batch([_data(1, "d-after"), _cp(2, PREPARE, 0), _data(2, "e-after")])
    order = [e for e in c.events if e[0] in ("execute", "emit")]
    assert order == [("execute", 1, "a"), ("execute", 2, "c"), ("emit", CHECKPOINT_STREAM, [0, PREPARE]),
                     ("execute", 1, "b-after"), ("execute", 1, "d-after"), ("execute", 2, "e-after")]


def test_what_an_alignment_held_is_executed_a_chunk_per_step_in_order_before_new_input():
    # a long alignment's release goes through the executor's steps (and their back-pressure),
    # never all at once in one step
    c = _Collector()
    fw = CheckpointForwarder(_Inner(c.events))
    fw.prepare({"topology.state.exactly.once": True}, _context(), c)
    fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0), _cp(1, INITSTATE, -1), _cp(2, INITSTATE, -1)])
    assert fw.drains and fw.drain(10) == 2 and fw.drain(10) == 0  # the INITSTATEs after the ROLLBACK's alignment
    held = [_data(1, f"h{i}") for i in range(25)]
    fw.execute_batch([_cp(1, PREPARE, 0), *held, _data(2, "x")])
    fw.execute_batch([_cp(2, PREPARE, 0), _data(2, "after")])
    c.events.clear()
    fw.execute_batch([_data(1, "new")])  # taken while some is kept: it goes after, not before
    assert c.events == []
    assert [fw.drain(10), fw.drain(10), fw.drain(10), fw.drain(10)] == [10, 10, 7, 0]
    assert [e[2] for e in c.events if e[0] == "execute"] == [f"h{i}" for i in range(25)] + ["after", "new"]
    # the next alignment: input 1 held until input 2 sent its copy, then drained after
    fw.execute_batch([_cp(1, PREPARE, 1), _data(1, "held-1")])
    fw.execute_batch([_data(2, "y"), _cp(2, PREPARE, 1), _data(2, "z")])
    c.events.clear()
    while fw.drain(1):
        pass
    assert [e[2] for e in c.events if e[0] == "execute"] == ["held-1", "z"]


def test_an_alignment_holding_many_tuples_refuses_the_local_inputs_whose_barrier_came():
    # Refused at the queue (back-pressure), for a bounded time from the alignment's start;
    # released with what it held once the barrier's last copy came.
    from executor.checkpoint.forwarder import HOLD_BEFORE_REFUSING, REFUSE_SECS

    refusals = []
    fw, c = _forwarder(True)
    fw.refuse_with(lambda tasks, until: refusals.append((set(tasks), until)))
    fw.execute_batch([_cp(1, PREPARE, 0), *[_data(1, i) for i in range(HOLD_BEFORE_REFUSING - 1)]])
    assert refusals == []  # a short alignment never refuses
    fw.execute_batch([_data(1, "one more"), _data(2, "flows")])
    (tasks, until), = refusals
    assert tasks == {1} and 0 < until - fw._aligning_since <= REFUSE_SECS
    assert [e[1:] for e in c.events if e[0] == "execute"] == [(2, "flows")]
    fw.execute_batch([_cp(2, PREPARE, 0)])
    assert refusals[-1] == (set(), 0.0)  # the refusal ends with the alignment
    executed = [e[2] for e in c.events if e[0] == "execute"]
    assert executed == ["flows", *range(HOLD_BEFORE_REFUSING - 1), "one more"]


def test_a_queue_refuses_only_local_executors_all_of_whose_tasks_it_names_and_only_until_told():
    import time

    from executor.receive_queue import ReceiveQueue

    q = ReceiveQueue(100, "q")
    q.refuse({1, 2}, time.monotonic() + 60)
    assert not q.try_publish([("x", 1)], 0, (1,))        # an executor whose barrier came
    assert not q.try_publish([("x", 1)], 0, (1, 2))
    assert q.try_publish([("x", 1)], 0, (1, 3))          # one of its tasks still before it
    assert q.try_publish([("x", 1)], 0, None)            # another worker's (a shared link)
    assert q.try_publish([("x", 1)])
    q.refuse({1}, time.monotonic() - 1)                  # past its time: refused no more
    assert q.try_publish([("x", 1)], 0, (1,))
    q.refuse({1}, time.monotonic() + 60)
    q.refuse((), 0.0)
    assert q.try_publish([("x", 1)], 0, (1,))


def test_a_commit_is_not_aligned_input_flows_while_its_copies_arrive():
    fw, c = _forwarder(True)
    fw.execute_batch([_cp(1, PREPARE, 0), _cp(2, PREPARE, 0), _cp(1, COMMIT, 0), _data(1, "a"), _data(2, "b")])
    fw.execute_batch([_data(1, "c"), _cp(2, COMMIT, 0)])
    order = [e[1:] for e in c.events if e[0] in ("execute", "emit")]
    assert order == [(CHECKPOINT_STREAM, [0, PREPARE]), (1, "a"), (2, "b"), (1, "c"), (CHECKPOINT_STREAM, [0, COMMIT])]


def test_unaligned_barrier_lets_every_input_flow_as_storm_does():
    fw, c = _forwarder(False)
    fw.execute_batch([_cp(1, PREPARE, 0), _data(1, "b"), _cp(2, PREPARE, 0)])
    order = [e for e in c.events if e[0] in ("execute", "emit")]
    assert order == [("execute", 1, "b"), ("emit", CHECKPOINT_STREAM, [0, PREPARE])]


def test_alignment_gives_up_when_another_transaction_arrives_from_a_silent_input():
    fw, c = _forwarder(True)
    # task 2's PREPARE 0 was lost (its worker died); the rollback comes from both
    fw.execute_batch([_cp(1, PREPARE, 0), _data(1, "held"), _cp(2, ROLLBACK, 0), _cp(1, ROLLBACK, 0)])
    order = [e for e in c.events if e[0] in ("execute", "emit")]
    assert order == [("execute", 1, "held"), ("emit", CHECKPOINT_STREAM, [0, ROLLBACK])]
    fw.execute_batch([_cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])  # the txid again, counted afresh
    assert c.events[-2] == ("emit", CHECKPOINT_STREAM, [0, PREPARE])


def test_a_state_that_cannot_be_opened_is_reported_and_tried_again_a_second_later():
    from executor.checkpoint.opener import StateOpener

    now = [100.0]
    reports = []
    conf = {"topology.state.provider": "redis", "topology.state.provider.config": {"host": "127.0.0.1", "port": 1,
                                                                                    "timeout": 0.5}}
    opener = StateOpener(conf, "t/c-1", reports.append, clock=lambda: now[0])
    assert opener.open() is None and len(reports) == 1 and "127.0.0.1:1" in str(reports[0])
    assert opener.open() is None and len(reports) == 1  # not before a second has passed
    now[0] += 1.0
    assert opener.open() is None and len(reports) == 2
    opener.conf = {"topology.state.provider": "memory"}
    now[0] += 1.0
    assert opener.open() is not None and opener.open() is opener.state


class _SpoutCollector:
    def __init__(self):
        self.emitted = []
        self.errors = []

    def emit(self, values, stream="default", msg_id=None):
        self.emitted.append(list(values))

    def emit_to_tasks(self, tasks, values, stream, msg_id):
        self.emitted.append(list(values))

    def begin_barriers(self):
        pass

    def end_barriers(self):
        pass

    def report_error(self, exc):
        self.errors.append(str(exc))


def _checkpoint_spout(monkeypatch, now: list, conf: dict):
    """A CheckpointSpout opened with `conf` (memory state, no stateful spouts) on a clock that
    reads `now[0]`, and its collector."""
    import executor.checkpoint.spout as cps

    monkeypatch.setattr(cps.time, "monotonic", lambda: now[0])
    structure = SimpleNamespace(spouts={})
    context = SimpleNamespace(topology=SimpleNamespace(structure=structure), this_component_id="$checkpointspout",
                              this_task_id=1, this_task_index=0, storm_id=f"{conf['topology.name']}-1",
                              component_tasks=lambda c: [])
    spout = cps.CheckpointSpout()
    c = _SpoutCollector()
    spout.open(conf, context, c)
    return spout, c


def test_failed_checkpoint_steps_are_retried_with_a_growing_back_off(monkeypatch):
    # A hook that raises every time (here: every step fails) must not flood the topology with
    # checkpoint tuples: each retry waits twice as long as the last, up to 5 s.
    now = [1000.0]
    spout, c = _checkpoint_spout(monkeypatch, now, {"topology.name": "backoff", "topology.state.exactly.once": True})
    waits = []
    for _ in range(8):
        spout.next_tuple()
        assert len(c.emitted) == 1, c.emitted  # the recovery's step, once
        spout.fail(c.emitted.pop()[0])
        start = now[0]
        while True:  # step the clock until the spout emits again
            now[0] += 0.01
            spout.next_tuple()
            if c.emitted:
                break
        waits.append(round(now[0] - start, 1))
    assert waits[:3] == [0.1, 0.2, 0.4] and waits[-1] == 5.0, waits
    assert all(a <= b for a, b in zip(waits, waits[1:])), waits
    spout.ack(c.emitted.pop()[0])  # a step that goes through ends the back-off
    assert spout._retry_secs == 0


def test_a_spout_at_max_spout_pending_gets_the_next_checkpoint_without_the_interval(monkeypatch):
    now = [1000.0]
    spout, c = _checkpoint_spout(monkeypatch, now, {"topology.name": "wanted", "topology.state.exactly.once": True,
                                                    "topology.state.checkpoint.interval.ms": 1000})

    def step() -> list | None:
        spout.next_tuple()
        if not c.emitted:
            return None
        txid, action = c.emitted.pop()
        spout.ack(txid)
        return [txid, action]

    while spout._recovering:  # the start's ROLLBACK and INITSTATE
        assert step() is not None
    assert step() == [0, PREPARE] and step() == [0, COMMIT]
    now[0] += 0.2
    assert step() is None  # the interval has not passed
    spout.request_checkpoint(5)
    assert step() == [1, PREPARE] and step() == [1, COMMIT]
    assert step() is None  # asked once: the next waits for the interval again
    now[0] += 1.0
    assert step() == [2, PREPARE]


def test_a_hook_that_raises_is_one_error_naming_the_component_and_the_hook():
    from executor.checkpoint.protocol import CheckpointHookError, call_hook

    def pre_rollback():
        raise KeyError("k")

    try:
        call_hook("stateful bolt sum:7", "pre_rollback", pre_rollback)
    except CheckpointHookError as exc:
        assert str(exc) == ("stateful bolt sum:7: its pre_rollback raised KeyError: 'k'; the checkpoint step "
                            "is retried")
    else:
        raise AssertionError("no error")
    try:
        call_hook("stateful bolt sum:7", "pre_commit", lambda txid: 1 / 0, 12)
    except CheckpointHookError as exc:
        assert "its pre_commit of txid 12 raised ZeroDivisionError" in str(exc)


class _Step:
    """A checkpoint tuple as a stateful spout task receives it: (txid, action), one anchor."""

    def __init__(self, txid: int, action: str):
        self.values = [txid, action]
        self.anchors_to_ids = {7: 1}


def _spout_barriers(wants_acks: bool, conf=None):
    """SpoutBarriers over an executor of two tasks whose spouts take every step."""
    from executor.checkpoint.spout_side import SpoutBarriers

    acked, counted = [], []
    spout = SimpleNamespace(wants_acks=lambda: wants_acks, handle_checkpoint=lambda action, txid: True)
    route = SimpleNamespace(targets=lambda values: [9])
    context = SimpleNamespace(component_tasks=lambda cid: [7] if cid == CHECKPOINT_COMPONENT else [])
    sent = []  # what the executor's outbox sent: (task, payload)
    ex = SimpleNamespace(
        task_ids=[1, 2], component_id="numbers", conf=conf or {}, spout_active=True, w=SimpleNamespace(objs={1: spout, 2: spout},
                                                                   routes={1: {CHECKPOINT_STREAM: route},
                                                                           2: {CHECKPOINT_STREAM: route}},
                                                                   contexts={1: context, 2: context}),
        outbox=SimpleNamespace(emit_rooted=lambda *a: 0, ack_value=lambda root, value: None,
                               begin_barriers=lambda: None, end_barriers=lambda: None,
                               send=lambda task, payload: sent.append((task, payload)), sent=sent),
        ack_committed=lambda task, msg_id, stream: acked.append(msg_id),
        count_committed=lambda stream, n: counted.append(n))
    return SpoutBarriers(ex), acked, counted


def test_a_deactivated_spout_marks_the_first_checkpoint_it_passed_on_behind_its_last_tuple():
    """quiet_since_txid (storm-py swap waits for it): the first PREPARE handled while the spout
    was deactivated; none while active, and reset by an activation."""
    barriers, _acked, _counted = _spout_barriers(wants_acks=False)

    def prepare(txid):
        barriers.on_barrier(1, _Step(txid, PREPARE))

    prepare(1)
    assert barriers.quiet_since is None
    barriers.ex.spout_active = False
    prepare(2)
    prepare(3)
    assert barriers.quiet_since == 2
    barriers.ex.spout_active = True
    prepare(4)
    assert barriers.quiet_since is None


def test_a_spout_holds_back_while_the_checkpoint_it_passed_on_is_under_way_too_long(monkeypatch):
    from executor.checkpoint import spout_side

    now = [100.0]
    monkeypatch.setattr(spout_side, "time", SimpleNamespace(monotonic=lambda: now[0]))
    b, _, _ = _spout_barriers(True, {"topology.state.exactly.once": True,
                                     "topology.state.checkpoint.pause.after.ms": 500})
    b.on_barrier(1, _Step(4, PREPARE))
    now[0] += 0.4
    b.on_barrier(2, _Step(4, PREPARE))  # the executor's other task: still timed from the first
    assert not b.behind()
    now[0] += 0.2
    assert b.behind()
    b.on_barrier(1, _Step(3, COMMIT))  # an older transaction's commit: still behind
    assert b.behind()
    b.on_barrier(1, _Step(4, COMMIT))
    assert not b.behind()
    b.on_barrier(1, _Step(5, PREPARE))
    now[0] += 1.0
    assert b.behind()
    b.on_barrier(1, _Step(5, ROLLBACK))
    assert not b.behind()
    # null, or Storm's own mode: never
    for conf in ({"topology.state.exactly.once": True, "topology.state.checkpoint.pause.after.ms": None},
                 {"topology.state.exactly.once": False, "topology.state.checkpoint.pause.after.ms": 500}):
        b, _, _ = _spout_barriers(True, conf)
        b.on_barrier(1, _Step(1, PREPARE))
        now[0] += 60
        assert not b.behind()


@pytest.mark.parametrize("wants_acks", [True, False])
def test_a_spouts_tuples_are_pending_until_the_checkpoint_after_them_commits(wants_acks):
    # what topology.max.spout.pending bounds in exactly-once mode (executor/spout.py)
    b, acked, counted = _spout_barriers(wants_acks)
    for n in range(3):
        b.emitted(1, n, "default")
    b.emitted(2, 3, "default")
    b.on_barrier(1, _Step(1, PREPARE))
    b.on_barrier(2, _Step(1, PREPARE))
    b.emitted(1, 4, "default")  # after the barrier: the next checkpoint's
    assert b.uncommitted == 5
    b.on_barrier(1, _Step(1, COMMIT))
    assert b.uncommitted == 2
    b.on_barrier(2, _Step(1, COMMIT))
    assert b.uncommitted == 1
    assert (acked, sum(counted)) == (([0, 1, 2, 3], 0) if wants_acks else ([], 4))
    # a rollback drops what was emitted since the last commit, prepared or not: sent again later
    b.on_barrier(1, _Step(2, PREPARE))
    b.emitted(1, 5, "default")
    b.on_barrier(1, _Step(2, ROLLBACK))
    assert b.uncommitted == 0


def test_max_spout_pending_bounds_what_runs_ahead_of_the_checkpoint_and_asks_for_the_next():
    # exactly-once mode: the bound counts tuples no PREPARE has followed (SpoutBarriers.ahead);
    # a spout at it asks the checkpoint spout (task 7) once until the next step passes
    from executor.serialization import CHECKPOINT_WANTED

    b, _acked, _counted = _spout_barriers(True)
    for n in range(3):
        b.emitted(1, n, "default")
    b.emitted(2, 3, "default")
    assert (b.ahead, b.uncommitted) == (4, 4)
    b.want_checkpoint()
    b.want_checkpoint()
    assert b.ex.outbox.sent == [(7, (CHECKPOINT_WANTED, 1))]
    b.on_barrier(1, _Step(1, PREPARE))
    assert (b.ahead, b.uncommitted) == (1, 4)  # task 2's tuple is still ahead of its barrier
    b.on_barrier(2, _Step(1, PREPARE))
    b.emitted(1, 4, "default")
    assert (b.ahead, b.uncommitted) == (1, 5)
    b.want_checkpoint()  # a step passed since the last ask: asked again
    assert len(b.ex.outbox.sent) == 2
    b.on_barrier(1, _Step(1, COMMIT))
    b.on_barrier(2, _Step(1, COMMIT))
    assert (b.ahead, b.uncommitted) == (1, 1)
    b.on_barrier(1, _Step(2, ROLLBACK))
    assert (b.ahead, b.uncommitted) == (0, 0)


@pytest.mark.parametrize("durable, committed, target, plan", [
    (False, 4, 4, "restore"),    # the normal rollback, memory or durable
    (True, 4, 4, "restore"),
    (False, None, -1, "restore"),  # a topology's start: nothing committed anywhere
    (True, None, -1, "restore"),
    (False, None, 4, "lost"),    # a restarted task's empty memory state: its part of checkpoint 4 is gone
    (True, None, 4, "restore"),  # durable: a task with nothing committed yet has nothing to lose
    (False, 7, -1, "reset"),     # the checkpoint spout's record was lost with its worker: start afresh
    (True, 7, -1, "behind"),     # a durable state ahead of the record: refused, never wiped
    (False, 2, 4, "lost"),
])
def test_restore_plan_of_an_exactly_once_rollback(durable, committed, target, plan):
    from executor.checkpoint.protocol import restore_plan

    assert restore_plan(durable, committed, target) == plan


def test_exactly_once_a_rollback_older_than_the_last_txid_is_followed_not_ignored():
    # The checkpoint spout's worker died with the memory provider: it starts again from txid -1
    # and rolls back to it; a bolt at txid 12 passes the ROLLBACK on (Storm's mode ignores it).
    fw, c = _forwarder(True)
    fw.execute_batch([_cp(1, PREPARE, 12), _cp(2, PREPARE, 12), _cp(1, COMMIT, 12), _cp(2, COMMIT, 12)])
    c.events.clear()
    fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0), _cp(1, INITSTATE, -1), _cp(2, INITSTATE, -1),
                      _cp(1, PREPARE, 0), _cp(2, PREPARE, 0)])
    assert [e[2] for e in c.events if e[0] == "emit"] == [[0, ROLLBACK], [-1, INITSTATE], [0, PREPARE]]
    fw, c = _forwarder(False)
    fw.execute_batch([_cp(1, PREPARE, 12), _cp(2, PREPARE, 12), _cp(1, COMMIT, 12), _cp(2, COMMIT, 12)])
    c.events.clear()
    fw.execute_batch([_cp(1, ROLLBACK, 0), _cp(2, ROLLBACK, 0)])
    assert [e for e in c.events if e[0] == "emit"] == []


def test_a_memory_state_reset_is_empty_with_nothing_committed_and_a_durable_one_refuses():
    from executor.state.errors import StateTransactionError
    from executor.state.kv import KeyValueState
    from executor.state.memory import InMemoryKeyValueState

    s = InMemoryKeyValueState("t/c-1")
    s.put("sum", 10)
    s.prepare_commit(3)
    s.commit(3)
    s.put("sum", 11)
    s.reset()
    assert (s.get("sum"), s.keys(), s.committed_txid(), s.prepared_txid()) == (None, [], None, None)
    s.put("sum", 1)
    s.prepare_commit(0)
    s.commit(0)
    assert (s.get("sum"), s.committed_txid()) == (1, 0)
    with pytest.raises(StateTransactionError, match="durable"):
        KeyValueState("t/c-2").reset()


def test_inputs_are_counted_at_once_when_shared_and_one_by_one_when_mixed():
    from executor.core.collectors import count_inputs
    from executor.tuple import Fields, Tuple

    def tup(component, stream):
        return Tuple([1], 7, stream, component, Fields(["n"]), None)

    sole = {"$checkpoint": "split"}  # "default" comes from split and parse
    counts = {("split", "$checkpoint"): 2}
    count_inputs(counts, [tup("split", "$checkpoint")] * 3, sole)  # at once
    assert counts == {("split", "$checkpoint"): 5}
    count_inputs(counts, [tup("split", "default"), tup("split", "$checkpoint"), tup("parse", "default")], sole)
    assert counts == {("split", "$checkpoint"): 6, ("split", "default"): 1, ("parse", "default"): 1}
    batch = [tup("parse", "default"), tup("split", "default")]  # one stream, two senders
    count_inputs(counts, iter(batch), sole, [t.source_stream for t in batch])
    assert counts == {("split", "$checkpoint"): 6, ("split", "default"): 2, ("parse", "default"): 2}


def test_every_alignment_is_counted_in_the_gauges_buckets():
    fw, _ = _forwarder(True)
    for txid in range(3):
        fw.execute_batch([_cp(1, PREPARE, txid), _cp(2, PREPARE, txid)])
    g = fw.gauges()
    assert g["checkpoint_alignment_count"] == 3 and g["checkpoint_alignment_le_1"] == 3
    assert g["checkpoint_alignment_le_5000"] == 3 and g["checkpoint_alignment_sum_ms"] < 3
    counts = [0] * len(ALIGNMENT_BOUNDS_MS)
    for ms in (0.0, 1.0, 1.5, 100.0, 9999.0):
        alignment_buckets(counts, ms)
    assert dict(zip(ALIGNMENT_BOUNDS_MS, counts)) == {1: 2, 5: 3, 10: 3, 25: 3, 50: 3, 100: 4, 250: 4, 500: 4,
                                                      1000: 4, 2500: 4, 5000: 4}
    assert percentile_bound(counts, 5, 0.6) == 5.0 and percentile_bound(counts, 5, 0.99) == float("inf")
    assert percentile_bound([0] * len(counts), 0, 0.99) is None
