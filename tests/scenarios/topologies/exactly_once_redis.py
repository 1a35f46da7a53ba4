"""Exactly-once from a Redis stream: RedisStreamSpout (stream `numbers`, the Redis at
`scenario.redis.port`) -> NumberOf (may fail `numbers.fail.once` once) -> a stateful sum. The
spout is a plain Spout in Storm's mode: the exactly-once config makes it a stateful one at
submit (its read position checkpointed, its entries XACKed at commits). The state provider is
given at submit (`topology.state.provider`: the test's Redis)."""
from scenario_parts import RedisNumbers, source_sum_topology

topology, config = source_sum_topology(RedisNumbers())
