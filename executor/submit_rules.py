"""The rules a topology must meet with its configuration, checked where it is submitted
(Nimbus, and LocalCluster through it) so that a mistake is one error line at submit instead of
workers that fail."""

from __future__ import annotations

from typing import Any, Mapping

from executor.checkpoint.wiring import check_checkpointing
from executor.structure import TopologyStructure


def check_topology(structure: TopologyStructure, conf: Mapping[str, Any]) -> None:
    """Raise InvalidTopologyError naming the component and the key of the first problem."""
    check_checkpointing(structure, conf)
