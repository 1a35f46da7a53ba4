"""The stateful components of the topology-author API (design: Storm 2.x's IStatefulBolt,
IStatefulComponent): exported from executor.api."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from executor.components import Bolt, Spout
from executor.windowing.bolt import BaseWindowedBolt


class StatefulComponent:
    """What a stateful bolt and a stateful spout share (Storm's IStatefulComponent): the state,
    and the hooks called before it acts on a transaction step. A spout's `pre_prepare` is where
    a position that is costly to keep per tuple goes into its state, once per checkpoint."""

    def init_state(self, state) -> None:
        raise NotImplementedError(f"{type(self).__name__}.init_state")

    def pre_prepare(self, txid: int) -> None:
        pass

    def pre_commit(self, txid: int) -> None:
        pass

    def pre_rollback(self) -> None:
        pass


class BaseStatefulBolt(StatefulComponent, Bolt):
    """A bolt with state that survives failures (Storm's BaseStatefulBolt): `init_state(state)`
    is called with its last committed `KeyValueState` before any `execute`. Its acks are held
    until the checkpoint that includes their updates commits; its emits must be anchored."""


class BaseStatefulSpout(StatefulComponent, Spout):
    """A spout whose read position is its state, for `topology.state.exactly.once: true`:
    `init_state(state)` is called with its last committed `KeyValueState` before the first
    `next_tuple`, and again after every rollback, when it must continue from what the state
    says (rewind). Keep the position in the state (`state.put`) as tuples are emitted; it is
    committed with the checkpoint that holds their effects. `ack(msg_id)` comes once the
    checkpoint after the tuple commits (what a source may then forget); `fail` is not called in
    this mode: a failure rolls the whole topology back instead. The hooks `pre_prepare(txid)`,
    `pre_commit(txid)` and `pre_rollback()` are called before its state acts, as a bolt's."""


class RewindableSpout(StatefulComponent, Spout):
    """A spout for either mode (beyond Storm): in Storm's acked mode a plain Spout (`ack` and
    `fail` per tuple, failed tuples emitted again), and with `topology.state.exactly.once: true` a
    BaseStatefulSpout (its read position its state: `init_state` before the first `next_tuple`
    and after every rollback, `ack` once the checkpoint after the tuple commits, no `fail`). The
    mode is the topology's config, known at submit, not when the topology is built: the
    checkpoint wiring follows it then (executor/checkpoint/wiring.py, `for_mode`); `open` reads
    it from its conf. `RedisStreamSpout` and `DirectorySpout` are such spouts."""


class BaseStatefulWindowedBolt(BaseWindowedBolt, BaseStatefulBolt):
    """A windowed bolt with state (Storm's IStatefulWindowedBolt): `init_state(state)` before the
    first window. A tuple is acked once the window(s) it belongs to executed (a tumbling window's
    right after it) and the checkpoint holding the state they updated committed. In exactly-once
    mode the window's own contents are checkpointed with the state too, so that after a failure
    both come back as of the last commit."""

    def execute(self, window) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")


@runtime_checkable
class CheckpointedOutput(Protocol):
    """A bolt whose output leaves the topology (the Spark sink) and takes part in exactly-once
    checkpoints as a two-phase commit (Flink's TwoPhaseCommitSinkFunction): what it received
    before a checkpoint's barrier is made durable but invisible at PREPARE, visible at COMMIT
    (once, however often COMMIT is repeated), and discarded at ROLLBACK. False from prepare or
    commit (or an exception, which is reported): not done; the checkpoint fails and the topology
    rolls back (a COMMIT is then repeated until it succeeds)."""

    def prepare_output(self, txid: int) -> bool: ...

    def commit_output(self, txid: int) -> bool: ...

    def rollback_output(self, txid: int) -> None: ...
