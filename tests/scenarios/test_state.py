"""Stateful bolts and checkpoints (Storm's State-checkpointing), on a LocalCluster and on the
dev cluster: a stateful sum behind a forwarding bolt commits every number exactly once when
nothing fails, and acks each number only after the commit that includes it; so does one fed by
a stateful spout in exactly-once mode, the checkpoint steps passing through the spout."""

import pytest

pytestmark = pytest.mark.timeout(150)

N = 300  # as topologies/stateful_sum.py


def committed_totals(results) -> tuple[int, int]:
    """(sum, count) of the committed state over the sum bolt's tasks: per task, what its PREPARE
    captured for the newest txid it committed."""
    total = count = 0
    for task in {rec["task"] for rec in results.records("sum")}:
        recs = [x for x in results.records("sum") if x["task"] == task]
        commits = [x["txid"] for x in recs if x["kind"] == "committed"]
        if not commits:
            continue
        prepared = {x["txid"]: x for x in recs if x["kind"] == "prepared"}
        last = prepared.get(max(commits))
        if last is not None:
            total += last["sum"]
            count += last["count"]
    return total, count


def test_stateful_sum_commits_every_number_once(cluster):
    run = cluster.submit("stateful_sum.py", "ssum")
    r = run.results
    run.wait(lambda: set(r.ids("ack")) == set(range(1, N + 1)),
             lambda: f"every number acked ({len(set(r.ids('ack')))} of {N})")
    assert r.ids("fail") == []
    # Every ack followed the commit that holds its number: by then the committed sum is whole.
    run.wait(lambda: committed_totals(r) == (N * (N + 1) // 2, N),
             lambda: f"the committed sum and count {committed_totals(r)} to be {(N * (N + 1) // 2, N)}")
    inits = r.records("sum", "init")
    assert inits and all(x["sum"] == 0 for x in inits)
    first_ack = min(x["t"] for x in r.records("numbers", "ack"))
    first_commit = min(x["t"] for x in r.records("sum", "committed"))
    assert first_commit < first_ack  # acks are held until a commit


def test_exactly_once_sum_commits_every_number_once(cluster):
    run = cluster.submit("exactly_once_sum.py", "eosum", {"numbers.n": N})
    r = run.results
    run.wait(lambda: r.ids("ack", "numbers") == [N], lambda: f"the last number ({N}) acked")
    run.wait(lambda: committed_totals(r) == (N * (N + 1) // 2, N),
             lambda: f"the committed sum and count {committed_totals(r)} to be {(N * (N + 1) // 2, N)}")
    # the spout's state was given it before its first emit, as the checkpoint spout's INITSTATE
    # passed through it
    assert [x["next"] for x in r.records("numbers", "init")][:1] == [1]
