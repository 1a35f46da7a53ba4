"""A multilang bolt's subprocess that exits, raises, hangs, breaks the protocol, acks an unknown
id or anchors onto an acked tuple: one error naming the component, the script and what
happened; the worker dies and is restarted (as Storm's ShellBolt); nothing acked is lost."""

from __future__ import annotations

import pytest
from multilang_helpers import COMPONENTS, Shared, SinkBolt, ValuesSpout
from testutil import wait_until as poll

from daemons.local import LocalCluster
from executor.api import ShellBolt, ShellSpout, TopologyBuilder

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster]  # subprocess components

VALUES = [f"v{i}" for i in range(30)] + ["trigger"] + [f"v{i}" for i in range(30, 60)]

CASES = {
    # mode: (serializer, what the error says)
    "exit": ("json", ["exit code 3", "misbehave: exiting on purpose"]),
    "raise": ("msgpack", ["exit code 1", "the last error it sent", "ValueError: misbehave: raising on purpose"]),
    "hang": ("json", ["did not answer", "subprocess heartbeat timeout", "hanging on purpose"]),
    "garbage": ("json", ["broke the protocol", "not JSON", "this is not a message"]),
    "garbage-msgpack": ("msgpack", ["broke the protocol", "not msgpack"]),
    "unknown-ack": ("json", ["ack of id 'no-such-id'", "unknown or already acked"]),
    "anchor-after-ack": ("msgpack", ["anchored onto id", "after it was acked or failed"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_misbehaving_subprocess_is_one_clear_error_and_a_restart(case, tmp_path):
    serializer, says = CASES[case]
    mode = case.replace("-msgpack", "")
    shared = Shared(VALUES)
    b = TopologyBuilder()
    b.set_spout("values", ValuesSpout(shared))
    b.set_bolt("bad", ShellBolt(["python3", "misbehave.py", serializer], outputs=["value"], cwd=COMPONENTS)) \
        .shuffle_grouping("values")
    b.set_bolt("sink", SinkBolt(shared)).shuffle_grouping("bad")
    conf = {"topology.multilang.serializer": serializer, "topology.subprocess.timeout.secs": 3,
            "topology.message.timeout.secs": 5, "topology.max.spout.pending": 10,
            "test.mode": mode, "test.dir": str(tmp_path)}
    with LocalCluster() as cluster:
        cluster.submit_topology("misbehave", conf, b.create_topology())
        died = poll(lambda: cluster.died("misbehave"), timeout=30, message=f"the worker's death ({case})")
        text = str(died[0])
        assert "component 'bad'" in text and "misbehave.py" in text, text
        for phrase in says:
            assert phrase in text, f"{phrase!r} not in {text!r}"
        assert "Traceback" not in text.split("stderr")[0]  # one line up to the subprocess's own stderr
        assert any("component 'bad'" in e.error for e in cluster.errors("misbehave"))
        # The worker was restarted and the topology finished its work; nothing acked is lost.
        poll(shared.acked_all, timeout=60, message="every value acked after the restart")
        with shared.lock:
            seen = {v for (v,) in shared.seen}
            acked = set(shared.acked)
        if mode == "anchor-after-ack":
            # The subprocess acked "trigger" before its late emit: the tuple's tree may complete
            # before the worker dies (then it is acked without reaching the sink, as Storm does
            # with a tuple a bolt acks without emitting), or not (then it is replayed and seen).
            acked.discard("trigger")
        assert acked <= seen


@pytest.mark.slow
@pytest.mark.parametrize("mode, says", [
    ("exit", ["exit code 4", "flaky spout: exit on purpose"]),
    ("hang", ["did not answer 'next' with sync within 3s", "flaky spout: hang on purpose"]),
    ("ack-from-spout", ["sent 'ack', which a spout cannot"]),
])
def test_a_misbehaving_spout_subprocess_is_one_clear_error_and_a_restart(mode, says, tmp_path):
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("flaky", ShellSpout(["python3", "features.py", "FlakySpout", "json"], outputs=["n"], cwd=COMPONENTS))
    b.set_bolt("sink", SinkBolt(shared)).shuffle_grouping("flaky")
    conf = {"topology.subprocess.timeout.secs": 3, "topology.max.spout.pending": 10, "test.mode": mode,
            "test.dir": str(tmp_path)}
    with LocalCluster() as cluster:
        cluster.submit_topology("flaky", conf, b.create_topology())
        died = poll(lambda: cluster.died("flaky"), timeout=30, message=f"the worker's death ({mode})")
        text = str(died[0])
        assert "component 'flaky'" in text and "features.py FlakySpout" in text, text
        for phrase in says:
            assert phrase in text, f"{phrase!r} not in {text!r}"
        with shared.lock:
            before = len(shared.seen)
        # restarted: the new spout's tuples (its early emit first) reach the sink
        poll(lambda: len(shared.seen) > before + 25, timeout=60, message="tuples after the restart")
