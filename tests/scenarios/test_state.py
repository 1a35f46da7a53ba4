"""Stateful bolts and checkpoints (Storm's State-checkpointing), on a LocalCluster and on the
dev cluster: a stateful sum behind a forwarding bolt commits every number exactly once when
nothing fails, and acks each number only after the commit that includes it; so does one fed by
a stateful spout in exactly-once mode, the checkpoint steps passing through the spout, with no
acker traffic for its numbers, with a window holding tuples on the way, and across a rollback
that a failed tuple asks for."""

import pytest
from scenario_harness import DEADLINE
from testutil import wait_until

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


def commits(results) -> list[int]:
    return sorted(x["txid"] for x in results.records("sum", "committed"))


def rollbacks_per_task(results) -> dict[int, int]:
    out: dict[int, int] = {}
    for x in results.records("sum", "rollback"):
        out[x["task"]] = out.get(x["task"], 0) + 1
    return out


def executed(cluster, name: str) -> dict[str, int]:
    """Tuples executed per bolt, system ones (the acker) included, as the REST API counts them."""
    from daemons.answers.details import TopologyDetails
    from daemons.reports.views import topology_detail

    page = topology_detail(TopologyDetails.from_wire(cluster.topology_details(name)), include_sys=True)
    return {b["boltId"]: int(b["executed"] or 0) for b in page["bolts"]}


