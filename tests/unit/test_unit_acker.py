"""Unit tests for the acker's pure XOR ledger (Storm's acker.clj)."""

from __future__ import annotations

import itertools
import random
from functools import reduce
from operator import xor

import pytest

from executor.acker import ACK, FAIL, AckerLedger

SPOUT_TASK = 7


def _rand64(rng: random.Random) -> int:
    return rng.getrandbits(64)


def _worked_example(n: int, seed: int):
    """The XOR ledger (docs/architecture.md, "The acker"; Storm's acker.clj) on a worked case:
    a spout emits to n bolts with edge ids id_1..id_n; each bolt_i emits a child with edge bid_i
    anchored to its input, then acks (id_i ^ bid_i); a final bolt acks every child (bid_i).
    Returns (root, init message, list of ack messages in a natural order)."""
    rng = random.Random(seed)
    root = _rand64(rng)
    ids = [_rand64(rng) for _ in range(n)]
    bids = [_rand64(rng) for _ in range(n)]
    init = ("init", root, reduce(xor, ids, 0), SPOUT_TASK)
    acks = []
    for i in range(n):
        # bolt_i: emit child (ack_val ^= bid_i), then ack its input: id_i ^ ack_val
        acks.append(("ack", root, ids[i] ^ bids[i]))
    for i in range(n):
        # the final bolt acks each child; it emitted nothing, so its ack_val is 0
        acks.append(("ack", root, bids[i] ^ 0))
    return root, init, acks, ids, bids


def _apply(ledger: AckerLedger, msg):
    kind = msg[0]
    if kind == "init":
        return ledger.init(msg[1], msg[2], msg[3])
    if kind == "ack":
        return ledger.ack(msg[1], msg[2])
    return ledger.fail(msg[1])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10])
def test_seed_001_xor_worked_example(n):
    root, init, acks, ids, bids = _worked_example(n, seed=n)
    ledger = AckerLedger()
    assert ledger.init(*init[1:]) is None
    # acker: 0 ^ (0 ^ id_1 ^ ... ^ id_n)
    assert ledger.value(root) == reduce(xor, ids, 0)
    expected = reduce(xor, ids, 0)
    for k, msg in enumerate(acks):
        expected ^= msg[2]
        result = _apply(ledger, msg)
        if k < len(acks) - 1:
            assert result is None, f"completed early at message {k}"
            assert ledger.value(root) == expected != 0
        else:
            assert result == (ACK, SPOUT_TASK, root)
    assert expected == 0
    assert ledger.value(root) is None and len(ledger) == 0


def test_bolt_emit_then_ack_cancels_its_own_edge():
    # bolt_1 ack : 0 ^ bid_1 ^ id_1 ^ bid_1 = 0 ^ id_1  -> removes id_1 from the chain
    rng = random.Random(1)
    root, id1, id2, bid1 = (_rand64(rng) for _ in range(4))
    ledger = AckerLedger()
    ledger.init(root, id1 ^ id2, SPOUT_TASK)
    ledger.ack(root, id1 ^ bid1)
    assert ledger.value(root) == id2 ^ bid1
    ledger.ack(root, bid1)
    assert ledger.value(root) == id2
    assert ledger.ack(root, id2) == (ACK, SPOUT_TASK, root)


@pytest.mark.parametrize("seed", range(12))
def test_any_arrival_order_completes_exactly_once_at_the_last_message(seed):
    """Acks may overtake the init (different paths): whatever the order, the outcome is
    reported exactly once, at the last message."""
    root, init, acks, _ids, _bids = _worked_example(4, seed=100 + seed)
    msgs = [init, *acks]
    random.Random(seed).shuffle(msgs)
    ledger = AckerLedger()
    results = [_apply(ledger, m) for m in msgs]
    assert results[:-1] == [None] * (len(msgs) - 1)
    assert results[-1] == (ACK, SPOUT_TASK, root)
    assert len(ledger) == 0


def test_all_orders_of_small_tree():
    root, init, acks, _ids, _bids = _worked_example(2, seed=3)
    for order in itertools.permutations([init, *acks]):
        ledger = AckerLedger()
        results = [_apply(ledger, m) for m in order]
        assert results.count(None) == len(order) - 1
        assert results[-1] == (ACK, SPOUT_TASK, root)


