"""Word count, stored through Spark, exactly once: random sentences -> split -> count -> Parquet table.

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
    # The spout's position, the counts and the windows are checkpointed together every second,
    # and the table shows a checkpoint's rows when it commits: after a failure the topology goes
    # back to the last commit, and no sentence is lost or counted twice. The state lives in the
    # default provider (memory), which a worker's death loses; on a cluster add
    # -c topology.state.provider=redis (docs/operations.md, "State").
    "topology.state.exactly.once": True,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
