"""A swap run by Nimbus (`storm-py swap`; Flink's stop-with-savepoint is its JobManager's for the
same reason): a client that dies, or a Nimbus that fails over, leaves the topology running the
old code or the new code from the savepoint, never stopped.

The request (driver.py `begin`) checks everything first, nothing touched: both topologies in
exactly-once mode, the new code's components able to take the state (a read of the running
state with Redis), and installs the new code under its id (standby Nimbus daemons copy it).
Then the steps, one per round of the leader's swap thread, each written to `/swaps/{name}`
(cluster_state's SwapRecord) so that the next leader goes on from it:

    stopping   the old topology's status is `stopping` (its spouts inactive; its deadline in
               its storm base, daemons/nimbus/transitions.py), until every stateful spout
               passed a checkpoint behind its last tuple and that checkpoint committed
               (their CheckpointMarks in the workers' heartbeats) -> park
    parking    its checkpoint spout finishes what is under way and starts nothing; once it says
               so and the new code is on every registered Nimbus -> the savepoint is taken
               (read from Redis; the memory provider's workers write it: `writing`)
    saved      the old topology is removed
    killed     the savepoint is written as the new code's start and the new code submitted
    done / failed

Until `saved`, the deadline or a refusal gives the swap up and the old topology goes back to
the status it had (its own timer does it too, should no Nimbus be there); from `saved` on the
swap goes on until the new code runs. steps.py decides (pure); driver.py carries it out.
"""
