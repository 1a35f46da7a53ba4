"""The one seam between the executors and what stands between them and a user's component.

A BasicBolt, a windowed bolt, a stateful bolt, a bolt forwarding the checkpoint stream and a
shell component each need something from the executor that Storm's plain bolt API does not
say: a batch loop, acks it gives for every input, pacing by a subprocess, release after a
death. They all say it through `Adapter` (its defaults are a plain bolt's answers). A spout
executor asks its spouts through `SpoutAdapter` the same way: the checkpoint spout runs while
the topology is inactive, a stateful spout takes the checkpoint steps, and a plain user spout
is a `PlainSpout` with the plain answers.

Which adapter wraps a component is chosen in executor/adapting.py: this module is the leaf
every adapter imports, so it imports none of them (nor anything else of the project's).
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable


class AdapterBase:
    """What bolt and spout adapters share."""

    def release_on_death(self) -> None:
        """After its executor died: free what must not outlive it (a subprocess)."""


# ---- bolts ----
@runtime_checkable
class ComponentAdapter(Protocol):
    """What a bolt executor asks of an adapted component."""

    paced: bool              # input_room() must be asked before each batch
    acks_every_input: bool   # every input it does not fail counts as acked (a BasicBolt's way)
    drains: bool             # it may keep input to execute later: drain() before each batch

    def execute_batch(self, batch: Iterable[tuple[int, Any]]) -> None:
        """Execute (task, tuple) pairs, in order."""
        ...

    def input_room(self) -> int:
        """How many more tuples it takes now (asked only when `paced`)."""
        ...

    def drain(self, most: int) -> int:
        """Execute up to `most` of the input it kept; how many (0: none kept, the executor takes
        its next batch). Asked only when `drains`."""
        ...

    def release_on_death(self) -> None:
        """After its executor died: free what must not outlive it (a subprocess)."""
        ...


class Adapter(AdapterBase):
    """`ComponentAdapter` with a plain bolt's answers; adapters override what differs."""

    paced = False
    acks_every_input = False
    drains = False

    def execute(self, tup) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def execute_batch(self, batch) -> None:
        execute = self.execute
        for _task, tup in batch:
            execute(tup)

    def input_room(self) -> int:
        return 1 << 30

    def drain(self, most: int) -> int:
        return 0

    def gauges(self) -> dict[str, float]:
        """Numbers of this task's kind of component for its stats record (a windowed bolt's late
        tuples, ...); the executor adds its tasks' together."""
        return {}

    def on_state_lost(self, ask) -> None:
        """Exactly-once: `ask()` tells the checkpoint spout that this task's committed state is
        gone (a checkpoint handler keeps it; executor/checkpoint/forwarder.py)."""


# ---- spouts ----
@runtime_checkable
class SpoutComponentAdapter(Protocol):
    """What a spout executor asks of every task's spout (executor/adapting.py adapts each)."""

    runs_while_inactive: bool  # next_tuple goes on while the topology is inactive (the checkpoint spout)
    takes_barriers: bool       # takes the checkpoint steps as tuples (exactly-once: a stateful spout)

    @property
    def spout(self) -> Any:
        """What the executor calls Storm's spout API on (open, next_tuple, ack, fail, ...)."""
        ...

    def handle_checkpoint(self, action: str, txid: int) -> bool:
        """Act on a transaction step (asked only when `takes_barriers`); False: not now."""
        ...

    def request_rollback(self, spout_task: int) -> None:
        """A tuple from task `spout_task` was failed in an exactly-once topology (sent to the
        checkpoint spout only)."""
        ...

    def wants_acks(self) -> bool:
        """Whether the spout acts on `ack(msg_id)` (asked only when `takes_barriers`: it is then
        told once the checkpoint covering the tuple commits)."""
        ...

    def gauges(self) -> dict[str, Any]:
        """What the stats record shows of this task beyond Storm's spout numbers."""
        ...

    def release_on_death(self) -> None:
        """After its executor died: free what must not outlive it (a subprocess)."""
        ...


class SpoutAdapter(AdapterBase):
    """`SpoutComponentAdapter` with a plain spout's answers; mixed in before `Spout` by a spout
    that is its own adapter (the checkpoint spout, a ShellSpout), or wrapping a user's spout."""

    runs_while_inactive = False
    takes_barriers = False

    @property
    def spout(self) -> Any:
        return self

    def handle_checkpoint(self, action: str, txid: int) -> bool:
        return False  # no state to act on: the step fails

    def wants_acks(self) -> bool:
        return True

    def request_rollback(self, spout_task: int) -> None:
        # only the checkpoint spout's task is ever sent this: anything else is a bug, said loudly
        raise NotImplementedError(f"{type(self).__name__} coordinates no checkpoints "
                                  f"(asked to roll back for task {spout_task})")

    def request_checkpoint(self, spout_task: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} coordinates no checkpoints "
                                  f"(asked for one by task {spout_task})")

    def gauges(self) -> dict[str, Any]:
        return {}

    def bind_status(self, status: Any) -> None:
        """The worker's TopologyStatus, for an adapter that acts on more than "active" (the
        checkpoint spout parks when asked); the executor hands it over before open."""

    def checkpoint_mark(self) -> Any:
        """Its CheckpointMark fields (a dict) for the worker's heartbeat, None if it has none."""
        return None


class PlainSpout(SpoutAdapter):
    """A user's spout that needs nothing beyond Storm's spout API: the executor calls the spout
    itself, so nothing stands between it and each next_tuple, ack and fail."""

    def __init__(self, user: Any):
        self.user = user

    @property
    def spout(self) -> Any:
        return self.user


def user_component(obj: Any) -> Any:
    """The user's component inside however many adapters wrap it."""
    while isinstance(obj, AdapterBase) and hasattr(obj, "user"):
        obj = obj.user
    return obj
