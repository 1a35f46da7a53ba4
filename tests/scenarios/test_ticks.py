"""Tick tuples configured for the topology or for one component, on a LocalCluster and on the
dev cluster: repeated system ticks carrying the configured interval, to the bolts configured
for them only."""

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("level", ["topology", "component"])
def test_tick_tuples_arrive_at_the_configured_frequency(cluster, level):
    run = cluster.submit(f"ticks_{level}_level.py", f"ticks-{level}")
    r = run.results
    run.wait(lambda: len(r.records("ticks", "tick")) >= 4, "four ticks")
    if level == "topology":
        run.wait(lambda: len(r.records("plain", "tick")) >= 4, "four ticks at the other bolt too")
    # behaviour, not timing: system ticks carrying the configured interval; the spout, never
    # sent a tuple, gives the bolts nothing else.
    ticks = r.records("ticks", "tick") + r.records("plain", "tick")
    assert {(x["source"], x["stream"]) for x in ticks} == {("__system", "__tick")}
    assert {x["values"][0] for x in ticks} == {0.2}
    assert r.records(kind="got") == []
    if level == "component":
        assert r.records("plain", "tick") == []  # only the component configured for them


@pytest.mark.slow  # it waits for message timeouts: 62 s and 12 CPU-s (its executors' waits) in a loaded run
def test_a_stalled_bolt_keeps_executing_ticks_and_message_timeouts_fire(cluster):
    # Behaviour only: the executor-level view (its pending emits while back-pressured) is
    # tests/local/test_local_flow_control.py's, which can look inside the in-process executor.
    total = 400
    run = cluster.submit("blocked_downstream.py", "stalled")
    r = run.results

    def ticks_since_last_input() -> int:
        last = max((x["t"] for x in r.records("pass", "got")), default=None)
        return 0 if last is None else sum(1 for x in r.records("pass", "tick") if x["t"] > last)

    try:
        run.wait(lambda: r.records("gate", "got"), "the gate to block on its first input")
        # The gate's queue fills, then "pass" stalls with its output undeliverable; it still
        # executes its ticks (three of them after its last input)...
        run.wait(lambda: ticks_since_last_input() >= 3,
                 lambda: f"ticks while stalled ({ticks_since_last_input()} since its last input)")
        # it stalled short of the end: fewer numbers than all (its receipts count the spout's
        # replays of timed-out ones too: 400 receipts with replays failed this once)
        got = [tuple(x["values"]) for x in r.records("pass", "got")]
        assert len(set(got)) < total, f"pass got {len(set(got))} distinct numbers in {len(got)} receipts"
        # ...and the spout's message timeouts fire (its own system ticks).
        run.wait(lambda: r.ids("fail"), "a message timeout while the gate is closed")
    finally:
        run.release("gate", 1)
    # Once the gate opens everything drains, and replays make every message acked.
    run.wait(lambda: set(r.ids("ack")) >= set(range(total)),
             lambda: f"all acked after the gate opened ({len(set(r.ids('ack')))} of {total})", timeout=90)
