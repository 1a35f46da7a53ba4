"""The one seam between the executors and what stands between them and a user's component.

A BasicBolt, a windowed bolt, a stateful bolt, a bolt forwarding the checkpoint stream and a
shell component each need something from the executor that Storm's plain bolt API does not
say: a batch loop, acks it gives for every input, pacing by a subprocess, release after a
death. They all say it through `Adapter` (its defaults are a plain bolt's answers), and
Which adapter wraps a component is chosen in executor/adapting.py: this module is the leaf
every adapter imports, so it imports none of them (nor anything else of the project's).
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable


@runtime_checkable
class ComponentAdapter(Protocol):
    """What a bolt executor asks of an adapted component (and a spout executor of a shell spout)."""

    paced: bool              # input_room() must be asked before each batch
    acks_every_input: bool   # every input it does not fail counts as acked (a BasicBolt's way)

    def execute_batch(self, batch: Iterable[tuple[int, Any]]) -> None:
        """Execute (task, tuple) pairs, in order."""
        ...

    def input_room(self) -> int:
        """How many more tuples it takes now (asked only when `paced`)."""
        ...

    def release_on_death(self) -> None:
        """After its executor died: free what must not outlive it (a subprocess)."""
        ...


class Adapter:
    """`ComponentAdapter` with a plain bolt's answers; adapters override what differs."""

    paced = False
    acks_every_input = False

    def execute(self, tup) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def execute_batch(self, batch) -> None:
        execute = self.execute
        for _task, tup in batch:
            execute(tup)

    def input_room(self) -> int:
        return 1 << 30

    def release_on_death(self) -> None:
        pass

    def gauges(self) -> dict[str, float]:
        """Numbers of this task's kind of component for its stats record (a windowed bolt's late
        tuples, ...); the executor adds its tasks' together."""
        return {}


def user_component(obj: Any) -> Any:
    """The user's component inside however many adapters wrap it."""
    while isinstance(obj, Adapter) and hasattr(obj, "user"):
        obj = obj.user
    return obj
