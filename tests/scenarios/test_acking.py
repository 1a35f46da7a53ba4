"""Storm's acking scenarios, each on a LocalCluster and on the dev cluster (two or three worker
processes): a bolt acking without emitting, fan-out, multi-anchoring, anchoring twice, explicit
fail, timeout and replay, no ackers, acks across workers, max spout pending.

"The spout's ack came only after X" is checked by ordering records on the machine-wide
monotonic clock (X's record is written before the ack it describes), not by timing."""

import pytest

pytestmark = pytest.mark.timeout(150)

# Timeouts, replays and acks crossing processes: on a cluster in both executor arrangements
# (tests/scenarios/conftest.py).
DEDICATED_ON_A_CLUSTER = True


def _after(record: dict, *earlier: dict) -> bool:
    return all(record["t"] > e["t"] for e in earlier)


def test_bolt_that_acks_without_emitting(cluster):
    run = cluster.submit("ack_without_emit.py", "acks")
    r = run.results
    run.wait(lambda: sorted(r.ids("ack")) == ["m1", "m2"], "both messages acked")
    assert r.ids("fail") == []
    assert sorted(v for (v,) in r.values("got", "ack")) == [1, 2]


def test_fan_out_completes_only_when_both_branches_are_done(cluster):
    run = cluster.submit("fan_out.py", "fanout")
    r = run.results
    run.wait(lambda: r.values("held", "a") and r.values("held", "b"), "both branches to receive the tuple")
    run.release("a", 1)
    run.wait(lambda: r.records("a", "acked"), "branch a to ack")
    assert r.ids("ack") == []  # branch b still holds its tuple
    run.release("b", 1)
    run.wait(lambda: r.ids("ack") == [1], "the tree to complete")
    (ack,) = r.records("spout", "ack")
    assert _after(ack, *r.records("a", "acked"), *r.records("b", "acked"))
    assert r.ids("fail") == []


def test_aggregator_multi_anchoring_completes_all_roots_only_when_output_acked(cluster):
    run = cluster.submit("aggregate.py", "agg")
    r = run.results
    run.wait(lambda: len(r.values("held", "agg")) == 3, "the aggregator to hold three inputs")
    run.release("agg", 3)
    run.wait(lambda: r.values("held", "down"), "the aggregate to arrive downstream")
    run.wait(lambda: len(r.records("agg", "acked")) == 3, "the aggregator to ack its inputs")
    assert r.ids("ack") == []  # the aggregate, anchored to all three, is still held downstream
    assert r.values("held", "down") == [[3]]
    run.release("down", 1)
    run.wait(lambda: sorted(r.ids("ack")) == [0, 1, 2], "all three roots to complete")
    down_acked = r.records("down", "acked")
    assert all(_after(ack, *down_acked) for ack in r.records("spout", "ack"))
    assert r.ids("fail") == []


def test_anchoring_twice_to_the_same_tuple(cluster):
    run = cluster.submit("anchor_twice.py", "twice")
    r = run.results
    run.wait(lambda: r.values("held", "first"), "the first bolt to get the tuple")
    run.release("first", 1)
    run.wait(lambda: r.values("held", "down"), "the child downstream")
    run.wait(lambda: r.records("first", "acked"), "the first bolt to ack its input")
    assert r.ids("ack") == []
    assert r.values("held", "down") == [["x'"]]
    run.release("down", 1)
    run.wait(lambda: r.ids("ack") == ["x"], "the tree anchored twice to complete")
    (ack,) = r.records("spout", "ack")
    assert _after(ack, *r.records("down", "acked"))
    assert r.ids("fail") == []


def test_explicit_fail_reaches_spout_fail_with_the_message_id(cluster):
    run = cluster.submit("explicit_fail.py", "fail")
    r = run.results
    run.wait(lambda: len(r.values("held", "h")) == 2, "both held")
    run.release("h", 2)
    run.wait(lambda: r.ids("fail") == ["drop"] and r.ids("ack") == ["keep"],
             lambda: f"keep acked and drop failed (acked {r.ids('ack')}, failed {r.ids('fail')})")