def test_exactly_once_data_tuples_cost_the_acker_nothing(cluster):
    n = 3000
    run = cluster.submit("exactly_once_sum.py", "eonoack", {"numbers.n": n})
    r = run.results
    run.wait(lambda: committed_totals(r) == (n * (n + 1) // 2, n),
             lambda: f"the committed sum and count {committed_totals(r)} to be {(n * (n + 1) // 2, n)}")
    # The spout's ack of n came with the COMMIT of a checkpoint that holds it: every sum task had
    # prepared that checkpoint, with n counted, before the ack.
    run.wait(lambda: r.ids("ack", "numbers") == [n], lambda: f"the last number ({n}) acked")
    acked_at = r.records("numbers", "ack")[0]["t"]
    prepared: dict[int, dict[int, int]] = {}
    for x in r.records("sum", "prepared"):
        if x["t"] <= acked_at:
            prepared.setdefault(x["txid"], {})[x["task"]] = x["count"]
    tasks = {x["task"] for x in r.records("sum", "init")}
    assert any(set(by) == tasks and sum(by.values()) == n for by in prepared.values()), prepared
    # Only the checkpoint steps went through the acker (a few tuples per step), never the numbers
    # (at least once, every number would be three: its tree's start and two acks).
    counts = run.wait(lambda: (c := executed(cluster, "eonoack")).get("sum", 0) >= n and c.get("__acker", 0) > 0 and c,
                      lambda: f"the stats to count the sum's {n} numbers: {executed(cluster, 'eonoack')}")
    assert counts["__acker"] < n, f"the acker executed {counts['__acker']} tuples for {n} numbers ({counts})"


def test_exactly_once_commits_while_a_window_holds_tuples(cluster):
    n = 2000  # as topologies/exactly_once_window.py
    run = cluster.submit("exactly_once_window.py", "eowin")
    r = run.results
    want = (n * (n + 1) // 2, n // 10)  # every number once, in n / 10 windows
    run.wait(lambda: committed_totals(r) == want,
             lambda: f"the committed sum and window count {committed_totals(r)} to be {want}")
    # The spout has stopped and the window holds its last 100 numbers: checkpoints go on.
    last = max(commits(r))
    run.wait(lambda: max(commits(r)) >= last + 3, lambda: f"three more commits after txid {last}: {commits(r)[-5:]}")
    assert committed_totals(r) == want
    assert r.records("window", "window")[-1]["held"] == 100
    # none rolled back but the one every exactly-once start does
    assert set(rollbacks_per_task(r).values()) == {1}, rollbacks_per_task(r)


def test_exactly_once_a_failed_tuple_rolls_back_and_counts_once(cluster):
    run = cluster.submit("exactly_once_sum.py", "eofail", {"numbers.n": N, "numbers.fail.once": N // 2})
    r = run.results
    run.wait(lambda: committed_totals(r) == (N * (N + 1) // 2, N),
             lambda: f"the committed sum and count {committed_totals(r)} to be {(N * (N + 1) // 2, N)}")
    assert [x["values"] for x in r.records("relay", "failed")] == [[N // 2]]
    # the start's rollback, then the one the failed tuple asked for
    assert all(k >= 2 for k in rollbacks_per_task(r).values()), rollbacks_per_task(r)


def test_a_checkpoint_hook_that_raises_is_named_and_the_step_retried(cluster):
    n = 500
    run = cluster.submit("exactly_once_sum.py", "eohook", {"numbers.n": n, "sum.rollback.raises": 3})
    r = run.results
    exact = (n * (n + 1) // 2, n)
    # not run.wait: that fails on the first reported error, and errors are expected here
    wait_until(lambda: committed_totals(r) == exact, DEADLINE[cluster.mode],
               lambda: f"the committed sum {committed_totals(r)} to be {exact} once pre_rollback stopped raising "
                       f"({r.summary()})", interval=0.1)

    def errors() -> str:
        try:
            cluster.check_healthy("eohook")
        except AssertionError as exc:
            return str(exc)
        return ""

    text = wait_until(lambda: e if "its pre_rollback raised" in (e := errors()) else None, DEADLINE[cluster.mode],
                      "the hook's error reported", interval=0.5)
    assert "stateful bolt sum:" in text and "its pre_rollback raised RuntimeError: pre_rollback refuses" in text, text
    # each task's start rollback failed three times, then went through
    assert all(k >= 4 for k in rollbacks_per_task(r).values()), rollbacks_per_task(r)



def spout_figures(cluster, name: str) -> tuple[int, list[str]]:
    """The spout `numbers`'s emitted count (all time) and the topology's diagnosis, as
    `storm-py monitor` reads them."""
    from daemons.answers.details import TopologyDetails
    from daemons.reports.views import monitor_reading

    return monitor_reading(TopologyDetails.from_wire(cluster.topology_details(name)), ["numbers"], "default",
                           "emitted")


def test_exactly_once_max_spout_pending_asks_for_checkpoints_and_bounds_a_slow_commit(cluster):
    # The key bounds what a spout sends ahead of its last checkpoint barrier; at the bound it asks
    # for the next checkpoint at once. No checkpoint is due by the interval for an hour, and the
    # commits wait until the test releases them: the spout stops with `limit` tuples in the
    # checkpoint under way and `limit` more ahead of it (each thread its own: the held commit
    # blocks only the sum bolt's).
    limit, n = 40, 500
    run = cluster.submit("exactly_once_sum.py", "eopend", {
        "numbers.n": n, "topology.max.spout.pending": limit, "topology.state.checkpoint.interval.ms": 3_600_000,
        "sum.hold.commits": True, "topology.message.timeout.secs": 600,
        "topology.executor.thread.mode": "dedicated"})
    line = f"spout numbers is at max pending: {limit} tuples wait for the next checkpoint"
    emitted, said = run.wait(lambda: line in " ".join((f := spout_figures(cluster, "eopend"))[1]) and f,
                             lambda: f"the diagnosis to say {line!r}: {spout_figures(cluster, 'eopend')}")
    # the first checkpoint came at the start or when the spout asked: at most 2 x limit sent
    assert limit <= emitted <= 2 * limit and committed_totals(run.results) == (0, 0), (emitted, said)
    run.release("sum-commits", 1)
    # Checkpoints asked for carry the numbers on, long before the interval would have made one;
    # the last ones (fewer than `limit`: no ask) wait for the interval, an hour here.
    run.wait(lambda: committed_totals(run.results)[1] > n - limit,
             lambda: f"the committed count {committed_totals(run.results)[1]} to pass {n - limit}")
    total, count = committed_totals(run.results)
    assert total == count * (count + 1) // 2, (total, count)  # 1..count, each once
