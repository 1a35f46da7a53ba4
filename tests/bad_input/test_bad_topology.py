"""Bad input at run time: tuples too large for the configured limit."""

from __future__ import annotations

import pytest
from testutil import wait_until

from daemons.local import LocalCluster
from executor.api import Bolt, Spout, TopologyBuilder

pytestmark = pytest.mark.timeout(60)


class BigSpout(Spout):
    def __init__(self, size):
        self.size = size

    def declare_output_fields(self, declarer):
        declarer.declare(["blob"], stream="blobs")

    def open(self, conf, context, collector):
        self.collector = collector

    def next_tuple(self):
        self.collector.emit([b"x" * self.size], stream="blobs", msg_id=1)


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)


@pytest.mark.parametrize("conf, size", [
    ({"topology.max.tuple.size.bytes": 100_000}, 200_000),
    ({}, 17 * 1024 * 1024),  # over the packaged default (16 MiB)
])
def test_oversized_tuple_is_an_error_naming_component_and_stream(conf, size):
    b = TopologyBuilder()
    b.set_spout("blobber", BigSpout(size))
    b.set_bolt("sink", Sink()).shuffle_grouping("blobber", "blobs")
    with LocalCluster() as cluster:
        cluster.submit_topology("big", conf, b.create_topology())
        died = wait_until(lambda: cluster.died("big"), timeout=30, message="the spout to die")
        text = str(died[0])
        assert "'blobber'" in text and "'blobs'" in text and "topology.max.tuple.size.bytes" in text
        assert cluster.component_stats("big")["sink"].get("executed", 0) == 0