def test_acks_before_init_then_init_completes():
    rng = random.Random(9)
    root, edge = _rand64(rng), _rand64(rng)
    ledger = AckerLedger()
    assert ledger.ack(root, edge) is None  # spout task unknown yet
    assert ledger.value(root) == edge
    assert len(ledger) == 1
    assert ledger.init(root, edge, SPOUT_TASK) == (ACK, SPOUT_TASK, root)
    assert len(ledger) == 0


def test_no_report_after_completion():
    rng = random.Random(4)
    root, edge = _rand64(rng), _rand64(rng)
    ledger = AckerLedger()
    ledger.init(root, edge, SPOUT_TASK)
    assert ledger.ack(root, edge) == (ACK, SPOUT_TASK, root)
    # a stray duplicate ack for a finished root: no second outcome
    assert ledger.ack(root, edge) is None


def test_many_roots_are_independent():
    rng = random.Random(5)
    ledger = AckerLedger()
    trees = {}
    for task in range(1, 21):
        root, edge = _rand64(rng), _rand64(rng)
        trees[root] = (edge, task)
        assert ledger.init(root, edge, task) is None
    assert len(ledger) == 20
    outcomes = [ledger.ack(root, edge) for root, (edge, _task) in trees.items()]
    assert outcomes == [(ACK, task, root) for root, (_edge, task) in trees.items()]
    assert len(ledger) == 0


def test_zero_and_max_64_bit_values():
    ledger = AckerLedger()
    root = 2**64 - 1
    e1, e2 = 2**64 - 2, 1
    assert ledger.init(root, e1 ^ e2, 3) is None
    assert ledger.ack(root, e1) is None
    assert ledger.ack(root, e2) == (ACK, 3, root)
    # a spout tuple whose only edge is acked with the same id completes; root 0 works too
    assert ledger.init(0, 5, 1) is None
    assert ledger.ack(0, 5) == (ACK, 1, 0)


# ---------------------------------------------------------------- fail


def test_fail_after_init_reports_fail_once():
    rng = random.Random(6)
    root, e1, e2 = _rand64(rng), _rand64(rng), _rand64(rng)
    ledger = AckerLedger()
    ledger.init(root, e1 ^ e2, SPOUT_TASK)
    assert ledger.ack(root, e1) is None
    assert ledger.fail(root) == (FAIL, SPOUT_TASK, root)
    assert len(ledger) == 0
    # the other branch's late ack does not turn into an ack (nor another fail)
    assert ledger.ack(root, e2) is None


def test_fail_before_init_reports_once_the_spout_task_is_known():
    rng = random.Random(8)
    root, edge = _rand64(rng), _rand64(rng)
    ledger = AckerLedger()
    assert ledger.fail(root) is None  # spout task not known yet
    assert ledger.ack(root, edge) is None  # still failed; ack cannot rescue it
    assert ledger.init(root, edge, SPOUT_TASK) == (FAIL, SPOUT_TASK, root)
    assert len(ledger) == 0


def test_fail_wins_even_if_xor_reaches_zero():
    rng = random.Random(10)
    root, edge = _rand64(rng), _rand64(rng)
    ledger = AckerLedger()
    ledger.ack(root, edge)
    ledger.fail(root)
    assert ledger.init(root, edge, 2) == (FAIL, 2, root)


# ---------------------------------------------------------------- rotation


def test_rotate_drops_old_roots():
    ledger = AckerLedger()
    ledger.init(1, 11, SPOUT_TASK)
    assert ledger.rotate() == []
    ledger.init(2, 22, SPOUT_TASK)
    assert ledger.rotate() == [1]  # default 2 buckets: root 1 expired silently
    assert ledger.value(1) is None and ledger.value(2) == 22
    # a late ack for an expired root does not report anything
    assert ledger.ack(1, 11) is None
    assert ledger.rotate() == [2]
    assert ledger.rotate() == [1]  # the orphan entry created by the late ack expires too
    assert len(ledger) == 0


def test_rotate_with_three_buckets_keeps_roots_for_two_rotations():
    ledger = AckerLedger(num_buckets=3)
    ledger.init(5, 3, SPOUT_TASK)
    ledger.rotate()
    ledger.rotate()
    assert ledger.value(5) == 3
    assert ledger.ack(5, 3) == (ACK, SPOUT_TASK, 5)
    assert ledger.rotate() == []