def test_unacked_tuple_times_out_into_fail_and_the_replay_completes(cluster):
    run = cluster.submit("timeout_replay.py", "timeout")
    r = run.results
    run.wait(lambda: r.ids("ack"), "the replayed tuple to be acked")
    # Nobody calls fail(): the only way to the spout's fail() is the message timeout. Then the
    # replay is delivered again and acked: fail strictly before ack, once each.
    outcomes = [(x["kind"], x["id"]) for x in r.records("spout") if x["kind"] in ("fail", "ack")]
    assert outcomes == [("fail", "m"), ("ack", "m")]
    assert r.values("got", "drop") == [["v"], ["v"]]


def test_no_ackers_acks_at_emit(cluster):
    run = cluster.submit("no_ackers.py", "noack")
    r = run.results
    run.wait(lambda: r.ids("ack") == [7], "the ack at emit")
    run.wait(lambda: r.values("held", "h") == [[1]], "the tuple delivered (and held: never acked)")
    assert r.records("h", "acked") == []


def test_acking_across_workers_with_serialization(cluster):
    run = cluster.submit("across_workers.py", "multi")
    r = run.results
    run.wait(lambda: len(r.ids("ack")) == 200, lambda: f"200 acks across workers (got {len(r.ids('ack'))})")
    assert sorted(r.ids("ack")) == list(range(200)) and r.ids("fail") == []
    assert len({port for _pid, port in r.workers()}) == 3  # the tasks ran in three workers
    if cluster.mode == "dev":
        assert len({pid for pid, _port in r.workers()}) == 3  # ... three processes
    got = r.records("ack", "got")
    assert sorted(int(x["values"][0][1:]) for x in got) == sorted(i % 17 for i in range(200))
    word_task: dict = {}
    for x in got:  # fields grouping: one task per word, even across workers
        assert word_task.setdefault(x["values"][0], x["task"]) == x["task"]


def test_max_spout_pending_is_never_exceeded(cluster):
    limit, total = 3, 10
    run = cluster.submit("max_spout_pending.py", "msp")
    r = run.results
    run.wait(lambda: len(r.values("held", "h")) == limit, "the limit reached")
    assert len(r.ids("emit")) == limit
    acked = 0
    while acked < total:  # bounded: each round acks at least one more (the waits fail otherwise)
        held_now = len(r.values("held", "h"))
        assert held_now - acked <= limit
        assert len(r.ids("emit")) - len(r.ids("ack")) <= limit
        run.release("h", held_now)
        run.wait(lambda n=held_now: len(r.ids("ack")) >= n, f"{held_now} acks")
        acked = held_now
        assert len(r.ids("emit")) - len(r.ids("ack")) <= limit
        if acked < total:
            run.wait(lambda a=acked: len(r.values("held", "h")) > a, "the spout to refill up to the limit")
    assert len(r.values("held", "h")) == total
    assert sorted(r.ids("ack")) == list(range(total)) and r.ids("fail") == []
    # The spout's own count at every emit: never more than the limit pending at once.
    assert max(x["pending"] for x in r.records("spout", "emit")) <= limit


def test_a_window_larger_than_the_learned_bounds_start_still_fills(cluster):
    """No topology.max.spout.pending: the spout's learned bound starts at 1,000 trees, and a count
    window of 3,000 holds its trees until the next window fires; the bound doubles while no tree
    finishes, so both windows fill."""
    run = cluster.submit("learned_bound_window.py", "grow")
    r = run.results
    run.wait(lambda: len(r.records("window", "window")) == 2, "two windows of 3,000")
    run.wait(lambda: len(r.ids("ack")) >= 3000, "the first window's tuples acked")
    assert [w["size"] for w in r.records("window", "window")] == [3000, 3000]
    assert max(e["pending"] for e in r.records("spout", "emit")) == 6000
    assert r.ids("fail") == []

    def learned() -> list:  # what the UI's diagnosis reads: the spout's stats record
        from daemons.answers.details import TopologyDetails, executor_records

        recs = executor_records(TopologyDetails.from_wire(cluster.topology_details("grow"))).values()
        return [rec.extra.get("pending_bound") for rec in recs if rec.component == "spout"]

    run.wait(lambda: (b := learned()) and b[0] >= 6000, lambda: f"the spout to report its learned bound: {learned()}")
