"""400 messages through a bolt with ticks into a bolt that blocks until the test opens it, with
tiny queues (so everything upstream of the gate fills) and a 1 s message timeout; the spout
replays what fails."""
from scenario_parts import GateBolt, IdSpout, PassBolt

from executor.api import TopologyBuilder

b = TopologyBuilder()
# Paced (400 in 2 s): the gate's full queue reaches "pass" as back-pressure from the other worker
# within a few hundred ms, long before the last number; unpaced, the transfer queue and the
# sockets between the workers once took all 400 before it did.
b.set_spout("numbers", IdSpout([[n, [n]] for n in range(400)], replay=True, rate=200))
b.set_bolt("pass", PassBolt()).shuffle_grouping("numbers")
b.set_bolt("gate", GateBolt()).shuffle_grouping("pass")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.executor.receive.buffer.size": 8, "topology.producer.batch.size": 2,
          "topology.message.timeout.secs": 1}
