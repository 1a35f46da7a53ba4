"""Numbered word count: a durable numbered source -> split -> count -> Spark table, whose rows
carry the message number and word position, so the table can be checked against what was sent.
It is the topology the fault test (tests/devcluster/test_faults.py) and bench/chaos.py run.

    storm-py jar submit examples/numbered_word_count/topology.py --name numbered \\
        -c numbered.messages=100000 -c numbered.offset.dir=/tmp/numbered/offsets \\
        -c numbered.table=/tmp/numbered/table --conf-dir ./storm-py-dev/conf
    python3 examples/numbered_word_count/check_table.py /tmp/numbered/table --messages 100000

The three numbered.* keys (and numbered.rate, new messages/s per spout task) are read from the
topology config when the components start: see numbered_components.py.
"""

from numbered_components import build_topology

topology = build_topology()
config = {
    "topology.workers": 2,
    # Trees complete once the sink commits (~0.5-1 s): pending / that latency bounds the rate.
    "topology.max.spout.pending": 5000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
