"""Savepoints and swaps of exactly-once topologies (Flink's savepoints on storm-py's checkpoints).

A savepoint is one complete checkpoint of a topology, kept under a name: every stateful task's
committed values at one txid, with the components' parallelism; copied from Redis for the
`redis` provider, written by the workers to a directory for `memory`. `storm-py swap` stops the
spouts at a barrier, waits for the checkpoint behind it to commit, keeps that checkpoint as a
savepoint, kills the old topology, writes the savepoint as the state the new code starts from
(keyed state moved to the tasks the fields grouping now picks) and submits the new code under
the same name.

- plan.py   what may move where, and the refusals (pure)
- keyed.py  keyed state redistributed by the fields grouping (pure)
- store.py  the savepoints and state generations in Redis
- files.py  savepoints in a directory, and the start directories the memory provider opens
The steps, against Nimbus and a store, are daemons/swap.py's (the CLI: daemons/cli_savepoint.py).
"""

# The topology config a start from a savepoint sets: which savepoint (storm-py list, the UI), and
# for the memory provider the start directory its tasks load (executor/state/memory.py).
from executor.state.task_files import START_DIR_KEY as SAVEPOINT_DIR_KEY  # noqa: E402, F401  (re-exported)

SAVEPOINT_KEY = "topology.state.savepoint"
# {generation, txid}: the state generation and checkpoint a start from a savepoint was read from
# (executor/sinks/_prepared.py publishes what that generation's sinks prepared up to it).
SAVEPOINT_FROM_KEY = "topology.state.savepoint.from"
