"""The Spark sink in an exactly-once topology (topology.state.exactly.once: true) on a LocalCluster
with real Spark: rows are written at each checkpoint's PREPARE and published at its COMMIT, so
that the raw table (read_table(dedupe=False), no dedupe_fields) holds every row exactly once
through a rollback, which a failed tuple asks for after rows of its checkpoint were already
written."""

from __future__ import annotations

import pytest
from sink_helpers import poll

from daemons.local import LocalCluster
from executor.api import BaseStatefulSpout, BasicBolt, FailedException, TopologyBuilder
from executor.sinks import _prepared as P
from executor.sinks.spark import SparkSinkBolt, read_table

pytestmark = [pytest.mark.timeout(150), pytest.mark.spark, pytest.mark.slow]

N = 3000


class Numbers(BaseStatefulSpout):
    """Emits [n, "v<n>"] for n = 1..N; its position is its state."""

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "v"])

    def open(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)

    def next_tuple(self):
        if self.next > N:
            return
        n, self.next = self.next, self.next + 1
        self.state.put("next", self.next)
        self.collector.emit([n, f"v{n}"], msg_id=n)


class FailOnce(BasicBolt):
    """Passes every tuple on; fails the number `fail.at` the first time (then writes a marker
    file named by `fail.marker`, so the test knows the rollback was asked for)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "v"])

    def prepare(self, conf, context):
        self.at, self.marker = conf["fail.at"], conf["fail.marker"]

    def execute(self, tup, collector):
        if self.at is not None and tup.values[0] == self.at:
            self.at = None
            with open(self.marker, "w") as f:
                f.write("failed")
            raise FailedException("once, on purpose")
        collector.emit(list(tup.values))


def _count(path, spark) -> int:
    try:
        return read_table(path, dedupe=False, spark=spark).count()
    except Exception:  # noqa: BLE001 - no table yet: nothing published
        return 0


def test_the_raw_table_holds_every_row_once_through_a_rollback(spark, tmp_path):
    path = tmp_path / "t"
    marker = tmp_path / "failed"
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("relay", FailOnce(), 2).shuffle_grouping("numbers")
    b.set_bolt("store", SparkSinkBolt(str(path), batch_size=500), 2).shuffle_grouping("relay")
    conf = {"topology.state.exactly.once": True, "topology.state.checkpoint.interval.ms": 300,
            "fail.at": N // 2, "fail.marker": str(marker)}
    with LocalCluster() as cluster:
        cluster.submit_topology("eo-sink", conf, b.create_topology())
        poll(lambda: _count(path, spark) >= N, timeout=120, interval=1.0, message=f"{N} rows published")
        assert marker.exists()  # the rollback was asked for mid-run
        assert cluster.errors("eo-sink") == []
        cluster.kill_topology("eo-sink")
    df = read_table(path, dedupe=False, spark=spark)
    ids = sorted(r["id"] for r in df.select("id").collect())
    assert ids == list(range(1, N + 1))  # each row once: none lost, none twice
    # what was prepared for the rolled-back checkpoint was discarded, never published
    left = [t for d in (path / P.PREPARED_DIR).iterdir() for t in P.prepared_txids(d)]
    assert len(left) <= 2, left  # at most the last checkpoints, cut by the kill
