"""What Nimbus is given rather than builds: its topology code store.

`code_store.CodeStore` (`nimbus/stormdist/{id}`, distributed mode) and daemons/inprocess/code.py's
`LiveCodeStore` (live topology objects, LocalCluster) both are a `TopologyCodeStore`;
tests/unit/test_unit_seams.py holds them to these signatures. The upload inbox is CodeStore's
alone: only Nimbus's RPC handlers use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from executor.structure import TopologyStructure


@runtime_checkable
class TopologyCodeStore(Protocol):
    """The calls NimbusCore makes on its code store (all under its lock)."""

    def install(self, storm_id: str, package: Any, conf: Mapping[str, Any]) -> Path | str:
        """Keep a submitted topology's code and effective conf, whole or not at all."""

    def has(self, storm_id: str) -> bool:
        """Whether the topology's code is stored (recovery drops topologies whose code is gone)."""

    def topology_dir(self, storm_id: str) -> Path | str:
        """Where its code lives: the assignment's master code dir."""

    def read_conf(self, storm_id: str) -> dict[str, Any]:
        """The effective topology conf stored at install."""

    def read_structure(self, storm_id: str, max_bytes: int) -> TopologyStructure:
        """The topology's structure (components, streams, subscriptions)."""

    def stored_ids(self) -> list[str]:
        """The topologies stored (cleanup removes those no longer alive)."""

    def remove(self, storm_id: str) -> None:
        """Delete the topology's code; nothing when it is not stored."""
