"""30 components: 3 spouts, then 27 bolts in 5 layers, each bolt fed by one or two components
of the layer before through shuffle, fields or all groupings (the UI graph's readability test)."""

from thirty_components import Pass, SlowSpout

from executor.api import TopologyBuilder

builder = TopologyBuilder()
previous = [f"spout-{i}" for i in range(1, 4)]
for name in previous:
    builder.set_spout(name, SlowSpout(), 1)
sizes = [5, 6, 6, 6, 4]
number = 0
for layer, size in enumerate(sizes, start=1):
    current = []
    for i in range(size):
        number += 1
        name = f"l{layer}-bolt-{number:02d}"
        declarer = builder.set_bolt(name, Pass(), 1)
        declarer.shuffle_grouping(previous[i % len(previous)])
        if i % 2:
            declarer.fields_grouping(previous[(i + 2) % len(previous)], ["n"])
        current.append(name)
    previous = current

topology = builder.create_topology()
config = {"topology.workers": 1, "topology.max.spout.pending": 50}
