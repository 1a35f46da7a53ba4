"""Spouts for external sources (docs/topology-guide.md, "Sources"): `RedisStreamSpout` (a Redis
stream read as a consumer group) and `DirectorySpout` (complete files appearing in a directory).
Both are built on the public Spout API only, and both replay what fails, as Storm's
storm-kafka-client does (the source's position advances only over acked tuples)."""
