"""Executors: the topology-author API, groupings, transport, spout/bolt loops, acker, sinks."""
