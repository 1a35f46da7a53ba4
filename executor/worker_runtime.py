"""What a worker process runs on, given to `WorkerProcess(runtime=...)`.

executor/worker_process.py's `ProcessRuntime` (a process of its own: ZooKeeper, the package its
supervisor extracted, ZeroMQ) and daemons/inprocess/workers.py's `InProcessRuntime` (threads of
LocalCluster: the in-memory cluster state, live topology objects, the in-process transport) both
are a `WorkerRuntime`; tests/unit/test_unit_seams.py holds them to these signatures.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Hashable, Mapping, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cluster_state.storm import StormClusterState
    from executor.errors import ComponentError
    from executor.topology import StormTopology
    from executor.transport.base import Transport
    from executor.worker import Worker, WorkerEvents


@runtime_checkable
class WorkerRuntime(Protocol):
    """The calls WorkerProcess makes on its runtime (from its start, on the starting thread)."""

    write_pid: bool    # record the process's pid for the supervisor (not when the worker is threads)
    carry_stats: bool  # a restarted worker takes its executors' all-time stats from their heartbeats

    def tune_process(self, conf: Mapping[str, Any]) -> None:
        """Apply the topology's process-wide settings, if the worker owns its process."""

    def cluster_state(self, conf: Mapping[str, Any]) -> StormClusterState:
        """The worker's connection to the cluster state (closed by the worker)."""

    def load_topology(self, storm_id: str, code_dir: Path) -> StormTopology:
        """The topology's live objects; InvalidTopologyError when they cannot be had."""

    def transport(self, host: str, conf: Mapping[str, Any]) -> Transport:
        """The transport between workers (closed by the worker)."""

    def address(self, host: str, port: int, storm_id: str) -> Hashable:
        """The transport address of the worker on (host, port) running `storm_id`."""

    def events(self, storm_id: str, on_error: Callable[[str, int, BaseException], None],
               on_died: Callable[[Worker, ComponentError], None]) -> WorkerEvents:
        """What the worker reports to: the worker process's handlers, plus any of the runner's."""
