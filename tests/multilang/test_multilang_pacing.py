"""A ShellBolt whose subprocess falls behind holds back its own input, not its worker: the
executors sharing its worker's thread keep running, and no watchdog has to take the thread
away from it (a paced Adapter, executor/adapters.py; before it, `execute` waited on a full write queue
with the whole worker's executors behind it)."""

from __future__ import annotations

import logging

import pytest
from multilang_helpers import COMPONENTS, Shared, SinkBolt, ValuesSpout
from testutil import wait_until as poll

from daemons.local import LocalCluster
from executor.api import ShellBolt, TopologyBuilder

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster]  # subprocess components

# Values large enough that a few of them fill the subprocess's stdin pipe while it holds.
BIG = ["trigger"] + [f"{i}:" + "x" * 8000 for i in range(60)]
SMALL = [f"s{i}" for i in range(300)]


def test_a_shell_bolt_behind_its_subprocess_does_not_hold_its_workers_thread(tmp_path, caplog):
    slow, fast = Shared(BIG), Shared(SMALL)
    b = TopologyBuilder()
    b.set_spout("big", ValuesSpout(slow))
    b.set_bolt("held", ShellBolt(["python3", "misbehave.py", "msgpack"], outputs=["value"], cwd=COMPONENTS)) \
        .shuffle_grouping("big")
    b.set_bolt("held-sink", SinkBolt(slow)).shuffle_grouping("held")
    b.set_spout("small", ValuesSpout(fast))
    b.set_bolt("sink", SinkBolt(fast)).shuffle_grouping("small")
    # The blocked-step threshold: far above what a step takes on a loaded machine (at 300 ms a
    # descheduled thread tripped it), far below the hold, which lasts until the test releases it.
    conf = {"topology.multilang.serializer": "msgpack", "topology.shellbolt.max.pending": 5,
            "topology.max.spout.pending": 100, "topology.message.timeout.secs": 60,
            "topology.subprocess.timeout.secs": 60, "topology.executor.blocking.step.millis": 2000,
            "test.mode": "hold", "test.dir": str(tmp_path)}
    with caplog.at_level(logging.WARNING, logger="executor.scheduling"), LocalCluster() as cluster:
        cluster.submit_topology("paced", conf, b.create_topology())
        poll(lambda: (tmp_path / "misbehaved").exists(), timeout=60, message="the shell bolt holding its input")
        # While it holds: its queue for the subprocess fills (5 tuples past a full pipe) and the
        # other spout's values all go through the same worker.
        poll(fast.acked_all, timeout=60, message="every small value acked while the shell bolt holds")
        handed = [r.getMessage() for r in caplog.records if "blocked its worker's shared executor thread" in
                  r.getMessage()]
        assert not handed, handed
        assert not slow.acked_all()
        (tmp_path / "release").touch()
        poll(slow.acked_all, timeout=60, message="every big value acked once the subprocess reads again")
        assert not cluster.died("paced")
