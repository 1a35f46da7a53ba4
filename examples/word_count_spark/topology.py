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
    "topology.max.spout.pending": 2000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
