"""What wraps each user component, bolt or spout (executor/worker.py asks for every task's copy).

The choice imports every adapter; it lives here, apart from their base (executor/adapters.py),
which they all import: a base choosing among its own subclasses closes an import circle.
"""

from __future__ import annotations

from typing import Any

from executor.adapters import PlainSpout, SpoutAdapter
from executor.bolt import BasicBoltAdapter
from executor.checkpoint.api import BaseStatefulBolt, BaseStatefulSpout, RewindableSpout
from executor.checkpoint.barrier_mode import WorkerLosses
from executor.checkpoint.forwarder import CheckpointForwarder
from executor.checkpoint.spout_side import StatefulSpoutAdapter
from executor.checkpoint.stateful import StatefulBoltAdapter, WindowOnlyHooks
from executor.components import BasicBolt
from executor.windowing.adapter import WindowedBoltAdapter
from executor.windowing.bolt import BaseWindowedBolt


def adapt_bolt(obj: Any, checkpointed: bool, losses: WorkerLosses | None = None) -> Any:
    """What a bolt executor runs for the user's bolt `obj` (a task's own copy): the adapter for
    its kind, then, in a topology with checkpoints, the checkpoint stream's handling (a stateful
    bolt handles it itself; any other bolt forwards it, as Storm's CheckpointTupleForwarder).
    `losses`: what the worker may have lost, in an exactly-once topology (None otherwise); there a
    windowed bolt's window is checkpointed even when the bolt has no state of its own: what it
    holds is rolled back and restored with everything else."""
    if isinstance(obj, BaseStatefulBolt):
        windowed = isinstance(obj, BaseWindowedBolt)
        return StatefulBoltAdapter(obj, WindowedBoltAdapter(obj, stateful=True) if windowed else None, losses=losses)
    if checkpointed and losses is not None and isinstance(obj, BaseWindowedBolt):
        return StatefulBoltAdapter(obj, WindowedBoltAdapter(obj, stateful=True), hooks=WindowOnlyHooks(), losses=losses)
    if isinstance(obj, BasicBolt):
        obj = BasicBoltAdapter(obj)
    elif isinstance(obj, BaseWindowedBolt):
        obj = WindowedBoltAdapter(obj)
    return CheckpointForwarder(obj, losses) if checkpointed else obj


def adapt_spout(obj: Any, stateful: bool = False) -> SpoutAdapter:
    """The SpoutAdapter a spout executor asks for the user's spout `obj` (a task's own copy): a
    spout that is its own adapter (the checkpoint spout, a ShellSpout) as it is, a stateful
    spout wrapped for its checkpoint steps (so is a RewindableSpout the topology's wiring made
    `stateful`: in exactly-once mode), any other spout as a PlainSpout."""
    if isinstance(obj, SpoutAdapter):
        return obj
    if isinstance(obj, BaseStatefulSpout) or (stateful and isinstance(obj, RewindableSpout)):
        return StatefulSpoutAdapter(obj)
    return PlainSpout(obj)
