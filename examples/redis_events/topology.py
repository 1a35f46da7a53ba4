"""Numbered events read from a Redis stream and summed exactly once in a Spark table.

    storm-py dev-cluster --redis            # prints the Redis it started (127.0.0.1:PORT)
    python3 examples/redis_events/feed.py --port PORT --events 100000
    storm-py jar submit examples/redis_events/topology.py --name events --conf-dir ./storm-py-dev/conf \\
        -c events.redis.port=PORT -c events.table=/tmp/events/table
    python3 examples/redis_events/check_sum.py /tmp/events/table --events 100000

Keys read from the topology config: events.redis.host (default 127.0.0.1), events.redis.port
(default 6379), events.table (required: the Spark table).
"""

from redis_events_components import build_topology

topology = build_topology()
config = {
    "topology.workers": 2,
    # Trees complete once the sink commits (~0.5-1 s): pending / that latency bounds the rate.
    "topology.max.spout.pending": 2000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
