"""Word count, stored through Spark: random sentences -> split -> count -> Parquet table.

    storm-py local examples/word_count/topology.py --duration 10
    python3 examples/word_count/top_words.py             # the top words, read back from the table
    storm-py sink show /tmp/storm-py-word-count --limit 5  # rows and counts

The table path is the topology config's wordcount.table (-c wordcount.table=PATH), else
$STORM_PY_WORD_COUNT_TABLE, else <tmp>/storm-py-word-count; runs add up. `-c wordcount.sentences=N`
stops the spout after N sentences, `-c wordcount.seed=S` makes its sentences the same every run.
"""

from word_count_components import TABLE, build_topology

topology = build_topology(TABLE)
config = {
    "topology.workers": 1,
    # A sentence is acked once its counts are in a committed checkpoint and in the table
    # (count window + checkpoint + a Spark write, ~1-2 s), so throughput is at most pending /
    # that latency. The counts live in the default state provider (memory); for counts that
    # survive a worker's death, add -c topology.state.provider=redis (docs/operations.md, "State").
    "topology.max.spout.pending": 20000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
