"""Exactly-once from a directory: DirectorySpout (`scenario.source.dir`, files moved to `done/`)
-> NumberOf (may fail `numbers.fail.once` once) -> a stateful sum. The spout is a plain Spout in
Storm's mode: the exactly-once config makes it a stateful one at submit (its read position
checkpointed, a file done once the checkpoint after its last line commits)."""
from scenario_parts import DirectoryNumbers, source_sum_topology

topology, config = source_sum_topology(DirectoryNumbers())
