"""Numbered events read from a Redis stream and stored exactly once in a Spark table.

    storm-py dev-cluster --redis            # prints the Redis it started (127.0.0.1:PORT)
    python3 examples/redis_events/feed.py --port PORT --events 100000
    storm-py jar submit examples/redis_events/topology.py --name events --conf-dir ./storm-py-dev/conf \\
        -c events.redis.port=PORT -c events.table=/tmp/events/table
    python3 examples/redis_events/check_sum.py /tmp/events/table --events 100000

Keys read from the topology config: events.redis.host (default 127.0.0.1), events.redis.port
(default 6379), events.table (required: the Spark table).

Exactly once: the spout's read position, the sink's rows and the group's XACKs go with the
checkpoints, so the table holds every event once however the workers die. The state must
outlive a worker: `dev-cluster --redis` makes its Redis the state provider; elsewhere add
-c topology.state.provider=redis -c "topology.state.provider.config={host: HOST, port: PORT}".
"""

from redis_events_components import build_topology

topology = build_topology()
config = {
    "topology.workers": 2,
    "topology.state.exactly.once": True,
    # Rows reach the table at each commit (every second, the default interval).
    "topology.state.checkpoint.interval.ms": 1000,
    "topology.message.timeout.secs": 30,
    "spark.master": "local[1]",
}
