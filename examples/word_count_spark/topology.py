"""Word count with its counts stored in a Parquet table through the Spark sink.

    storm-py local examples/word_count_spark/topology.py --duration 10
    python3 examples/word_count_spark/top_words.py        # the top words, read back from the table
    storm-py sink show /tmp/storm-py-word-count --limit 5  # rows and counts

The table path is $STORM_PY_WORD_COUNT_TABLE, default <tmp>/storm-py-word-count; runs add up.
"""

from word_count_spark_components import TABLE, build_topology

topology = build_topology(TABLE)
config = {
    "topology.workers": 1,
    # A sentence is acked only once its counts are committed to the table, ~0.5-1 s after it was
    # emitted (batching plus a Spark write), so throughput is at most pending / that latency:
    # 5000 sentences (~32,000 counts in flight) keeps the sink's batches full.
    "topology.max.spout.pending": 5000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
