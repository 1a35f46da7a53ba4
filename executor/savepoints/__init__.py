"""Savepoints and swaps of exactly-once topologies (Flink's savepoints on storm-py's checkpoints).

A savepoint is one complete checkpoint of a topology whose state is in a durable provider
(`redis`), copied under a name: every stateful task's committed values at one txid, with the
components' parallelism. `storm-py swap` stops the spouts at a barrier, waits for the checkpoint
behind it to commit, kills the old topology, keeps that checkpoint as a savepoint, writes it into
a new generation of the topology's state (keyed state moved to the tasks the fields grouping now
picks) and submits the new code under the same name, which starts from it.

- plan.py   what may move where, and the refusals (pure)
- keyed.py  keyed state redistributed by the fields grouping (pure)
- store.py  the savepoints and generations in Redis
- swap.py   the steps, against Nimbus and the store (daemons/cli_savepoint.py runs them)
"""
